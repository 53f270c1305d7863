// The HTTP route table, matched without a socket: every route of
// api_routes() is reached by its method and path with its parameters
// decoded; an unknown path is a 404 (no match, no Allow), a known path
// with another method a 405 naming the methods it accepts.
#include "http/router.hpp"

#include <set>

#include <gtest/gtest.h>

#include "http/routes.hpp"

namespace ragtor::http {
namespace {

using param_list = std::vector<std::pair<std::string, std::string>>;

struct route_case {
  std::string method;
  std::string path;
  std::string handler;  // the route's name
  param_list params;
};

// One case per entry of the table in http/routes.cpp.
std::vector<route_case> table_cases() {
  return {
      {"GET", "/healthz", "health", {}},
      {"GET", "/readyz", "ready", {}},
      {"GET", "/v1/models", "openai_models", {}},
      {"POST", "/v1/chat/completions", "openai_chat", {}},
      {"GET", "/api/v1/chat/stream/req_1", "chat_resume", {{"request_id", "req_1"}}},
      {"POST", "/admin/api/keys", "admin_create_key", {}},
      {"GET", "/admin/api/keys", "admin_list_keys", {}},
      {"DELETE", "/admin/api/keys/bot%2D1", "admin_revoke_key", {{"name", "bot-1"}}},
      {"GET", "/admin", "admin_page", {}},
      {"GET", "/metrics", "metrics", {}},
      {"GET", "/admin/api/nodes", "admin_nodes", {}},
      {"GET", "/admin/api/actors", "admin_actors", {}},
      {"GET", "/admin/api/actors/node-a/42", "admin_actor", {{"node", "node-a"}, {"id", "42"}}},
      {"GET", "/admin/api/sessions", "admin_sessions", {}},
      {"GET", "/admin/api/streams", "admin_streams", {}},
      {"POST", "/admin/api/streams/req%201/stop", "admin_stop_stream", {{"request_id", "req 1"}}},
      {"POST",
       "/admin/api/sessions/ann/s%2F1/evict",
       "admin_evict_session",
       {{"user", "ann"}, {"session", "s/1"}}},
      {"GET", "/admin/api/loggers", "admin_loggers", {}},
      {"PUT", "/admin/api/loggers", "admin_set_logger", {}},
      {"GET", "/admin/api/events", "admin_events", {}},
      {"POST", "/api/v1/chat/stream", "chat_stream", {}},
      {"POST", "/api/v1/chat", "chat_json", {}},
      {"POST", "/api/v1/chat/stop", "chat_stop", {}},
      {"POST", "/api/v1/clear", "clear_conversation", {}},
      {"POST", "/api/v1/feedback", "feedback", {}},
      {"GET", "/api/v1/conversations", "list_conversations", {}},
      {"DELETE", "/api/v1/conversations/c1", "delete_conversation", {{"conversation", "c1"}}},
      {"GET",
       "/api/v1/conversations/c1/messages",
       "conversation_messages",
       {{"conversation", "c1"}}},
      {"GET", "/api/v1/conversations/c1/summary", "conversation_summary", {{"conversation", "c1"}}},
      {"GET", "/api/v1/cluster", "cluster_members", {}},
      {"GET", "/api/v1/kbs", "list_kbs", {}},
      {"POST", "/api/v1/kbs", "create_kb", {}},
      {"GET", "/api/v1/kbs/harbour", "get_kb", {{"kb", "harbour"}}},
      {"POST", "/api/v1/kbs/harbour/documents", "ingest_documents", {{"kb", "harbour"}}},
      {"POST", "/api/v1/kbs/harbour/search", "search_kb", {{"kb", "harbour"}}},
      {"GET", "/api/v1/kbs/harbour/pipeline", "kb_pipeline", {{"kb", "harbour"}}},
      {"GET", "/api/v1/users/ann/memory", "get_core_memory", {{"user", "ann"}}},
      {"PUT", "/api/v1/users/ann/memory", "put_core_memory", {{"user", "ann"}}},
      {"GET", "/api/v1/users/ann/memories", "list_memories", {{"user", "ann"}}},
      {"DELETE", "/api/v1/users/ann/memories", "delete_memories", {{"user", "ann"}}},
      {"DELETE",
       "/api/v1/users/ann/memories/mem_7",
       "delete_memory",
       {{"user", "ann"}, {"memory", "mem_7"}}},
  };
}

class http_route_table : public ::testing::TestWithParam<route_case> {
protected:
  router routes_{api_routes()};
};

TEST_P(http_route_table, method_and_path_reach_the_handler_with_its_params) {
  const auto& c = GetParam();
  auto m = routes_.match(c.method, c.path);
  ASSERT_NE(m.matched, nullptr) << c.method << " " << c.path;
  EXPECT_EQ(m.matched->name, c.handler);
  EXPECT_EQ(m.matched->method, c.method);
  EXPECT_NE(m.matched->handler, nullptr);
  EXPECT_EQ(m.allow, "");
  ASSERT_EQ(m.params.size(), c.params.size());
  for (auto& [name, value] : c.params)
    EXPECT_EQ(m.params[name], value) << name;
}

INSTANTIATE_TEST_SUITE_P(every_route, http_route_table, ::testing::ValuesIn(table_cases()),
                         [](const auto& info) { return info.param.handler; });

TEST(http_router, the_cases_cover_the_whole_table_once) {
  std::multiset<std::string> tested;
  for (auto& c : table_cases())
    tested.insert(c.handler);
  std::multiset<std::string> table;
  for (auto& r : api_routes())
    table.insert(std::string{r.name});
  EXPECT_EQ(tested, table);
}

TEST(http_router, only_ingestion_reads_a_documents_body) {
  for (auto& r : api_routes())
    EXPECT_EQ(r.body == body_kind::documents, r.name == "ingest_documents") << r.name;
}

TEST(http_router, unknown_paths_match_nothing_and_allow_nothing) {
  router routes{api_routes()};
  for (auto path : {"/", "", "/api/v1/no-such-thing", "/api/v2/chat", "/healthz/", "healthz",
                    "/api/v1/kbs/", "/api/v1/kbs//documents", "/api/v1/kbs/harbour/unknown",
                    "/api/v1/kbs/harbour/documents/extra", "/api/v1/conversations/c1/other",
                    "/api/v1/users/ann", "/api/v1/users/ann/memories/", "/API/V1/KBS",
                    "/admin/api/keys/", "/api/v1/chat/stream/req_1/x", "/v1/chat",
                    "/v1/models/x"}) {
    for (auto method : {"GET", "POST"}) {
      auto m = routes.match(method, path);
      EXPECT_EQ(m.matched, nullptr) << method << " " << path;
      EXPECT_EQ(m.allow, "") << method << " " << path << ": a 404, not a 405";
    }
  }
}

TEST(http_router, wrong_method_names_the_allowed_ones) {
  router routes{api_routes()};
  struct wrong {
    std::string method, path, allow;
  };
  for (auto& w : std::vector<wrong>{
           {"POST", "/healthz", "GET"},
           {"HEAD", "/healthz", "GET"},
           {"GET", "/api/v1/chat/stream", "POST"},
           {"PUT", "/api/v1/chat", "POST"},
           {"GET", "/api/v1/chat/stop", "POST"},
           {"DELETE", "/api/v1/clear", "POST"},
           {"GET", "/api/v1/feedback", "POST"},
           {"POST", "/api/v1/conversations", "GET"},
           {"GET", "/api/v1/conversations/c1", "DELETE"},
           {"POST", "/api/v1/conversations/c1/messages", "GET"},
           {"POST", "/api/v1/conversations/c1/summary", "GET"},
           {"DELETE", "/api/v1/kbs", "GET, POST"},
           {"DELETE", "/api/v1/kbs/harbour", "GET"},
           {"GET", "/api/v1/kbs/harbour/documents", "POST"},
           {"GET", "/api/v1/kbs/harbour/search", "POST"},
           {"POST", "/api/v1/kbs/harbour/pipeline", "GET"},
           {"DELETE", "/api/v1/users/ann/memory", "GET, PUT"},
           {"POST", "/api/v1/users/ann/memories", "GET, DELETE"},
           {"GET", "/api/v1/users/ann/memories/mem_7", "DELETE"},
       }) {
    auto m = routes.match(w.method, w.path);
    EXPECT_EQ(m.matched, nullptr) << w.method << " " << w.path;
    EXPECT_EQ(m.allow, w.allow) << w.method << " " << w.path;
  }
}

TEST(http_router, parameters_are_percent_decoded_and_one_segment_each) {
  router routes{api_routes()};
  auto kb = routes.match("GET", "/api/v1/kbs/my%2Ekb%20x/pipeline");
  ASSERT_NE(kb.matched, nullptr);
  EXPECT_EQ(kb.params["kb"], "my.kb x");
  // An escaped '/' stays inside its segment.
  auto user = routes.match("GET", "/api/v1/users/a%2Fb/memory");
  ASSERT_NE(user.matched, nullptr);
  EXPECT_EQ(user.params["user"], "a/b");
  // '+' is a space only in queries, not in paths.
  auto conv = routes.match("DELETE", "/api/v1/conversations/a+b");
  ASSERT_NE(conv.matched, nullptr);
  EXPECT_EQ(conv.params["conversation"], "a+b");
  EXPECT_EQ(conv.params["kb"], "") << "a parameter the pattern does not have";
}

TEST(http_router, a_path_boost_url_cannot_parse_matches_nothing) {
  router routes{api_routes()};
  for (auto path : {"/api/v1/kbs/a%zz", "/api/v1/kbs/%", "/api/v1/users/a%2/memory"}) {
    auto m = routes.match("GET", path);
    EXPECT_EQ(m.matched, nullptr) << path;
    EXPECT_EQ(m.allow, "") << path;
  }
}

TEST(http_router, earlier_routes_win_and_literals_compare_exactly) {
  auto dummy = [](handler_context&, exchange&) -> boost::asio::awaitable<void> { co_return; };
  router routes{{
      {"GET", "/items/{id}", "by_id", scope::chat, dummy},
      {"GET", "/items/new", "new_item", scope::chat, dummy},
      {"POST", "/items/new", "create", scope::chat, dummy},
  }};
  EXPECT_EQ(routes.match("GET", "/items/new").matched->name, "by_id");
  EXPECT_EQ(routes.match("POST", "/items/new").matched->name, "create");
  EXPECT_EQ(routes.match("PUT", "/items/new").allow, "GET, POST");
  EXPECT_EQ(routes.match("GET", "/items/NEW").params["id"], "NEW");
}

}  // namespace
}  // namespace ragtor::http
