// The JSON answer of POST /api/v1/chat: request_id and route_decision (and
// execution_log when debugging, the error when the turn failed) followed
// by the members of done.content, byte for byte as the events carry them;
// the status follows the error's code.
#include "http/chat_reply.hpp"

#include <gtest/gtest.h>

#include "http/turn_follow.hpp"
#include "tests/support/id_checks.hpp"

#include "protocol/stream_events.hpp"

namespace ragtor::http {
namespace {

stream_event done_event() {
  done_content c;
  c.answer = "Tea \"first\" [1]";
  c.conversation_id = "c1";
  c.message_id = "m1";
  c.citations.push_back({"doc", "doc#0", "Title", "x", true});
  c.chunk_ids = {"doc#0"};
  c.usage = {10, 2};
  return make_done_event(c);
}

// The reply is the given prefix members followed by done.content's.
std::string with_done_members(const std::string& prefix, const stream_event& done) {
  return prefix + "," + done.data.substr(1);
}

TEST(http_chat_reply, done_members_follow_request_id_and_route) {
  chat_reply reply;
  EXPECT_FALSE(reply.done());
  reply.add(make_start_event());
  reply.add(make_token_event("Tea"));
  auto done = done_event();
  reply.add(done);
  ASSERT_TRUE(reply.done());
  EXPECT_EQ(reply.status(), 200u);
  EXPECT_EQ(reply.json("req_1", false),
            with_done_members(R"({"request_id":"req_1","route_decision":null)", done));
}

TEST(http_chat_reply, route_decision_and_execution_logs_when_debugging) {
  route_decision rd;
  rd.kb_prefix = "harbour";
  rd.confidence = 0.75;
  auto route = make_route_event(rd, true);
  chat_reply reply;
  reply.add(route);
  reply.add({event_kind::execution_log, R"({"node":"retrieve","duration_ms":3})", false});
  reply.add({event_kind::execution_log, R"({"node":"generate","duration_ms":9})", false});
  auto done = done_event();
  reply.add(done);
  EXPECT_EQ(reply.json("r", true),
            with_done_members(R"({"request_id":"r","route_decision":)" + route.data
                                  + R"(,"execution_log":[{"node":"retrieve","duration_ms":3},)"
                                  + R"({"node":"generate","duration_ms":9}])",
                              done));
  EXPECT_EQ(reply.json("r", false),
            with_done_members(R"({"request_id":"r","route_decision":)" + route.data, done))
      << "no execution_log without debug";
}

TEST(http_chat_reply, an_error_sets_the_status_and_is_included) {
  auto error = make_error_event("timeout", "the model did not answer in time");
  chat_reply reply;
  reply.add(error);
  auto done = done_event();
  reply.add(done);
  EXPECT_EQ(reply.status(), 504u);
  EXPECT_EQ(
      reply.json("r", false),
      with_done_members(R"({"request_id":"r","route_decision":null,"error":)" + error.data, done));
}

TEST(http_chat_reply, error_codes_map_to_statuses) {
  auto status_of = [](std::string_view code) {
    chat_reply reply;
    reply.add(make_error_event(code, "m"));
    return reply.status();
  };
  EXPECT_EQ(status_of("overloaded"), 503u);
  EXPECT_EQ(status_of("slow_client"), 499u);
  EXPECT_EQ(status_of("no_such_code"), 500u);
}

TEST(http_chat_reply, the_request_id_is_escaped) {
  chat_reply reply;
  auto done = done_event();
  reply.add(done);
  EXPECT_EQ(reply.json("a\"b", false),
            with_done_members(R"({"request_id":"a\"b","route_decision":null)", done));
}

// A server-made request id: "req_" then a row id (the time in milliseconds,
// then 80 random bits), so that ids made later sort later and each turn's
// messages land at the right end of the request-id index; distinct within
// one millisecond.
TEST(http_request_ids, sort_by_time_and_do_not_repeat) {
  test::expect_ids_in_time_order([] { return new_request_id(); }, "req_");
}

}  // namespace
}  // namespace ragtor::http
