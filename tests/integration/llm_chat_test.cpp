// ragtor answering with an OpenAI-compatible model (the fake server, real
// wire protocol): the prompt carries the retrieved documents, <cite> tags
// are stripped from the streamed text and turned into verified citations,
// usage is reported, general turns go to the model, and every upstream
// fault ends the turn with error then done, storing what was shown as a
// partial answer. A disconnecting client closes the upstream connection;
// the model's concurrency limit refuses extra work with a clear error.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* green_tea_quote =
    "Japanese sencha tastes best when steeped at 70 degrees Celsius for about ninety seconds.";

std::string cited_reply() {
  return std::string{"Steep sencha at 70 °C. <cite doc_id=\"tea_brewing\" quote=\""}
         + green_tea_quote + "\">It takes about ninety seconds.</cite> "
         + "<cite doc_id=\"tea_brewing\" quote=\"Sencha must be boiled for an hour.\">Never "
           "boil it.</cite> <cite doc_id=\"nope\" quote=\"" + green_tea_quote + "\">x</cite>";
}

std::string script() {
  return std::string{R"({"rules":[)"} + R"({"match":"sencha","reply":)" + json_quote(cited_reply())
         + R"(},)"
         + R"({"match":"explode","reply":"one two three four five","fault":"reset_mid_stream","fault_after_tokens":2},)"
         + R"({"match":"refuse","fault":"http_500"},)"
         + R"({"match":"slowly","reply":"a b c d e f g h i j k l m n o p q r s t","token_delay_ms":150},)"
         + R"({"match":"hello","reply":"Hi! How can I help?"})" + R"(]})";
}

class llm_chat_test : public ragtor_server_test {
protected:
  fake_openai fake_{script()};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_LLM__MAX_RETRIES"] = "1";
    env["RAGTOR_LLM__MAX_CONCURRENCY"] = "2";
    env["RAGTOR_LLM__MAX_QUEUE"] = "0";
    env["RAGTOR_SERVER__DETACH_GRACE_MS"] = "0";  // a hang-up cancels at once
    return env;
  }
};

TEST_F(llm_chat_test, streams_a_cited_answer_with_tags_stripped_and_quotes_verified) {
  auto r = chat_stream(port(), chat_body("alice", "s1", "How hot should sencha be?", "test"));
  ASSERT_TRUE(well_formed_stream(r)) << r.error_body;
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].dump();
  auto answer = r.done->str("/content/answer");
  EXPECT_EQ(r.tokens, answer);
  EXPECT_EQ(answer, "Steep sencha at 70 °C. It takes about ninety seconds. Never boil it. x");
  EXPECT_EQ(answer.find("<cite"), std::string::npos);
  auto cites = r.done->items("/content/citations");
  ASSERT_EQ(cites.size(), 3u);
  EXPECT_TRUE(cites[0].boolean("/verified"));
  EXPECT_EQ(cites[0].str("/doc_id"), "tea_brewing");
  EXPECT_EQ(cites[0].str("/quote"), green_tea_quote);
  EXPECT_FALSE(cites[0].str("/chunk_id").empty());
  // done names the evidence the answer was built on (the stream hands the
  // evidence itself to the gateway and keeps only its ids).
  auto evidence = r.done->items("/content/reference/chunks");
  ASSERT_FALSE(evidence.empty());
  EXPECT_NE(std::find_if(evidence.begin(), evidence.end(),
                         [&](auto& c) { return c.str("/chunk_id") == cites[0].str("/chunk_id"); }),
            evidence.end())
      << "the verified quote's chunk is among the turn's evidence";
  EXPECT_FALSE(cites[1].boolean("/verified")) << "a forged quote is flagged";
  EXPECT_FALSE(cites[2].boolean("/verified")) << "an unknown document is flagged";
  EXPECT_GT(r.done->integer("/content/usage/prompt_tokens"), 50);
  EXPECT_GT(r.done->integer("/content/usage/completion_tokens"), 10)
      << "the model's own usage report";

  // The model saw the retrieved documents and the citation rules.
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  auto msgs = sent.items("/messages");
  ASSERT_GE(msgs.size(), 2u);
  auto system = msgs[0].str("/content");
  EXPECT_NE(system.find("<document id=\"tea_brewing\""), std::string::npos);
  EXPECT_NE(system.find("<cite doc_id="), std::string::npos);
  EXPECT_EQ(msgs.back().str("/content"), "How hot should sencha be?");
  EXPECT_EQ(sent.str("/model"), "fake-model");
  // The call carried the turn's request id (its X-Request-Id header).
  auto ids = fake_.first_tokens().items("/ids");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0].str(""), r.done->str("/request_id"));
  EXPECT_FALSE(ids[0].str("").empty());

  // Stored as shown, with the citations.
  auto rows = db().messages("alice", "s1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].content, answer);
  EXPECT_EQ(rows[1].completed, 1);
  EXPECT_NE(rows[1].citations.find(green_tea_quote), std::string::npos);
}

