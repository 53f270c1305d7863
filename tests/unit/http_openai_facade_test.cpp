// The OpenAI façade's wire format: request parsing (what is honoured,
// ignored and refused), KB models, and the exact chunk and completion
// shapes clients depend on.
#include <gtest/gtest.h>

#include "http/openai_facade.hpp"
#include "protocol/stream_events.hpp"
#include "tests/support/json.hpp"

namespace ragtor::http::openai {
namespace {

using test::json;

parsed_request parse(std::string_view body) {
  return parse_completion_request(body, 1 << 20, 32 << 10);
}

TEST(openai_facade, models_are_auto_general_and_each_kb_with_its_agents) {
  auto ids = model_ids({"faq"});
  ASSERT_EQ(ids.size(), 2u + 1u + 5u);
  EXPECT_EQ(ids[0], "auto");
  EXPECT_EQ(ids[1], "general");
  EXPECT_EQ(ids[2], "kb:faq");
  EXPECT_EQ(ids[3], "kb:faq:naive_rag_agent");
  auto j = json::parse(models_json(ids, 7));
  EXPECT_EQ(j.str("/object"), "list");
  EXPECT_EQ(j.str("/data/2/id"), "kb:faq");
  EXPECT_EQ(j.str("/data/2/owned_by"), "ragtor");
  EXPECT_EQ(j.integer("/data/2/created"), 7);
}

TEST(openai_facade, model_names_map_to_a_kb_an_agent_or_the_router) {
  auto t = parse_model("kb:faq:graph_agent");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kb, "faq");
  EXPECT_EQ(t->agent_type, "graph_agent");
  EXPECT_TRUE(parse_model("general")->general);
  EXPECT_TRUE(parse_model("auto")->kb.empty());
  EXPECT_FALSE(parse_model("gpt-4o"));
  EXPECT_FALSE(parse_model("kb:faq:no_such_agent"));
  EXPECT_FALSE(parse_model("kb:"));
  EXPECT_FALSE(parse_model("kb:../etc"));
}

TEST(openai_facade, a_request_keeps_history_question_and_sampling_and_ignores_unknown_fields) {
  auto p = parse(R"({"model":"kb:faq","stream":true,"stream_options":{"include_usage":true},
    "temperature":0.2,"max_completion_tokens":50,"user":"u1","seed":3,"metadata":{"a":1},
    "messages":[{"role":"system","content":"be nice"},{"role":"user","content":"hi"},
      {"role":"assistant","content":"hello"},
      {"role":"user","content":[{"type":"text","text":"what "},{"type":"text","text":"now?"}]}]})");
  ASSERT_TRUE(p.ok) << p.error.message;
  auto& r = p.request;
  EXPECT_EQ(r.question, "what now?");
  ASSERT_EQ(r.history.size(), 2u) << "system messages are ragtor's own";
  EXPECT_EQ(r.history[0].role, "user");
  EXPECT_EQ(r.history[1].content, "hello");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_DOUBLE_EQ(r.temperature, 0.2);
  EXPECT_EQ(r.max_tokens, 50);
  EXPECT_EQ(r.user, "u1");
}

TEST(openai_facade, bad_requests_are_refused_with_the_parameter_named) {
  struct bad {
    const char* body;
    unsigned status;
    const char* param;
  };
  for (auto b : std::vector<bad>{
           {R"({"messages":[{"role":"user","content":"x"}]})", 400, "model"},
           {R"({"model":"gpt-4","messages":[{"role":"user","content":"x"}]})", 404, "model"},
           {R"({"model":"auto"})", 400, "messages"},
           {R"({"model":"auto","messages":[]})", 400, "messages"},
           {R"({"model":"auto","messages":[{"role":"assistant","content":"x"}]})", 400,
            "messages"},
           {R"({"model":"auto","messages":[{"role":"user","content":"x"}],"tools":[]})", 400,
            "tools"},
           {R"({"model":"auto","messages":[{"role":"tool","content":"x"}]})", 400,
            "messages[0].role"},
           {R"({"model":"auto","messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
            400, "messages[0].content"},
           {R"({"model":"auto","n":2,"messages":[{"role":"user","content":"x"}]})", 400, "n"},
           {R"({"model":"auto","temperature":5,"messages":[{"role":"user","content":"x"}]})", 400,
            "temperature"},
           {R"({"model":"auto","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", 400,
            "max_tokens"},
           {R"({"model":"auto","stream":"yes","messages":[{"role":"user","content":"x"}]})", 400,
            "stream"},
       }) {
    auto p = parse(b.body);
    EXPECT_FALSE(p.ok) << b.body;
    EXPECT_EQ(p.error.status, b.status) << b.body;
    EXPECT_EQ(p.error.param, b.param) << b.body;
  }
  EXPECT_EQ(parse("not json").error.status, 400u);
  EXPECT_EQ(parse_completion_request(R"({"model":"auto"})", 4, 4).error.status, 413u);
}

