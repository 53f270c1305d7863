// Every route handler of the HTTP API (DESIGN §5), one group per resource
// and file: chat_handlers.cpp, conversation_handlers.cpp, kb_handlers.cpp,
// memory_handlers.cpp, health_handlers.cpp. Each serves one route of the
// table in routes.cpp; the router has already checked method and path.
#pragma once

#include <string_view>

#include <boost/asio/awaitable.hpp>

namespace ragtor::http {

struct handler_context;
struct exchange;

using handler_result = boost::asio::awaitable<void>;

// -- health (health_handlers.cpp) ----------------------------------------------------

handler_result health(handler_context& ctx, exchange& ex);
// GET /readyz: 200 {"status":"ready","checks":{store, kbs, cluster}}, or
// 503 "not_ready" naming the failing check.
handler_result ready(handler_context& ctx, exchange& ex);

// -- cluster (cluster_handlers.cpp) --------------------------------------------------

// GET /api/v1/cluster: {"self", "nodes": [{name, address, roles, kbs,
// status, heartbeat_age_ms, started_at_ms}]}.
handler_result cluster_members(handler_context& ctx, exchange& ex);

// -- chat (chat_handlers.cpp) ----------------------------------------------------------

// POST /api/v1/chat/stream and /api/v1/chat: the same turn as SSE or as one
// JSON object; the connection closes afterwards.
handler_result chat_stream(handler_context& ctx, exchange& ex);
handler_result chat_json(handler_context& ctx, exchange& ex);
handler_result chat_stop(handler_context& ctx, exchange& ex);
// GET /api/v1/chat/stream/{request_id}: re-attaches to a running turn
// (events after Last-Event-ID), or replays a finished one from the store.
handler_result chat_resume(handler_context& ctx, exchange& ex);
handler_result clear_conversation(handler_context& ctx, exchange& ex);
handler_result feedback(handler_context& ctx, exchange& ex);

// -- OpenAI-compatible façade (openai_handlers.cpp) ------------------------------------

// GET /v1/models: auto, general and the served KBs as models.
handler_result openai_models(handler_context& ctx, exchange& ex);
// POST /v1/chat/completions: a turn in the OpenAI shapes (stream or not).
handler_result openai_chat(handler_context& ctx, exchange& ex);

// -- conversations (conversation_handlers.cpp) -------------------------------------------

handler_result list_conversations(handler_context& ctx, exchange& ex);
handler_result conversation_messages(handler_context& ctx, exchange& ex);
handler_result conversation_summary(handler_context& ctx, exchange& ex);
handler_result delete_conversation(handler_context& ctx, exchange& ex);

// -- knowledge bases (kb_handlers.cpp) -------------------------------------------------

handler_result list_kbs(handler_context& ctx, exchange& ex);
handler_result create_kb(handler_context& ctx, exchange& ex);
handler_result get_kb(handler_context& ctx, exchange& ex);
handler_result ingest_documents(handler_context& ctx, exchange& ex);
handler_result search_kb(handler_context& ctx, exchange& ex);
handler_result kb_pipeline(handler_context& ctx, exchange& ex);

// Whether a documents body is NDJSON, by its Content-Type.
bool is_ndjson_type(std::string_view content_type);

// -- user memory (memory_handlers.cpp) ---------------------------------------------------

handler_result get_core_memory(handler_context& ctx, exchange& ex);
handler_result put_core_memory(handler_context& ctx, exchange& ex);
handler_result list_memories(handler_context& ctx, exchange& ex);
handler_result delete_memories(handler_context& ctx, exchange& ex);
handler_result delete_memory(handler_context& ctx, exchange& ex);

// -- API key administration (admin_handlers.cpp) ----------------------------------------

handler_result admin_create_key(handler_context& ctx, exchange& ex);
handler_result admin_list_keys(handler_context& ctx, exchange& ex);
handler_result admin_revoke_key(handler_context& ctx, exchange& ex);

// -- admin console and metrics (console_handlers.cpp, docs/admin.md) -------------------

// GET /admin: the console page (embedded at build time).
handler_result admin_page(handler_context& ctx, exchange& ex);
// GET /metrics: Prometheus text format.
handler_result metrics_text(handler_context& ctx, exchange& ex);
// GET /admin/api/nodes: {"self", "nodes": [{name, roles, status, uptime_ms,
// actors, sessions, streams, rss_bytes, threads, cpu_seconds, open_fds}]}.
handler_result admin_nodes(handler_context& ctx, exchange& ex);
// GET /admin/api/actors[?kind=&node=]: {"actors": [status objects]}.
handler_result admin_actors(handler_context& ctx, exchange& ex);
// GET /admin/api/actors/{node}/{id}: one actor's status object.
handler_result admin_actor(handler_context& ctx, exchange& ex);
// GET /admin/api/sessions and /admin/api/streams: the session and stream
// actors' status objects.
handler_result admin_sessions(handler_context& ctx, exchange& ex);
handler_result admin_streams(handler_context& ctx, exchange& ex);
// POST /admin/api/streams/{request_id}/stop: cancels a running turn (its
// client gets error + done).
handler_result admin_stop_stream(handler_context& ctx, exchange& ex);
// POST /admin/api/sessions/{user}/{session}/evict: ends a session actor.
handler_result admin_evict_session(handler_context& ctx, exchange& ex);
// GET /admin/api/loggers, PUT /admin/api/loggers {"name", "level"}.
handler_result admin_loggers(handler_context& ctx, exchange& ex);
handler_result admin_set_logger(handler_context& ctx, exchange& ex);
// GET /admin/api/events?view=...: the view's JSON once a second (SSE).
handler_result admin_events(handler_context& ctx, exchange& ex);

}  // namespace ragtor::http
