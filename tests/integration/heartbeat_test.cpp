// SSE heartbeat (DESIGN §5.1): after sse.heartbeat_s of silence the server
// sends a `: ping` comment, and the stream goes on afterwards. And direct
// writes ([sse] direct_writes): tokens far apart are written to the socket
// by the turn's own thread, the stream the same.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/http_client.hpp"
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

// One sample's value in Prometheus text (0 when absent).
double metric(uint16_t port, const std::string& series) {
  auto body = request(port, "GET", "/metrics").body;
  auto at = body.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::strtod(body.c_str() + at + series.size() + 2, nullptr);
}

// Tokens 30 ms apart, with direct writes on (the default) or off.
class direct_write_test : public ragtor_server_test, public ::testing::WithParamInterface<bool> {
protected:
  env_vars server_env() const override {
    return {{"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "30"},
            {"RAGTOR_SSE__DIRECT_WRITES", GetParam() ? "true" : "false"}};
  }
};

TEST_P(direct_write_test, paced_tokens_arrive_whole_and_in_order_either_way) {
  const char* question = "How long do the batteries of the Lumenlatch K7 last?";
  auto before = metric(port(), "ragtor_sse_direct_writes_total");
  auto r = chat_stream(port(), chat_body("dora", "s1", question));
  ASSERT_TRUE(well_formed_stream(r));
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.tokens, r.answer()) << "the tokens, in order, are the stored answer";
  size_t tokens = 0;
  for (auto& e : r.events)
    tokens += e.str("/status") == "token";
  EXPECT_GT(tokens, 3u);
  auto direct = metric(port(), "ragtor_sse_direct_writes_total") - before;
  if (GetParam())
    EXPECT_GT(direct, 0) << "tokens 30 ms apart find the connection's writer waiting";
  else
    EXPECT_EQ(direct, 0);
}

INSTANTIATE_TEST_SUITE_P(on_off, direct_write_test, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "on" : "off"; });

}  // namespace
}  // namespace ragtor::test
