// The conversation-management API over real HTTP (DESIGN §5): listing and
// paging, ownership (someone else's conversation is a 404, never a 403),
// clear, delete, feedback toggling and stop.
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

using conversation_api_test = ragtor_server_test;

constexpr const char* question = "How long do the batteries of the Lumenlatch K7 last?";

json get_json(uint16_t port, const std::string& path, int expected_status = 200) {
  auto res = request(port, "GET", path);
  EXPECT_EQ(res.status, expected_status) << path << ": " << res.body;
  return json::parse(res.body);
}

json post_json(uint16_t port, std::string_view path, const std::string& body,
               int expected_status = 200) {
  auto res = request(port, "POST", path, body);
  EXPECT_EQ(res.status, expected_status) << path << ": " << res.body;
  return json::parse(res.body);
}

std::string ask(uint16_t port, const std::string& user, const std::string& session) {
  auto r = chat_stream(port, chat_body(user, session, question));
  EXPECT_TRUE(well_formed_stream(r));
  return r.done ? r.done->str("/content/conversation_id") : std::string{};
}

TEST_F(conversation_api_test, lists_conversations_newest_first_with_cursor_paging) {
  for (auto s : {"s1", "s2", "s3"})
    ask(port(), "alice", s);
  ask(port(), "bob", "s1");
  auto page1 = get_json(port(), "/api/v1/conversations?user_id=alice&limit=2");
  auto convs = page1.items("/conversations");
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(convs[0].str("/session_id"), "s3");
  EXPECT_EQ(convs[1].str("/session_id"), "s2");
  EXPECT_EQ(convs[0].str("/first_message"), question);
  EXPECT_EQ(convs[0].integer("/message_count"), 2);
  auto cursor = page1.str("/next_cursor");
  auto page2 = get_json(port(), "/api/v1/conversations?user_id=alice&limit=2&cursor=" + cursor);
  ASSERT_EQ(page2.items("/conversations").size(), 1u);
  EXPECT_EQ(page2.items("/conversations")[0].str("/session_id"), "s1");
  EXPECT_TRUE(page2.is_null("/next_cursor"));
  // Bad parameters are 400s naming the parameter.
  EXPECT_EQ(
      get_json(port(), "/api/v1/conversations?user_id=alice&limit=0", 400).str("/error/field"),
      "limit");
  EXPECT_EQ(get_json(port(), "/api/v1/conversations?limit=2", 400).str("/error/field"), "user_id");
  EXPECT_EQ(
      get_json(port(), "/api/v1/conversations?user_id=alice&cursor=zzz", 400).str("/error/field"),
      "cursor");
}

TEST_F(conversation_api_test, message_pages_and_ownership) {
  auto conv = ask(port(), "alice", "s1");
  ask(port(), "alice", "s1");
  auto base = "/api/v1/conversations/" + conv + "/messages?user_id=alice";
  auto newest = get_json(port(), base + "&limit=3");
  auto msgs = newest.items("/messages");
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0].integer("/seq"), 2);  // oldest first within the page
  EXPECT_EQ(msgs[2].integer("/seq"), 4);
  EXPECT_TRUE(newest.boolean("/has_more"));
  auto older =
      get_json(port(), base + "&limit=3&before=" + std::to_string(newest.integer("/next_before")));
  ASSERT_EQ(older.items("/messages").size(), 1u);
  EXPECT_EQ(older.items("/messages")[0].str("/role"), "user");
  EXPECT_FALSE(older.boolean("/has_more"));
  // Another user cannot read, delete or tell it exists: 404 like a missing id.
  auto theirs =
      get_json(port(), "/api/v1/conversations/" + conv + "/messages?user_id=mallory", 404);
  auto missing = get_json(port(), "/api/v1/conversations/nope/messages?user_id=mallory", 404);
  EXPECT_EQ(theirs.str("/error/code"), missing.str("/error/code"));
  auto del = request(port(), "DELETE", "/api/v1/conversations/" + conv + "?user_id=mallory");
  EXPECT_EQ(del.status, 404);
  EXPECT_EQ(db().messages("alice", "s1").size(), 4u);
  // The owner can delete it; then it is gone.
  auto mine = request(port(), "DELETE", "/api/v1/conversations/" + conv + "?user_id=alice");
  EXPECT_EQ(mine.status, 200) << mine.body;
  EXPECT_TRUE(db().messages("alice", "s1").empty());
  get_json(port(), base, 404);
}

