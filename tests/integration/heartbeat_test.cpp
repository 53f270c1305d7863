// SSE heartbeat (DESIGN §5.1): after sse.heartbeat_s of silence the server
// sends a `: ping` comment, and the stream goes on afterwards.
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

class heartbeat_test : public ragtor_server_test {
protected:
  // Tokens 1.5 s apart, pings after 1 s of silence.
  env_vars server_env() const override {
    return {{"RAGTOR_SSE__HEARTBEAT_S", "1"}, {"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "1500"}};
  }
};

TEST_F(heartbeat_test, a_silent_stream_gets_ping_comments) {
  auto stream =
      open_sse(port(), chat_stream_path,
               chat_body("alice", "s1", "How long do the batteries of the Lumenlatch K7 last?"));
  bool ping = false;
  int tokens_after_ping = 0;
  for (int i = 0; i < 50 && tokens_after_ping == 0; ++i) {
    auto ev = stream.next_event(std::chrono::seconds(10));
    ASSERT_TRUE(ev) << "the stream went quiet without a ping";
    if (ev->is_comment)
      ping = ping || ev->data.find("ping") != std::string::npos;
    else if (ping && ev->data.find("\"token\"") != std::string::npos)
      ++tokens_after_ping;
  }
  EXPECT_TRUE(ping);
  EXPECT_GT(tokens_after_ping, 0);
  stream.close();
  EXPECT_TRUE(healthy());
}

}  // namespace
}  // namespace ragtor::test
