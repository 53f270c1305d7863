// The tool-calling agent (seed 001) on a KB with answer_mode "tool_agent":
// the fake model scripts tool calls in the OpenAI tools format (rules
// "tool_calls", "tool_results"), and the tests check what the agent did —
// the tools it ran, the limit, refusals — in the debug execution log, and
// that the answer is generated from the evidence it collected.
#include <gtest/gtest.h>

#include <future>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* answer = "The K7 runs on four AA batteries.";

// Agent rules (by its system prompt) first, then the generation default.
std::string script(const std::string& agent_rules) {
  return std::string{R"({"default":{"reply":")"} + answer + R"("},"rules":[)" + agent_rules + "]}";
}

constexpr const char* agent_sys = R"("system":"You are a retrieval agent")";

class tool_agent_test : public ragtor_server_test {
protected:
  fake_openai fake_{script(std::string{"{"} + agent_sys + R"(,"tool_results":1,"reply":"READY"},{)"
                           + agent_sys
                           + R"(,"tool_calls":[{"name":"vector_retrieve","arguments":{"query":"K7 battery life"}}]})")};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_LLM__MAX_RETRIES"] = "0";
    return env;
  }

  void make_kb(const std::string& extra) {
    auto res = request(port(), "POST", "/api/v1/kbs",
                       R"({"name":"agentkb","answer_mode":"tool_agent","description":"door locks")"
                           + extra + "}");
    ASSERT_EQ(res.status, 201) << res.body;
    res = request(
        port(), "POST", "/api/v1/kbs/agentkb/documents",
        R"({"documents":[{"id":"b1","text":"The Lumenlatch K7 runs on four AA batteries that last about fourteen months."},)"
        R"({"id":"b2","text":"The Lumenlatch K5 battery pack is charged over USB in two hours."}]})");
    ASSERT_EQ(res.status, 200) << res.body;
  }

  stream_result turn(const std::string& message) {
    auto r = chat_stream(port(),
                         chat_body("tina", "s1", message, "agentkb", {{"debug", "true", true}}));
    EXPECT_TRUE(well_formed_stream(r));
    return r;
  }

};

TEST_F(tool_agent_test, runs_the_scripted_tool_calls_then_answers_from_the_evidence) {
  make_kb("");
  auto r = turn("How long do the batteries last?");
  EXPECT_EQ(r.answer(), answer);
  auto decisions = r.execution_logs("agent");
  ASSERT_EQ(decisions.size(), 2u);
  EXPECT_EQ(decisions[0].str("/output/decision"), "tool calls");
  EXPECT_EQ(decisions[0].str("/output/tool_calls/0/name"), "vector_retrieve");
  EXPECT_EQ(decisions[1].str("/output/decision"), "ready: no more tool calls");
  auto tools = r.execution_logs("tool");
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0].str("/input/name"), "vector_retrieve");
  EXPECT_GT(tools[0].integer("/output/evidence"), 0);
  EXPECT_EQ(fake_.stat("chat_with_tools"), 2);
  // The answer was written from the evidence with the XML mega-prompt.
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  auto system = sent.items("/messages")[0].str("/content");
  EXPECT_NE(system.find("<documents>"), std::string::npos) << system;
  EXPECT_NE(system.find("fourteen months"), std::string::npos) << system;
  EXPECT_NE(system.find("<cite doc_id="), std::string::npos) << system;
  EXPECT_FALSE(sent.has("/tools")) << "the answer itself is generated without tools";
}

TEST_F(tool_agent_test, stops_at_the_tool_call_limit) {
  make_kb(R"(,"max_tool_calls":2)");
  fake_.set_script(script(
      std::string{"{"} + agent_sys
      + R"(,"tool_calls":[{"name":"vector_retrieve","arguments":{"query":"K7 batteries"}},)"
        R"({"name":"query_rewrite","arguments":{"question":"how long"}},)"
        R"({"name":"vector_retrieve","arguments":{"query":"K5"}}]})"));
  auto r = turn("How long do the batteries last?");
  EXPECT_EQ(r.answer(), answer);
  auto tools = r.execution_logs("tool");
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_NE(tools[0].str("/output/outcome").find("new results"), std::string::npos);
  EXPECT_EQ(tools[2].str("/output/outcome"), "refused: tool call limit reached");
  auto decisions = r.execution_logs("agent");
  ASSERT_EQ(decisions.size(), 2u);
  EXPECT_EQ(decisions[1].str("/output/decision"), "limit of 2 tool calls reached");
  EXPECT_EQ(fake_.stat("chat_with_tools"), 1) << "the model is not asked again after the limit";
}

