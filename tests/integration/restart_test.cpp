// Conversations outlive the process: a clean SIGTERM shutdown exits 0, and a
// new server on the same data directory continues the session where it
// stopped (DESIGN §9: nothing acknowledged is ever lost, also after kill -9).
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* first_question = "How long should Assam be steeped?";
constexpr const char* second_question = "What does a splash of milk do to Assam?";

using restart_test = ragtor_server_test;

void expect_continued_session(const std::vector<message_row>& rows, const stream_result& first,
                              const stream_result& second) {
  ASSERT_EQ(rows.size(), 4u);
  const char* roles[] = {"user", "assistant", "user", "assistant"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].seq, static_cast<int64_t>(i + 1));
    EXPECT_EQ(rows[i].role, roles[i]);
    EXPECT_EQ(rows[i].completed, 1);
  }
  EXPECT_EQ(rows[0].content, first_question);
  EXPECT_EQ(rows[1].content, first.answer());
  EXPECT_EQ(rows[2].content, second_question);
  EXPECT_EQ(rows[3].content, second.answer());
  EXPECT_EQ(first.done->str("/content/conversation_id"),
            second.done->str("/content/conversation_id"));
}

TEST_F(restart_test, sigterm_exits_cleanly_and_the_session_continues_after_restart) {
  auto first = chat_stream(port(), chat_body("frank", "s1", first_question));
  ASSERT_TRUE(well_formed_stream(first));

  auto status = stop_server();
  EXPECT_TRUE(status.clean()) << "SIGTERM: " << status.describe();

  start_server();
  EXPECT_TRUE(healthy());
  auto before = db().messages("frank", "s1");
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[1].content, first.answer());

  auto second = chat_stream(port(), chat_body("frank", "s1", second_question));
  ASSERT_TRUE(well_formed_stream(second));
  expect_continued_session(db().messages("frank", "s1"), first, second);
}

TEST_F(restart_test, acknowledged_turn_survives_kill_9) {
  auto first = chat_stream(port(), chat_body("grace", "s1", first_question));
  ASSERT_TRUE(well_formed_stream(first));

  server().kill9();
  start_server();
  auto second = chat_stream(port(), chat_body("grace", "s1", second_question));
  ASSERT_TRUE(well_formed_stream(second));
  expect_continued_session(db().messages("grace", "s1"), first, second);
}

TEST_F(restart_test, sigint_also_exits_cleanly) {
  ASSERT_TRUE(healthy());
  ::kill(server().pid(), SIGINT);
  auto status = server().stop(10s);  // SIGTERM is harmless once exiting
  EXPECT_TRUE(status.clean()) << "SIGINT: " << status.describe();
}

}  // namespace
}  // namespace ragtor::test
