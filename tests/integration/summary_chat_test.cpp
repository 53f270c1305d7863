// Conversation summaries in the running service (DESIGN §8, seed 002): a
// real `ragtor serve` with the fake model. The summary of everything older
// than the window joins the prompt in the documented order (user memory,
// summary, episodic recall, then the window as chat messages), answers never
// wait for a summary being written, incognito turns do not read it, clear
// drops it, and GET /api/v1/conversations/{id}/summary shows it.
#include <gtest/gtest.h>

#include "tests/support/fake_openai.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* summary_text = "SUMMARY: Ann is learning to brew green tea.";

std::string script(int summary_delay_ms) {
  return std::string{R"({"rules":[{"match":"^Conversation to summarise","reply":")"} + summary_text
         + R"(","first_token_delay_ms":)" + std::to_string(summary_delay_ms)
         + R"(}],"default":{"reply":"Noted."}})";
}

const std::vector<std::string> questions = {
    "How hot should the water be for gyokuro green tea leaves?",
    "What about oolong?",
    "And black tea from Assam?",
    "Which cups keep tea warm?",
    "Is a clay teapot worth it?",
    "Remind me: how hot should water be for gyokuro green tea?",
};

class summary_chat_test : public ragtor_server_test {
protected:
  fake_openai fake_{script(0)};
  env_vars server_env() const override { return model_env(fake_); }

  // One completed turn of ann's conversation s1; its conversation id.
  std::string turn(const std::string& message, const std::vector<json_field>& extra = {}) {
    auto r = chat_stream(port(), chat_body("ann", "s1", message, "", extra));
    EXPECT_TRUE(well_formed_stream(r));
    EXPECT_TRUE(r.errors.empty());
    return r.done ? r.done->str("/content/conversation_id") : "";
  }

  json summary_of(const std::string& conv, const std::string& user = "ann") {
    auto res = request(port(), "GET", "/api/v1/conversations/" + conv + "/summary?user_id=" + user);
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body);
  }

  // The summary once one exists: the server answers when the background
  // summarizer wrote it (or after 20 s with what there is).
  json wait_for_summary(const std::string& conv) {
    auto res = request(
        port(), "GET",
        "/api/v1/conversations/" + conv + "/summary?user_id=ann&wait_version=1&timeout_ms=20000");
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body);
  }

  std::vector<json> last_prompt_messages() {
    return json::parse(fake_.stats().str("/last_chat_request")).items("/messages");
  }
};

TEST_F(summary_chat_test, the_prompt_has_memory_summary_recall_then_the_window) {
  ASSERT_EQ(request(port(), "PUT", "/api/v1/users/ann/memory", R"({"name":"Ann"})").status, 200);
  std::string conv;
  for (size_t i = 0; i < 5; ++i)
    conv = turn(questions[i]);
  ASSERT_FALSE(conv.empty());
  auto s = wait_for_summary(conv);
  ASSERT_EQ(s.integer("/version"), 1) << "10 messages: a summary is due";
  EXPECT_EQ(s.str("/summary"), summary_text);
  EXPECT_EQ(s.integer("/covered_seq"), 4);
  EXPECT_EQ(s.integer("/messages"), 10);

  turn(questions[5]);
  auto msgs = last_prompt_messages();
  ASSERT_EQ(msgs.size(), 8u) << "system, the window of 6, the question";
  auto system = msgs[0].str("/content");
  auto pos = [&](std::string_view tag) { return system.find(tag); };
  ASSERT_NE(pos("<user_memory>"), std::string::npos);
  ASSERT_NE(pos("<conversation_summary>"), std::string::npos);
  ASSERT_NE(pos("<episodic_memory>"), std::string::npos) << "turn 1 is like the question";
  EXPECT_LT(pos("<user_memory>"), pos("<conversation_summary>"));
  EXPECT_LT(pos("<conversation_summary>"), pos("<episodic_memory>"));
  EXPECT_NE(system.find(summary_text), std::string::npos);
  EXPECT_NE(system.find(questions[0]), std::string::npos) << "recalled: outside the window";
  // The window: turns 3 to 5 verbatim, then the question.
  EXPECT_EQ(msgs[1].str("/role"), "user");
  EXPECT_EQ(msgs[1].str("/content"), questions[2]);
  EXPECT_EQ(msgs[6].str("/role"), "assistant");
  EXPECT_EQ(msgs[7].str("/content"), questions[5]);
  for (size_t i = 1; i < 7; ++i)
    EXPECT_NE(msgs[i].str("/content"), questions[1]) << "turn 2 is summarised, not repeated";

  // Incognito turns read no memory: no summary either.
  turn("Anything else about cups?", {{"incognito", "true", true}});
  auto inc = last_prompt_messages()[0].str("/content");
  EXPECT_EQ(inc.find("<conversation_summary>"), std::string::npos);

  // Clear drops it.
  auto cleared = request(port(), "POST", "/api/v1/clear", R"({"user_id":"ann","session_id":"s1"})");
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(json::parse(cleared.body).integer("/cleared_messages"), 14);
  auto after = summary_of(conv);
  EXPECT_EQ(after.integer("/version"), 0);
  EXPECT_EQ(after.str("/summary"), "");
}

