// Automatic routing with a model (router.mode = "llm") over the real wire
// protocol: a good JSON decision routes the turn (KB and suggested agent), a
// messy one still parses, an unusable one falls back to the heuristic with
// method "fallback", and a model slower than router.llm_timeout_ms falls
// back with method "timeout". The decision is returned by /api/v1/chat.
#include <gtest/gtest.h>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

std::string script() {
  return R"({"rules":[)"
         R"({"match":"lighthouse","reply":"{\"kb_prefix\": \"test\", \"confidence\": 0.95, \"reason\": \"about Port Quellin\", \"intent\": \"kb_query\", \"agent_type\": \"graph_agent\"}"},)"
         R"({"match":"messy","reply":"Sure! ```json\n{\"KB_PREFIX\": \"TEST\", \"confidence\": \"0.9\",}\n``` Hope that helps."},)"
         R"({"match":"weather","reply":"{\"kb_prefix\": \"general\", \"confidence\": 0.9, \"intent\": \"chitchat\"}"},)"
         R"({"match":"broken","reply":"I would pick the Port Quellin one"},)"
         R"({"match":"slow","reply":"{\"kb_prefix\": \"test\", \"confidence\": 1}","first_token_delay_ms":1500})"
         R"(]})";
}

class router_llm_test : public ragtor_server_test {
protected:
  fake_openai fake_{script()};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_ROUTER__MODE"] = "llm";
    env["RAGTOR_ROUTER__LLM_TIMEOUT_MS"] = "400";
    return env;
  }

  json route_of(const std::string& message) {
    auto res = request(port(), "POST", "/api/v1/chat", chat_body("u", "s", message, ""));
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body).at("/route_decision");
  }
};

TEST_F(router_llm_test, the_model_picks_the_kb_and_agent) {
  auto rd = route_of("When was the lighthouse of Port Quellin built?");
  EXPECT_EQ(rd.str("/method"), "llm");
  EXPECT_EQ(rd.str("/kb_prefix"), "test");
  EXPECT_EQ(rd.str("/agent_type"), "graph_agent");
  EXPECT_EQ(rd.str("/worker_name"), "test:graph_agent:retrieve_only");
  EXPECT_EQ(rd.str("/reason"), "about Port Quellin");
  // The router's request is a non-streaming completion listing the KBs.
  EXPECT_GE(fake_.stat("chat_requests"), 2) << "router + answer";
}

TEST_F(router_llm_test, messy_json_still_routes_and_general_means_no_retrieval) {
  auto rd = route_of("a messy question about the lighthouse");
  EXPECT_EQ(rd.str("/method"), "llm");
  EXPECT_EQ(rd.str("/kb_prefix"), "test");
  auto g = route_of("how is the weather today");
  EXPECT_EQ(g.str("/kb_prefix"), "general");
  EXPECT_EQ(g.str("/worker_name"), "");
}

TEST_F(router_llm_test, unusable_or_late_replies_fall_back_to_the_heuristic) {
  auto rd = route_of("broken: tell me about Port Quellin");
  EXPECT_EQ(rd.str("/method"), "fallback");
  EXPECT_NE(rd.str("/reason").find("unusable"), std::string::npos) << rd.dump();
  auto slow = route_of("slow: tell me about Port Quellin");
  EXPECT_EQ(slow.str("/method"), "timeout") << slow.dump();
}

}  // namespace
}  // namespace ragtor::test