TEST_F(tool_agent_test, refuses_unknown_tools_and_malformed_arguments) {
  make_kb("");
  fake_.set_script(script(
      std::string{"{"} + agent_sys + R"(,"tool_results":2,"reply":"READY"},{)" + agent_sys
      + R"(,"tool_calls":[{"name":"web_search","arguments":{"query":"K7"}},)"
        R"({"name":"vector_retrieve","arguments_raw":"{query: K7"}]})"));
  auto r = turn("How long do the batteries last?");
  EXPECT_EQ(r.answer(), answer);
  auto tools = r.execution_logs("tool");
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[0].str("/output/outcome"), "refused: unknown tool");
  EXPECT_EQ(tools[1].str("/output/outcome"), "refused: malformed arguments");
  EXPECT_EQ(tools[1].integer("/output/evidence"), 0);
  EXPECT_EQ(fake_.stat("chat_with_tools"), 2) << "the refusals went back to the model";
}

TEST_F(tool_agent_test, small_talk_takes_the_fast_path) {
  make_kb("");
  auto r = turn("Hello!");
  EXPECT_EQ(r.answer(), answer);
  ASSERT_EQ(r.execution_logs("agent").size(), 1u);
  EXPECT_NE(r.execution_logs("agent")[0].str("/output/decision").find("fast path"), std::string::npos);
  EXPECT_EQ(fake_.stat("chat_with_tools"), 0);
}

TEST_F(tool_agent_test, the_pipeline_graph_shows_the_agent) {
  make_kb(R"(,"max_tool_calls":3)");
  auto res = request(port(), "GET", "/api/v1/kbs/agentkb/pipeline", "");
  ASSERT_EQ(res.status, 200);
  auto p = json::parse(res.body);
  EXPECT_EQ(p.str("/answer_mode"), "tool_agent");
  EXPECT_EQ(p.integer("/switches/max_tool_calls"), 3);
  EXPECT_NE(p.str("/mermaid").find("agent -- \"tool calls\" --> tools"), std::string::npos);
}

// Without a model the KB is served by the plain pipeline.
using tool_agent_offline_test = ragtor_server_test;

TEST_F(tool_agent_offline_test, falls_back_to_the_plain_pipeline) {
  auto res = request(port(), "POST", "/api/v1/kbs",
                     R"({"name":"agentkb","answer_mode":"tool_agent"})");
  ASSERT_EQ(res.status, 201) << res.body;
  res = request(
      port(), "POST", "/api/v1/kbs/agentkb/documents",
      R"({"documents":[{"id":"b1","text":"The Lumenlatch K7 runs on four AA batteries that last about fourteen months."}]})");
  ASSERT_EQ(res.status, 200) << res.body;
  auto r = chat_stream(port(), chat_body("tina", "s1", "How long do the K7 batteries last?",
                                         "agentkb", {{"debug", "true", true}}));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_EQ(r.executed_nodes(), (std::vector<std::string>{"route", "history", "memory", "agent", "retrieve",
                                             "generate", "persist"}));
  EXPECT_NE(r.answer().find("fourteen months"), std::string::npos) << r.answer();
}

// server.max_planner_turns = 1: a second agent turn while the first one
// plans ends at once with "overloaded" (then done); the place comes back
// when the first turn ends.
class planner_limit_test : public tool_agent_test {
protected:
  env_vars server_env() const override {
    auto env = tool_agent_test::server_env();
    env["RAGTOR_SERVER__MAX_PLANNER_TURNS"] = "1";
    return env;
  }
};

TEST_F(planner_limit_test, a_turn_past_the_limit_is_refused_and_the_place_comes_back) {
  make_kb("");
  // The agent's first call takes a while, so the first turn is still
  // planning when the second arrives.
  fake_.set_script(script(std::string{"{"} + agent_sys + R"(,"tool_results":1,"reply":"READY"},{)"
                          + agent_sys
                          + R"(,"first_token_delay_ms":1500,"tool_calls":[{"name":"vector_retrieve","arguments":{"query":"K7 battery life"}}]})"));
  auto first = std::async(std::launch::async, [&] {
    return chat_stream(port(), chat_body("tina", "s1", "How long do the batteries last?", "agentkb"));
  });
  ASSERT_TRUE(fake_.wait_for_stat("chat_with_tools", 1)) << "the first turn is planning";
  auto second =
      chat_stream(port(), chat_body("tom", "s2", "How long do the batteries last?", "agentkb"));
  EXPECT_TRUE(well_formed_stream(second));
  ASSERT_EQ(second.errors.size(), 1u) << second.statuses();
  EXPECT_EQ(second.errors[0].str("/code"), "overloaded");
  EXPECT_NE(second.errors[0].str("/message").find("max_planner_turns"), std::string::npos)
      << second.errors[0].dump();
  EXPECT_EQ(fake_.stat("chat_with_tools"), 1) << "the refused turn asked nobody";

  auto done = first.get();
  EXPECT_TRUE(well_formed_stream(done));
  EXPECT_TRUE(done.errors.empty()) << done.statuses();
  EXPECT_EQ(done.answer(), answer);
  auto third =
      chat_stream(port(), chat_body("tom", "s3", "How long do the batteries last?", "agentkb"));
  EXPECT_TRUE(third.errors.empty()) << third.statuses();
  EXPECT_EQ(third.answer(), answer);
}

}  // namespace
}  // namespace ragtor::test