TEST_F(summary_chat_test, the_summary_endpoint_checks_its_input) {
  auto conv = turn(questions[0]);
  auto none = summary_of(conv);
  EXPECT_EQ(none.integer("/version"), 0) << "2 messages: no summary";
  EXPECT_EQ(none.integer("/messages"), 2);
  EXPECT_EQ(request(port(), "GET", "/api/v1/conversations/" + conv + "/summary?user_id=bob").status,
            404)
      << "not bob's";
  EXPECT_EQ(request(port(), "GET", "/api/v1/conversations/nope/summary?user_id=ann").status, 404);
  auto waited =
      request(port(), "GET",
              "/api/v1/conversations/" + conv + "/summary?user_id=ann&wait_version=1&timeout_ms=0");
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(json::parse(waited.body).integer("/version"), 0) << "none came in time";
  EXPECT_EQ(request(port(), "GET",
                    "/api/v1/conversations/" + conv + "/summary?user_id=ann&wait_version=-1")
                .status,
            400);
  EXPECT_EQ(request(port(), "GET",
                    "/api/v1/conversations/" + conv + "/summary?user_id=bob&wait_version=1")
                .status,
            404)
      << "nobody waits on someone else's conversation";
  EXPECT_EQ(request(port(), "GET", "/api/v1/conversations/" + conv + "/summary").status, 400);
  EXPECT_EQ(request(port(), "POST", "/api/v1/conversations/" + conv + "/summary?user_id=ann", "{}")
                .status,
            405);
}

class slow_summary_test : public summary_chat_test {
protected:
  slow_summary_test() { fake_.set_script(script(60000)); }
};

TEST_F(slow_summary_test, answers_never_wait_for_the_summary) {
  std::string conv;
  for (size_t i = 0; i < 5; ++i)
    conv = turn(questions[i]);
  // Five streamed answers, then the summary request, which the model holds.
  ASSERT_TRUE(fake_.wait_for_stat("chat_requests", 6));
  EXPECT_EQ(fake_.stat("stream_requests"), 5);
  auto r = chat_stream(port(), chat_body("ann", "s1", questions[5], ""));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.answer(), "Noted.");
  EXPECT_EQ(summary_of(conv).integer("/version"), 0) << "answered while the summary is pending";
  // Shutting down with the summary still pending is prompt and clean.
  EXPECT_EQ(stop_server().code, 0);
}

// A completed turn asks the summarizer only when it makes the summary due
// (the stream checks the rule against the summary's state its context read
// brought); before, every turn asked and the summarizer read the store to
// find most were not due. The summarizer gets the trigger before the turn's
// `done` is published, so a status read after `done` counts it.
TEST_F(summary_chat_test, only_a_turn_that_makes_the_summary_due_asks_the_summarizer) {
  auto summarizer = [&] {
    auto r = request(port(), "GET", "/admin/api/actors?kind=summarizer");
    EXPECT_EQ(r.status, 200) << r.body;
    auto actors = json::parse(r.body).items("/actors");
    EXPECT_EQ(actors.size(), 1u);
    return actors.empty() ? json::parse("{}") : actors[0];
  };
  std::string conv;
  for (size_t i = 0; i < 4; ++i)
    conv = turn(questions[i]);
  EXPECT_EQ(summarizer().integer("/triggers"), 0) << "8 messages: under min_messages";
  turn(questions[4]);
  auto s = wait_for_summary(conv);
  EXPECT_EQ(s.integer("/version"), 1) << "10 messages: a summary is due";
  EXPECT_EQ(summarizer().integer("/triggers"), 1);
  // 12 messages: 6 outside the window, 4 of them summarised; a refresh is
  // due once 5 more left the window.
  turn(questions[5]);
  auto after = summarizer();
  EXPECT_EQ(after.integer("/triggers"), 1);
  EXPECT_EQ(after.integer("/not_due"), 0);
  EXPECT_EQ(after.integer("/written"), 1);
}

}  // namespace
}  // namespace ragtor::test
