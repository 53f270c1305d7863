// The turn as an explicit state machine, visible with debug: true (DESIGN
// §5.1, seed 002): the SSE stream carries the route_decision and one
// execution_log per node — route, history, retrieve, generate, persist —
// (and memory unless incognito) in order, each {node, duration_ms, input,
// output}; /api/v1/chat returns
// the same log. Without debug none of it is sent.
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

using debug_log_test = ragtor_server_test;

constexpr const char* question = "How long do the batteries of the Lumenlatch K7 last?";

TEST_F(debug_log_test, every_node_is_logged_in_order_with_timing) {
  auto r =
      chat_stream(port(), chat_body("alice", "s1", question, "test", {{"debug", "true", true}}));
  ASSERT_TRUE(well_formed_stream(r));
  std::vector<std::string> nodes;
  bool route_seen = false;
  for (auto& ev : r.events) {
    auto status = ev.str("/status");
    if (status == "route_decision") {
      route_seen = true;
      EXPECT_EQ(ev.str("/content/kb_prefix"), "test");
      EXPECT_TRUE(nodes.empty()) << "route_decision comes before the logs";
    }
    if (status != "execution_log")
      continue;
    auto c = ev.at("/content");
    nodes.push_back(c.str("/node"));
    EXPECT_TRUE(c.has("/duration_ms"));
    EXPECT_FALSE(c.is_null("/input"));
    EXPECT_FALSE(c.is_null("/output"));
  }
  EXPECT_TRUE(route_seen);
  EXPECT_EQ(nodes, (std::vector<std::string>{"route", "history", "memory", "retrieve", "generate",
                                             "persist"}));
  for (auto& ev : r.events)
    if (ev.str("/status") == "execution_log" && ev.str("/content/node") == "retrieve") {
      EXPECT_GT(ev.integer("/content/output/retrieval_count"), 0);
      EXPECT_EQ(ev.str("/content/input/worker_name"), "test:hybrid_agent:retrieve_only");
      EXPECT_FALSE(ev.items("/content/output/trace").empty());
    }

  // Without debug: no route_decision, no logs.
  auto quiet = chat_stream(port(), chat_body("alice", "s2", question));
  ASSERT_TRUE(well_formed_stream(quiet));
  for (auto& ev : quiet.events) {
    EXPECT_NE(ev.str("/status"), "execution_log");
    EXPECT_NE(ev.str("/status"), "route_decision");
  }
}

TEST_F(debug_log_test, the_json_endpoint_returns_the_execution_log) {
  auto res = request(port(), "POST", "/api/v1/chat",
                     chat_body("bob", "s1", question, "test", {{"debug", "true", true}}));
  ASSERT_EQ(res.status, 200) << res.body;
  auto body = json::parse(res.body);
  auto logs = body.items("/execution_log");
  ASSERT_EQ(logs.size(), 6u) << res.body;
  EXPECT_EQ(logs.front().str("/node"), "route");
  EXPECT_EQ(logs.back().str("/node"), "persist");
  EXPECT_EQ(logs.back().str("/output/message_id"), body.str("/message_id"));
  auto plain =
      json::parse(request(port(), "POST", "/api/v1/chat", chat_body("bob", "s2", question)).body);
  EXPECT_FALSE(plain.has("/execution_log"));
}

}  // namespace
}  // namespace ragtor::test
