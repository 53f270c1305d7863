// The route table of the HTTP API (DESIGN §5) as a list macro, so that the
// server (routes.cpp, with its handlers) and the HTTP fuzz target
// (tests/fuzz/fuzz_http_request.cpp, without them) build their routers from
// one list. Each entry: X(method, pattern, name, scope, handler[, body
// [, admission]]) — defaults: body json, admission plain. Earlier entries
// win (the router tries them in order).
#pragma once

// clang-format off
#define RAGTOR_API_ROUTES(X) \
  X("GET", "/healthz", "health", none, health) \
  X("GET", "/readyz", "ready", none, ready) \
  X("GET", "/api/v1/cluster", "cluster_members", admin, cluster_members) \
  X("GET", "/v1/models", "openai_models", chat, openai_models) \
  X("POST", "/v1/chat/completions", "openai_chat", chat, openai_chat, json, turn) \
  X("POST", "/api/v1/chat/stream", "chat_stream", chat, chat_stream, json, turn) \
  X("GET", "/api/v1/chat/stream/{request_id}", "chat_resume", chat, chat_resume) \
  X("POST", "/api/v1/chat", "chat_json", chat, chat_json, json, turn) \
  X("POST", "/api/v1/chat/stop", "chat_stop", chat, chat_stop) \
  X("POST", "/api/v1/clear", "clear_conversation", chat, clear_conversation) \
  X("POST", "/api/v1/feedback", "feedback", chat, feedback) \
  X("GET", "/api/v1/conversations", "list_conversations", chat, list_conversations) \
  X("DELETE", "/api/v1/conversations/{conversation}", "delete_conversation", chat, delete_conversation) \
  X("GET", "/api/v1/conversations/{conversation}/messages", "conversation_messages", chat, conversation_messages) \
  X("GET", "/api/v1/conversations/{conversation}/summary", "conversation_summary", chat, conversation_summary) \
  X("GET", "/api/v1/kbs", "list_kbs", kb_read, list_kbs) \
  X("POST", "/api/v1/kbs", "create_kb", kb_write, create_kb) \
  X("GET", "/api/v1/kbs/{kb}", "get_kb", kb_read, get_kb) \
  X("POST", "/api/v1/kbs/{kb}/documents", "ingest_documents", kb_write, ingest_documents, documents) \
  X("POST", "/api/v1/kbs/{kb}/search", "search_kb", kb_read, search_kb) \
  X("GET", "/api/v1/kbs/{kb}/pipeline", "kb_pipeline", kb_read, kb_pipeline) \
  X("GET", "/api/v1/users/{user}/memory", "get_core_memory", chat, get_core_memory) \
  X("PUT", "/api/v1/users/{user}/memory", "put_core_memory", chat, put_core_memory) \
  X("GET", "/api/v1/users/{user}/memories", "list_memories", chat, list_memories) \
  X("DELETE", "/api/v1/users/{user}/memories", "delete_memories", chat, delete_memories) \
  X("DELETE", "/api/v1/users/{user}/memories/{memory}", "delete_memory", chat, delete_memory) \
  X("POST", "/admin/api/keys", "admin_create_key", admin, admin_create_key) \
  X("GET", "/admin/api/keys", "admin_list_keys", admin, admin_list_keys) \
  X("DELETE", "/admin/api/keys/{name}", "admin_revoke_key", admin, admin_revoke_key) \
  X("GET", "/admin", "admin_page", none, admin_page) \
  X("GET", "/metrics", "metrics", admin, metrics_text) \
  X("GET", "/admin/api/nodes", "admin_nodes", admin, admin_nodes) \
  X("GET", "/admin/api/actors", "admin_actors", admin, admin_actors) \
  X("GET", "/admin/api/actors/{node}/{id}", "admin_actor", admin, admin_actor) \
  X("GET", "/admin/api/sessions", "admin_sessions", admin, admin_sessions) \
  X("GET", "/admin/api/streams", "admin_streams", admin, admin_streams) \
  X("POST", "/admin/api/streams/{request_id}/stop", "admin_stop_stream", admin, admin_stop_stream) \
  X("POST", "/admin/api/sessions/{user}/{session}/evict", "admin_evict_session", admin, admin_evict_session) \
  X("GET", "/admin/api/loggers", "admin_loggers", admin, admin_loggers) \
  X("PUT", "/admin/api/loggers", "admin_set_logger", admin, admin_set_logger, json) \
  X("GET", "/admin/api/events", "admin_events", admin, admin_events)
// clang-format on
