#include "http/routes.hpp"

#include "http/handlers.hpp"

namespace ragtor::http {

std::vector<route> api_routes() {
  using enum body_kind;
  using enum scope;
  using enum admission;
  // clang-format off
  return {
    {"GET",    "/healthz",                                     "health",                none,     health},
    {"GET",    "/readyz",                                      "ready",                 none,     ready},
    {"GET",    "/api/v1/cluster",                              "cluster_members",       admin,    cluster_members},
    {"GET",    "/v1/models",                                   "openai_models",         chat,     openai_models},
    {"POST",   "/v1/chat/completions",                         "openai_chat",           chat,     openai_chat, json, turn},
    {"POST",   "/api/v1/chat/stream",                          "chat_stream",           chat,     chat_stream, json, turn},
    {"GET",    "/api/v1/chat/stream/{request_id}",             "chat_resume",           chat,     chat_resume},
    {"POST",   "/api/v1/chat",                                 "chat_json",             chat,     chat_json, json, turn},
    {"POST",   "/api/v1/chat/stop",                            "chat_stop",             chat,     chat_stop},
    {"POST",   "/api/v1/clear",                                "clear_conversation",    chat,     clear_conversation},
    {"POST",   "/api/v1/feedback",                             "feedback",              chat,     feedback},
    {"GET",    "/api/v1/conversations",                        "list_conversations",    chat,     list_conversations},
    {"DELETE", "/api/v1/conversations/{conversation}",         "delete_conversation",   chat,     delete_conversation},
    {"GET",    "/api/v1/conversations/{conversation}/messages", "conversation_messages", chat,     conversation_messages},
    {"GET",    "/api/v1/conversations/{conversation}/summary", "conversation_summary",  chat,     conversation_summary},
    {"GET",    "/api/v1/kbs",                                  "list_kbs",              kb_read,  list_kbs},
    {"POST",   "/api/v1/kbs",                                  "create_kb",             kb_write, create_kb},
    {"GET",    "/api/v1/kbs/{kb}",                             "get_kb",                kb_read,  get_kb},
    {"POST",   "/api/v1/kbs/{kb}/documents",                   "ingest_documents",      kb_write, ingest_documents, documents},
    {"POST",   "/api/v1/kbs/{kb}/search",                      "search_kb",             kb_read,  search_kb},
    {"GET",    "/api/v1/kbs/{kb}/pipeline",                    "kb_pipeline",           kb_read,  kb_pipeline},
    {"GET",    "/api/v1/users/{user}/memory",                  "get_core_memory",       chat,     get_core_memory},
    {"PUT",    "/api/v1/users/{user}/memory",                  "put_core_memory",       chat,     put_core_memory},
    {"GET",    "/api/v1/users/{user}/memories",                "list_memories",         chat,     list_memories},
    {"DELETE", "/api/v1/users/{user}/memories",                "delete_memories",       chat,     delete_memories},
    {"DELETE", "/api/v1/users/{user}/memories/{memory}",       "delete_memory",         chat,     delete_memory},
    {"POST",   "/admin/api/keys",                              "admin_create_key",      admin,    admin_create_key},
    {"GET",    "/admin/api/keys",                              "admin_list_keys",       admin,    admin_list_keys},
    {"DELETE", "/admin/api/keys/{name}",                       "admin_revoke_key",      admin,    admin_revoke_key},
    {"GET",    "/admin",                                       "admin_page",            none,     admin_page},
    {"GET",    "/metrics",                                     "metrics",               admin,    metrics_text},
    {"GET",    "/admin/api/nodes",                             "admin_nodes",           admin,    admin_nodes},
    {"GET",    "/admin/api/actors",                            "admin_actors",          admin,    admin_actors},
    {"GET",    "/admin/api/actors/{node}/{id}",                "admin_actor",           admin,    admin_actor},
    {"GET",    "/admin/api/sessions",                          "admin_sessions",        admin,    admin_sessions},
    {"GET",    "/admin/api/streams",                           "admin_streams",         admin,    admin_streams},
    {"POST",   "/admin/api/streams/{request_id}/stop",         "admin_stop_stream",     admin,    admin_stop_stream},
    {"POST",   "/admin/api/sessions/{user}/{session}/evict",   "admin_evict_session",   admin,    admin_evict_session},
    {"GET",    "/admin/api/loggers",                           "admin_loggers",         admin,    admin_loggers},
    {"PUT",    "/admin/api/loggers",                           "admin_set_logger",      admin,    admin_set_logger, json},
    {"GET",    "/admin/api/events",                            "admin_events",          admin,    admin_events},
  };
  // clang-format on
}

}  // namespace ragtor::http
