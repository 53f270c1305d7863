#include "http/routes.hpp"

#include "http/handlers.hpp"

namespace ragtor::http {

std::vector<route> api_routes() {
  using enum body_kind;
  // clang-format off
  return {
    {"GET",    "/healthz",                                     "health",                health},
    {"GET",    "/v1/models",                                   "openai_models",         openai_models},
    {"POST",   "/v1/chat/completions",                         "openai_chat",           openai_chat},
    {"POST",   "/api/v1/chat/stream",                          "chat_stream",           chat_stream},
    {"GET",    "/api/v1/chat/stream/{request_id}",             "chat_resume",           chat_resume},
    {"POST",   "/api/v1/chat",                                 "chat_json",             chat_json},
    {"POST",   "/api/v1/chat/stop",                            "chat_stop",             chat_stop},
    {"POST",   "/api/v1/clear",                                "clear_conversation",    clear_conversation},
    {"POST",   "/api/v1/feedback",                             "feedback",              feedback},
    {"GET",    "/api/v1/conversations",                        "list_conversations",    list_conversations},
    {"DELETE", "/api/v1/conversations/{conversation}",         "delete_conversation",   delete_conversation},
    {"GET",    "/api/v1/conversations/{conversation}/messages", "conversation_messages", conversation_messages},
    {"GET",    "/api/v1/conversations/{conversation}/summary", "conversation_summary",  conversation_summary},
    {"GET",    "/api/v1/kbs",                                  "list_kbs",              list_kbs},
    {"POST",   "/api/v1/kbs",                                  "create_kb",             create_kb},
    {"GET",    "/api/v1/kbs/{kb}",                             "get_kb",                get_kb},
    {"POST",   "/api/v1/kbs/{kb}/documents",                   "ingest_documents",      ingest_documents, documents},
    {"POST",   "/api/v1/kbs/{kb}/search",                      "search_kb",             search_kb},
    {"GET",    "/api/v1/kbs/{kb}/pipeline",                    "kb_pipeline",           kb_pipeline},
    {"GET",    "/api/v1/users/{user}/memory",                  "get_core_memory",       get_core_memory},
    {"PUT",    "/api/v1/users/{user}/memory",                  "put_core_memory",       put_core_memory},
    {"GET",    "/api/v1/users/{user}/memories",                "list_memories",         list_memories},
    {"DELETE", "/api/v1/users/{user}/memories",                "delete_memories",       delete_memories},
    {"DELETE", "/api/v1/users/{user}/memories/{memory}",       "delete_memory",         delete_memory},
  };
  // clang-format on
}

}  // namespace ragtor::http