TEST_F(conversation_api_test, clear_reports_and_removes_the_messages) {
  ask(port(), "alice", "s1");
  auto res = post_json(port(), "/api/v1/clear", R"({"user_id":"alice","session_id":"s1"})");
  EXPECT_EQ(res.str("/status"), "ok");
  EXPECT_EQ(res.integer("/cleared_messages"), 2);
  EXPECT_EQ(res.str("/remaining_messages"), "0");
  EXPECT_TRUE(db().messages("alice", "s1").empty());
  // The conversation continues from seq 1.
  ask(port(), "alice", "s1");
  auto rows = db().messages("alice", "s1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].seq, 1);
  // Other users' conversations are untouched by construction (keyed by user).
  EXPECT_EQ(post_json(port(), "/api/v1/clear", R"({"user_id":"bob","session_id":"s1"})")
                .integer("/cleared_messages"),
            0);
  EXPECT_EQ(post_json(port(), "/api/v1/clear", R"({"user_id":"alice"})", 400).str("/error/field"),
            "session_id");
}

TEST_F(conversation_api_test, feedback_toggles) {
  auto r = chat_stream(port(), chat_body("alice", "s1", question));
  ASSERT_TRUE(well_formed_stream(r));
  auto message_id = r.done->str("/content/message_id");
  auto vote = [&](bool positive) {
    return post_json(port(), "/api/v1/feedback",
                     json_object({{"message_id", message_id},
                                  {"query", question},
                                  {"is_positive", positive ? "true" : "false", true},
                                  {"thread_id", "s1"},
                                  {"metadata", R"({"source":"test"})", true}}))
        .str("/feedback");
  };
  EXPECT_EQ(vote(true), "positive");
  EXPECT_EQ(vote(true), "none");
  EXPECT_EQ(vote(false), "negative");
  EXPECT_EQ(vote(true), "positive");
  auto unknown =
      request(port(), "POST", "/api/v1/feedback",
              R"({"message_id":"nope","query":"q","is_positive":true,"thread_id":"s1"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  auto bad = request(port(), "POST", "/api/v1/feedback",
                     R"({"message_id":"m","query":"q","is_positive":"yes","thread_id":"s1"})");
  EXPECT_EQ(bad.status, 400);
}

TEST_F(conversation_api_test, stop_of_an_unknown_request_says_not_found) {
  auto res =
      post_json(port(), "/api/v1/chat/stop", R"({"request_id":"nothing","user_id":"alice"})");
  EXPECT_EQ(res.str("/status"), "not_found");
}

}  // namespace
}  // namespace ragtor::test

namespace ragtor::test {
namespace {

class stop_test : public ragtor_server_test {
protected:
  env_vars server_env() const override { return {{"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "30"}}; }
};

TEST_F(stop_test, stop_cancels_a_running_turn) {
  auto body = chat_body("alice", "s1", question, "test", {{"request_id", "to-stop"}});
  auto stream = open_sse(port(), chat_stream_path, body);
  // Wait for the first token, then stop the turn from another connection.
  bool saw_token = false;
  for (int i = 0; i < 100 && !saw_token; ++i) {
    auto ev = stream.next_event(std::chrono::seconds(10));
    ASSERT_TRUE(ev);
    saw_token = ev->data.find("\"token\"") != std::string::npos;
  }
  ASSERT_TRUE(saw_token);
  auto res =
      request(port(), "POST", "/api/v1/chat/stop", R"({"request_id":"to-stop","user_id":"alice"})");
  EXPECT_EQ(res.status, 200);
  EXPECT_NE(res.body.find("stopped"), std::string::npos) << res.body;
  auto rest = read_stream(stream);
  ASSERT_FALSE(rest.errors.empty());
  EXPECT_EQ(rest.errors.back().str("/code"), "cancelled");
  ASSERT_TRUE(rest.done);
  EXPECT_TRUE(rest.done->boolean("/content/partial"));
  auto rows = db().messages("alice", "s1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].completed, 0);
}

}  // namespace
}  // namespace ragtor::test

namespace ragtor::test {
namespace {

// DESIGN §5: a retry with the same request_id never stores a second user
// message; while the turn is still running the retry joins its stream.
TEST_F(stop_test, a_retry_during_the_turn_joins_the_running_stream) {
  auto body = chat_body("alice", "s1", question, "test", {{"request_id", "join-me"}});
  auto first = open_sse(port(), chat_stream_path, body);
  bool saw_token = false;
  for (int i = 0; i < 100 && !saw_token; ++i) {
    auto ev = first.next_event(std::chrono::seconds(10));
    ASSERT_TRUE(ev);
    saw_token = ev->data.find("\"token\"") != std::string::npos;
  }
  ASSERT_TRUE(saw_token);
  auto retry = chat_stream(port(), body);
  ASSERT_TRUE(well_formed_stream(retry));
  auto original = read_stream(first);
  ASSERT_TRUE(original.done);
  EXPECT_EQ(retry.done->str("/content/message_id"), original.done->str("/content/message_id"));
  EXPECT_EQ(retry.answer(), original.done->str("/content/answer"));
  EXPECT_FALSE(retry.done->boolean("/content/partial"));
  auto rows = db().messages("alice", "s1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].role, "user");
  EXPECT_EQ(rows[1].completed, 1);
}

}  // namespace
}  // namespace ragtor::test