TEST_F(llm_chat_test, general_turns_go_to_the_model_without_documents) {
  auto r = chat_stream(port(), chat_body("bob", "s1", "hello there", ""));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_EQ(r.done->str("/content/answer"), "Hi! How can I help?");
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_EQ(sent.items("/messages")[0].str("/content").find("<documents>"), std::string::npos);
}

TEST_F(llm_chat_test, a_failure_mid_answer_ends_with_error_then_done_and_keeps_the_partial) {
  auto r = chat_stream(port(), chat_body("carol", "s1", "please explode", "test"));
  ASSERT_TRUE(well_formed_stream(r));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].str("/code"), "llm_failed");
  EXPECT_EQ(r.tokens, "one two ");
  EXPECT_TRUE(r.done->boolean("/content/partial"));
  EXPECT_EQ(fake_.stat("chat_requests"), 1) << "never retried after the first token";
  auto rows = db().messages("carol", "s1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].content, "one two ");
  EXPECT_EQ(rows[1].completed, 0);
}

TEST_F(llm_chat_test, a_failure_before_the_first_token_is_retried_then_reported) {
  auto r = chat_stream(port(), chat_body("dave", "s1", "refuse this", "test"));
  ASSERT_TRUE(well_formed_stream(r));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].str("/code"), "llm_failed");
  EXPECT_NE(r.errors[0].str("/message").find("500"), std::string::npos);
  EXPECT_EQ(r.tokens, "");
  EXPECT_EQ(fake_.stat("chat_requests"), 2) << "max_retries = 1";
  EXPECT_EQ(db().messages("dave", "s1").size(), 2u) << "user message + empty partial answer";
}

TEST_F(llm_chat_test, a_client_that_hangs_up_closes_the_upstream_stream) {
  auto sse = open_sse(port(), chat_stream_path, chat_body("erin", "s1", "say it slowly", "test"));
  // Read until the first token, then drop the connection.
  for (;;) {
    auto ev = sse.next_event(10s);
    ASSERT_TRUE(ev) << "stream ended before a token";
    if (ev->data.find("\"token\"") != std::string::npos)
      break;
  }
  sse.close();
  EXPECT_TRUE(fake_.wait_for_stat("streams_aborted", 1)) << fake_.stats().dump();
  EXPECT_EQ(fake_.stat("streams_completed"), 0);
  // The conversation's next turn runs after the cut one was stored.
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("erin", "s1", "hello", "test"))));
  auto rows = db().messages("erin", "s1");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].completed, 0) << "the partial answer is stored";
}

TEST_F(llm_chat_test, the_model_concurrency_limit_refuses_extra_turns_clearly) {
  // Two slow turns occupy both slots (max_concurrency 2, max_queue 0).
  auto a = open_sse(port(), chat_stream_path, chat_body("f1", "s1", "say it slowly", "test"));
  auto b = open_sse(port(), chat_stream_path, chat_body("f2", "s1", "say it slowly", "test"));
  ASSERT_TRUE(fake_.wait_for_stat("stream_requests", 2));
  auto r = chat_stream(port(), chat_body("f3", "s1", "say it slowly", "test"));
  ASSERT_TRUE(well_formed_stream(r));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].str("/code"), "overloaded");
  EXPECT_EQ(fake_.stat("stream_requests"), 2) << "refused without calling the model";
}

// POST /api/v1/clear goes through the conversation's session: a turn
// still generating is cancelled and stored first, so nothing of it lands
// after the clear (a clear straight to the store would leave the partial
// answer behind it).
TEST_F(llm_chat_test, clear_cancels_the_running_turn_and_nothing_lands_after_it) {
  auto sse = open_sse(port(), chat_stream_path, chat_body("gina", "s1", "say it slowly", "test"));
  for (;;) {
    auto ev = sse.next_event(10s);
    ASSERT_TRUE(ev) << "stream ended before a token";
    if (ev->data.find("\"token\"") != std::string::npos)
      break;
  }
  auto res = request(port(), "POST", "/api/v1/clear", R"({"user_id":"gina","session_id":"s1"})");
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_NE(res.body.find("\"cleared_messages\":2"), std::string::npos)
      << "the user message and the stored partial answer: " << res.body;
  // The rest of the stream: error (cancelled), then done.
  std::vector<std::string> tail;
  for (auto ev = sse.next_event(10s); ev; ev = sse.next_event(10s)) {
    if (ev->data.empty())
      continue;
    auto j = json::parse(ev->data);
    auto status = j.str("/status");
    if (status == "error")
      tail.push_back("error:" + j.str("/code"));
    else if (status == "done")
      tail.push_back(status);
    if (status == "done")
      break;
  }
  EXPECT_EQ(tail, (std::vector<std::string>{"error:cancelled", "done"}));
  EXPECT_TRUE(db().messages("gina", "s1").empty()) << "nothing landed after the clear";
  EXPECT_TRUE(fake_.wait_for_stat("streams_aborted", 1)) << "the model's stream was closed";
  // The conversation goes on from empty.
  auto next = chat_stream(port(), chat_body("gina", "s1", "hello", "test"));
  ASSERT_TRUE(well_formed_stream(next));
  EXPECT_EQ(db().messages("gina", "s1").size(), 2u);
}

}  // namespace
}  // namespace ragtor::test
