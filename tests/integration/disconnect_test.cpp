// A client that goes away mid-stream cancels its turn (DESIGN §9): the user
// message stays, the part generated so far is stored as an assistant message
// with completed=0, and the server carries on serving.
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* festival_question =
    "What do the people of Port Quellin do during the lantern festival at the harbour?";

// Paces the extractive generator so a stream lasts long enough to cut.
class disconnect_test : public ragtor_server_test, public ::testing::WithParamInterface<bool> {
protected:
  // detach_grace_ms 0: a client that goes away cancels at once (the grace
  // period and re-attaching are resume_test's).
  env_vars server_env() const override {
    return {{"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "30"}, {"RAGTOR_SERVER__DETACH_GRACE_MS", "0"}};
  }
  bool with_reset() const { return GetParam(); }
};

TEST_P(disconnect_test, cancels_the_turn_and_stores_the_partial_answer) {
  // The whole answer, from another session, to compare against.
  auto full = chat_stream(port(), chat_body("erin", "full", festival_question));
  ASSERT_TRUE(well_formed_stream(full));
  size_t full_tokens = 0;
  for (const auto& e : full.events)
    full_tokens += e.str("/status") == "token";
  ASSERT_GE(full_tokens, 8u) << "the answer is too short to cut mid-stream: " << full.answer();

  auto stream = open_sse(port(), chat_stream_path, chat_body("erin", "cut", festival_question));
  ASSERT_EQ(stream.status(), 200);
  std::string received;
  size_t tokens = 0;
  bool started = false;
  while (tokens < 2) {
    auto ev = stream.next_event(30s);
    ASSERT_TRUE(ev) << "stream ended or stalled before two tokens (timed out: "
                    << stream.timed_out() << ")";
    if (ev->is_comment)
      continue;
    auto j = json::parse(ev->data);
    auto status = j.str("/status");
    if (!started) {
      ASSERT_EQ(status, "start");
      started = true;
      continue;
    }
    ASSERT_NE(status, "done") << "stream finished before it could be cut";
    if (status == "token") {
      received += j.str("/content");
      ++tokens;
    }
  }
  if (with_reset())
    stream.reset();
  else
    stream.close();

  // Turns of a conversation run one at a time: the next turn's `done`
  // arrives only after the cut turn ended and was stored.
  auto next = chat_stream(port(), chat_body("erin", "cut", "And the boats?"));
  ASSERT_TRUE(well_formed_stream(next));
  auto rows = db().messages("erin", "cut");
  ASSERT_EQ(rows.size(), 4u) << "the cut turn's two messages, then the next turn's";
  EXPECT_EQ(rows[0].seq, 1);
  EXPECT_EQ(rows[0].role, "user");
  EXPECT_EQ(rows[0].content, festival_question);
  EXPECT_EQ(rows[0].completed, 1);
  const auto& partial = rows[1];
  EXPECT_EQ(partial.seq, 2);
  EXPECT_EQ(partial.role, "assistant");
  EXPECT_EQ(partial.completed, 0) << "the turn ran to completion: the disconnect did not cancel it";
  EXPECT_FALSE(partial.content.empty());
  EXPECT_LT(partial.content.size(), full.answer().size())
      << "stored: \"" << partial.content << "\"\nfull: \"" << full.answer() << "\"";
  EXPECT_TRUE(full.answer().starts_with(partial.content))
      << "stored partial is not a prefix of the full answer\nstored: \"" << partial.content
      << "\"\nfull: \"" << full.answer() << "\"";
  EXPECT_TRUE(partial.content.starts_with(received))
      << "stored partial lacks tokens the client received\nstored: \"" << partial.content
      << "\"\nreceived: \"" << received << "\"";

  EXPECT_TRUE(healthy());
  auto after = chat_stream(port(), chat_body("erin", "after", festival_question));
  EXPECT_TRUE(well_formed_stream(after));
}

INSTANTIATE_TEST_SUITE_P(close_kinds, disconnect_test, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "reset" : "close";
                         });

}  // namespace
}  // namespace ragtor::test
