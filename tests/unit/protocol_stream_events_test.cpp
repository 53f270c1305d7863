// SSE framing and event payloads (DESIGN §5.1).
#include <gtest/gtest.h>
#include <simdjson.h>

#include "protocol/stream_events.hpp"

using namespace ragtor;

namespace {

simdjson::dom::element parse(simdjson::dom::parser& p, const std::string& json) {
  return p.parse(json);
}

}  // namespace

TEST(stream_events, start_carries_request_id) {
  simdjson::dom::parser p;
  auto doc = parse(p, event_json(make_start_event(), "req_1"));
  EXPECT_EQ(std::string_view(doc["status"]), "start");
  EXPECT_EQ(std::string_view(doc["request_id"]), "req_1");
}

TEST(stream_events, token_text_is_escaped) {
  simdjson::dom::parser p;
  auto doc = parse(p, event_json(make_token_event("a \"quote\"\nline"), "r"));
  EXPECT_EQ(std::string_view(doc["status"]), "token");
  EXPECT_EQ(std::string_view(doc["content"]), "a \"quote\"\nline");
}

TEST(stream_events, error_members_are_spliced) {
  simdjson::dom::parser p;
  auto doc = parse(p, event_json(make_error_event("timeout", "too slow"), "r"));
  EXPECT_EQ(std::string_view(doc["status"]), "error");
  EXPECT_EQ(std::string_view(doc["code"]), "timeout");
  EXPECT_EQ(std::string_view(doc["message"]), "too slow");
}

TEST(stream_events, done_has_contract_fields) {
  done_content c;
  c.answer = "x [1]";
  c.conversation_id = "c1";
  c.message_id = "m1";
  c.citations.push_back({"doc", "doc#0", "Title", "x", true});
  c.chunk_ids = {"doc#0"};
  c.usage = {10, 2};
  c.partial = true;
  simdjson::dom::parser p;
  auto doc = parse(p, event_json(make_done_event(c), "req_9"));
  EXPECT_EQ(std::string_view(doc["status"]), "done");
  EXPECT_EQ(std::string_view(doc["request_id"]), "req_9");
  auto content = doc["content"];
  EXPECT_EQ(std::string_view(content["answer"]), "x [1]");
  EXPECT_EQ(std::string_view(content["conversation_id"]), "c1");
  EXPECT_EQ(std::string_view(content["message_id"]), "m1");
  EXPECT_EQ(bool(content["partial"]), true);
  EXPECT_EQ(std::string_view(content["citations"].at(0)["quote"]), "x");
  EXPECT_EQ(bool(content["citations"].at(0)["verified"]), true);
  EXPECT_EQ(std::string_view(content["reference"]["chunks"].at(0)["chunk_id"]), "doc#0");
  EXPECT_EQ(int64_t(content["usage"]["total_tokens"]), 12);
}

TEST(stream_events, progress_nulls) {
  simdjson::dom::parser p;
  auto doc =
      parse(p, event_json(make_progress_event("retrieval", 0, 1, "hybrid_agent", -1, ""), "r"));
  auto content = doc["content"];
  EXPECT_EQ(std::string_view(content["stage"]), "retrieval");
  EXPECT_TRUE(content["error"].is_null());
  EXPECT_TRUE(content["retrieval_count"].is_null());
  auto doc2 = parse(p, event_json(make_progress_event("retrieval", 1, 1, "x", 3, "boom"), "r"));
  EXPECT_EQ(int64_t(doc2["content"]["retrieval_count"]), 3);
  EXPECT_EQ(std::string_view(doc2["content"]["error"]), "boom");
}

TEST(stream_events, sse_frame_format) {
  std::string out;
  append_sse_frame(out, make_token_event("hi"), "r", 7);
  EXPECT_EQ(out, "id: r:7\ndata: {\"status\":\"token\",\"content\":\"hi\"}\n\n");
}