TEST(openai_facade, the_error_object_has_message_type_param_and_code) {
  api_error e;
  e.message = "m";
  e.param = "model";
  auto j = json::parse(error_json(e));
  EXPECT_EQ(j.str("/error/message"), "m");
  EXPECT_EQ(j.str("/error/type"), "invalid_request_error");
  EXPECT_EQ(j.str("/error/param"), "model");
  EXPECT_TRUE(j.is_null("/error/code"));
}

TEST(openai_facade, chunks_share_an_id_and_end_with_finish_reason_then_usage) {
  completion_meta m{"chatcmpl-1", 5, "kb:faq"};
  auto role = json::parse(role_chunk(m));
  EXPECT_EQ(role.str("/object"), "chat.completion.chunk");
  EXPECT_EQ(role.str("/choices/0/delta/role"), "assistant");
  EXPECT_TRUE(role.is_null("/choices/0/finish_reason"));
  auto c = json::parse(content_chunk(m, "hé"));
  EXPECT_EQ(c.str("/choices/0/delta/content"), "hé");
  EXPECT_EQ(c.str("/id"), "chatcmpl-1");
  auto f = json::parse(finish_chunk(m, "length", R"([{"doc_id":"d"}])"));
  EXPECT_EQ(f.str("/choices/0/finish_reason"), "length");
  EXPECT_EQ(f.str("/citations/0/doc_id"), "d");
  auto u = json::parse(usage_chunk(m, usage_info{3, 4}));
  EXPECT_TRUE(u.items("/choices").empty());
  EXPECT_EQ(u.integer("/usage/total_tokens"), 7);
}

TEST(openai_facade, an_outcome_gathers_tokens_done_and_failures) {
  turn_outcome out;
  EXPECT_EQ(out.add(make_start_event()), "");
  EXPECT_EQ(out.add(make_token_event("Hello ")), "Hello ");
  out.add(make_token_event("world"));
  done_content d;
  d.answer = "Hello world";
  d.citations.push_back(citation{"doc1", "c1", "Handbook", "q", true});
  d.usage = usage_info{10, 2};
  d.finish_reason = "length";
  out.add(make_done_event(d));
  ASSERT_TRUE(out.done());
  EXPECT_EQ(out.content(), "Hello world");
  EXPECT_EQ(out.finish_reason(), "length");
  EXPECT_EQ(out.usage().prompt_tokens, 10);
  EXPECT_FALSE(out.failure());
  EXPECT_EQ(out.sources_text(), "\n\nSources: [1] Handbook");
  auto j = json::parse(completion_json({"chatcmpl-2", 1, "auto"}, out));
  EXPECT_EQ(j.str("/object"), "chat.completion");
  EXPECT_EQ(j.str("/choices/0/message/content"), "Hello world\n\nSources: [1] Handbook");
  EXPECT_EQ(j.str("/choices/0/finish_reason"), "length");
  EXPECT_EQ(j.str("/citations/0/doc_id"), "doc1");

  // A cancel is a stop; a failure is an error with a status.
  turn_outcome cancelled;
  cancelled.add(make_error_event("cancelled", "the client went away"));
  done_content p;
  p.partial = true;
  p.finish_reason = "cancelled";
  cancelled.add(make_done_event(p));
  EXPECT_FALSE(cancelled.failure());
  EXPECT_EQ(cancelled.finish_reason(), "stop");
  turn_outcome failed;
  failed.add(make_error_event("llm_failed", "the model answered 500"));
  failed.add(make_done_event(p));
  ASSERT_TRUE(failed.failure());
  EXPECT_EQ(failed.failure()->status, 502u);
  EXPECT_EQ(failed.failure()->code, "llm_failed");
}

}  // namespace
}  // namespace ragtor::http::openai
