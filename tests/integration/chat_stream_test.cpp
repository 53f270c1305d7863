// The chat endpoints against a real server with the fixture KB: SSE framing
// and event order (DESIGN §5.1), extractive answers with verbatim citations,
// the non-streaming shape (§5) and what each turn leaves in the database (§9).
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* battery_question = "How long do the batteries of the Lumenlatch K7 last?";
constexpr const char* lighthouse_question = "Who designed the Port Quellin lighthouse?";

using chat_test = ragtor_server_test;

// The turn's messages are stored as user (seq 1) then assistant (seq 2),
// both completed, matching what the client was told.
void expect_persisted_turn(const std::vector<message_row>& rows, size_t first,
                           const std::string& question, const json& done_content,
                           int64_t first_seq) {
  ASSERT_GE(rows.size(), first + 2);
  const auto& user = rows[first];
  const auto& assistant = rows[first + 1];
  EXPECT_EQ(user.seq, first_seq);
  EXPECT_EQ(user.role, "user");
  EXPECT_EQ(user.content, question);
  EXPECT_EQ(user.completed, 1);
  EXPECT_EQ(assistant.seq, first_seq + 1);
  EXPECT_EQ(assistant.role, "assistant");
  EXPECT_EQ(assistant.content, done_content.str("/answer"));
  EXPECT_EQ(assistant.completed, 1);
  EXPECT_EQ(assistant.conversation_id, done_content.str("/conversation_id"));
  EXPECT_EQ(assistant.id, done_content.str("/message_id"));
  auto stored = json::parse(assistant.citations.empty() ? "null" : assistant.citations);
  ASSERT_FALSE(stored.is_null()) << "assistant message stored without citations";
  EXPECT_EQ(stored.items().size(), done_content.items("/citations").size())
      << "stored " << assistant.citations << " vs sent " << done_content.at("/citations").dump();
}

TEST_F(chat_test, healthz_is_ok) {
  EXPECT_TRUE(healthy());
}

TEST_F(chat_test, stream_answers_from_the_kb_with_verbatim_citations_and_persists_the_turn) {
  auto r = chat_stream(port(), chat_body("alice", "s1", battery_question));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_TRUE(r.errors.empty()) << "error events: " << r.statuses();
  const auto& done = *r.done;
  EXPECT_FALSE(done.boolean("/content/partial"));
  EXPECT_FALSE(r.answer().empty());
  EXPECT_NE(r.answer().find("fourteen months"), std::string::npos)
      << "answer does not quote the battery fact: " << r.answer();
  auto citations = done.at("/content/citations");
  EXPECT_TRUE(verbatim_citations(citations));
  bool cites_battery_doc = false;
  for (const auto& c : citations.items())
    cites_battery_doc = cites_battery_doc || c.str("/doc_id") == "lumenlatch-battery";
  EXPECT_TRUE(cites_battery_doc) << citations.dump();
  EXPECT_TRUE(done.has("/content/usage")) << done.dump();

  // The assistant message is committed before done is sent.
  auto rows = db().messages("alice", "s1");
  ASSERT_EQ(rows.size(), 2u);
  expect_persisted_turn(rows, 0, battery_question, done.at("/content"), 1);
}

TEST_F(chat_test, stream_echoes_a_client_request_id) {
  auto r = chat_stream(port(), chat_body("alice", "s-rid", battery_question, "test",
                                         {{"request_id", "client-req-42"}}));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_EQ(r.events.front().str("/request_id"), "client-req-42");
  EXPECT_EQ(r.done->str("/request_id"), "client-req-42");
  auto rows = db().messages("alice", "s-rid");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].request_id, "client-req-42");
}

// DESIGN §5: the same request_id in the same conversation never stores a
// second user message.
TEST_F(chat_test, retry_with_the_same_request_id_stores_one_user_message) {
  auto body = chat_body("alice", "s-retry", battery_question, "test", {{"request_id", "retry-1"}});
  auto first = chat_stream(port(), body);
  ASSERT_TRUE(well_formed_stream(first));
  auto second = chat_stream(port(), body);
  EXPECT_TRUE(well_formed_stream(second));
  size_t user_messages = 0;
  for (const auto& row : db().messages("alice", "s-retry"))
    user_messages += row.role == "user";
  EXPECT_EQ(user_messages, 1u);
}

TEST_F(chat_test, non_streaming_chat_returns_the_whole_answer) {
  auto res = request(port(), "POST", chat_path, chat_body("bob", "s1", lighthouse_question));
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_TRUE(res.header("content-type").starts_with("application/json"))
      << res.header("content-type");
  auto j = json::parse(res.body);
  for (const char* field : {"/answer", "/request_id", "/conversation_id", "/message_id",
                            "/route_decision", "/citations", "/reference", "/usage", "/partial"})
    EXPECT_TRUE(j.has(field)) << "missing " << field << " in " << res.body;
  ASSERT_TRUE(j.has("/answer"));
  EXPECT_FALSE(j.str("/answer").empty());
  EXPECT_NE(j.str("/answer").find("Ondine Marrow"), std::string::npos) << j.str("/answer");
  ASSERT_TRUE(j.has("/route_decision/kb_prefix")) << res.body;
  EXPECT_EQ(j.str("/route_decision/kb_prefix"), "test");
  EXPECT_FALSE(j.boolean("/partial"));
  ASSERT_TRUE(j.has("/citations"));
  EXPECT_TRUE(verbatim_citations(j.at("/citations")));

  auto rows = db().messages("bob", "s1");
  ASSERT_EQ(rows.size(), 2u);
  expect_persisted_turn(rows, 0, lighthouse_question, j, 1);
}

TEST_F(chat_test, two_turns_in_one_session_are_numbered_in_order) {
  const std::string q1 = "At what temperature should sencha be steeped?";
  const std::string q2 = "How many times can rolled oolong leaves be infused?";
  auto r1 = chat_stream(port(), chat_body("carol", "tea", q1));
  ASSERT_TRUE(well_formed_stream(r1));
  auto r2 = chat_stream(port(), chat_body("carol", "tea", q2));
  ASSERT_TRUE(well_formed_stream(r2));
  EXPECT_EQ(r1.done->str("/content/conversation_id"), r2.done->str("/content/conversation_id"));
  EXPECT_NE(r1.done->str("/content/message_id"), r2.done->str("/content/message_id"));

  auto rows = db().messages("carol", "tea");
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(rows[i].seq, static_cast<int64_t>(i + 1));
  expect_persisted_turn(rows, 0, q1, r1.done->at("/content"), 1);
  expect_persisted_turn(rows, 2, q2, r2.done->at("/content"), 3);
}

// Bad input changes nothing: an unknown KB is refused before the user
// message is stored.
TEST_F(chat_test, unknown_kb_is_refused_before_anything_is_stored) {
  for (auto path : {chat_stream_path, chat_path}) {
    auto res =
        request(port(), "POST", path, chat_body("dave", "s1", battery_question, "no_such_kb"));
    EXPECT_EQ(res.status, 404) << res.body;
    auto j = json::parse(res.body);
    EXPECT_EQ(j.str("/error/code"), "not_found");
    EXPECT_EQ(j.str("/error/field"), "kb_prefix");
  }
  EXPECT_TRUE(db().messages("dave", "s1").empty());
  EXPECT_TRUE(healthy());
}

}  // namespace
}  // namespace ragtor::test
