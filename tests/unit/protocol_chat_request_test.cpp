#include "protocol/chat_request_json.hpp"

#include <string>

#include <gtest/gtest.h>
#include <simdjson.h>

namespace ragtor {
namespace {

const request_limits limits{};

chat_request_parse parse(std::string_view body) {
  return parse_chat_request(body, limits);
}

// Expects rejection with `status`, the offending `field` and a message
// containing `fragment`.
void expect_rejected(std::string_view body, int status, std::string_view field,
                     std::string_view fragment) {
  auto r = parse(body);
  ASSERT_FALSE(r.ok) << body;
  EXPECT_EQ(r.error.status, status) << body;
  EXPECT_EQ(r.error.code, status == 413 ? "payload_too_large" : "invalid_request") << body;
  EXPECT_EQ(r.error.field, field) << body;
  EXPECT_NE(r.error.message.find(fragment), std::string::npos) << body << " -> " << r.error.message;
}

constexpr std::string_view minimal = R"({"user_id":"u1","session_id":"s1","message":"hi"})";

TEST(protocol_chat_request, valid_minimal) {
  auto r = parse(minimal);
  ASSERT_TRUE(r.ok) << r.error.message;
  EXPECT_EQ(r.request.user_id, "u1");
  EXPECT_EQ(r.request.session_id, "s1");
  EXPECT_EQ(r.request.message, "hi");
  EXPECT_EQ(r.request.kb_prefix, "");
  EXPECT_EQ(r.request.agent_type, "");
  EXPECT_EQ(r.request.request_id, "");
  EXPECT_FALSE(r.request.debug);
  EXPECT_FALSE(r.request.incognito);
}

TEST(protocol_chat_request, valid_full) {
  auto r = parse(R"( {
    "user_id": "alice@example.com", "session_id": "sess:42-a_b.c",
    "message": "  What is \"BM25\"?\n 中文 ", "kb_prefix": "edu",
    "agent_type": "graph_agent", "request_id": "req-1", "debug": true, "incognito": true } )");
  ASSERT_TRUE(r.ok) << r.error.message;
  EXPECT_EQ(r.request.user_id, "alice@example.com");
  EXPECT_EQ(r.request.session_id, "sess:42-a_b.c");
  EXPECT_EQ(r.request.message, "  What is \"BM25\"?\n 中文 ");
  EXPECT_EQ(r.request.kb_prefix, "edu");
  EXPECT_EQ(r.request.agent_type, "graph_agent");
  EXPECT_EQ(r.request.request_id, "req-1");
  EXPECT_TRUE(r.request.debug);
  EXPECT_TRUE(r.request.incognito);
}

TEST(protocol_chat_request, empty_optional_strings_are_allowed) {
  auto r =
      parse(R"({"user_id":"u","session_id":"s","message":"m","kb_prefix":"","agent_type":""})");
  ASSERT_TRUE(r.ok) << r.error.message;
  EXPECT_EQ(r.request.kb_prefix, "");
  EXPECT_EQ(r.request.agent_type, "");
}

TEST(protocol_chat_request, not_json) {
  expect_rejected("", 400, "", "not valid JSON");
  expect_rejected("{", 400, "", "not valid JSON");
  expect_rejected(R"({"user_id":"u",})", 400, "", "not valid JSON");
  expect_rejected("hello", 400, "", "not valid JSON");
}

TEST(protocol_chat_request, not_an_object) {
  expect_rejected("[]", 400, "", "must be a JSON object");
  expect_rejected(R"("text")", 400, "", "must be a JSON object");
  expect_rejected("42", 400, "", "must be a JSON object");
  expect_rejected("null", 400, "", "must be a JSON object");
}

TEST(protocol_chat_request, missing_required_fields) {
  expect_rejected(R"({"session_id":"s","message":"m"})", 400, "user_id",
                  R"(field "user_id" is required)");
  expect_rejected(R"({"user_id":"u","message":"m"})", 400, "session_id",
                  R"(field "session_id" is required)");
  expect_rejected(R"({"user_id":"u","session_id":"s"})", 400, "message",
                  R"(field "message" is required)");
  expect_rejected("{}", 400, "user_id", "is required");
}

TEST(protocol_chat_request, wrong_types) {
  expect_rejected(R"({"user_id":1,"session_id":"s","message":"m"})", 400, "user_id",
                  R"(field "user_id" must be a string)");
  expect_rejected(R"({"user_id":"u","session_id":null,"message":"m"})", 400, "session_id",
                  "must be a string");
  expect_rejected(R"({"user_id":"u","session_id":"s","message":["m"]})", 400, "message",
                  "must be a string");
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","kb_prefix":{}})", 400,
                  "kb_prefix", "must be a string");
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","debug":"true"})", 400, "debug",
                  R"(field "debug" must be a boolean)");
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","incognito":1})", 400,
                  "incognito", "must be a boolean");
}

TEST(protocol_chat_request, unknown_field) {
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","foo":1})", 400, "foo",
                  R"(unknown field "foo")");
  // Case matters: a typo is not silently accepted.
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","Debug":true})", 400, "Debug",
                  R"(unknown field "Debug")");
}

TEST(protocol_chat_request, unknown_field_name_is_capped_in_error) {
  std::string key(5000, 'k');
  auto r = parse(R"({"user_id":"u","session_id":"s","message":"m",")" + key + R"(":1})");
  ASSERT_FALSE(r.ok);
  EXPECT_LT(r.error.message.size(), 200u);
  EXPECT_LE(r.error.field.size(), 64u);
}

TEST(protocol_chat_request, duplicate_field) {
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","user_id":"v"})", 400, "user_id",
                  R"(duplicate field "user_id")");
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","debug":true,"debug":false})",
                  400, "debug", "duplicate field");
}

TEST(protocol_chat_request, bad_id_characters) {
  const std::string want = R"(must be 1-128 characters of [A-Za-z0-9_.:@-])";
  expect_rejected(R"({"user_id":"a b","session_id":"s","message":"m"})", 400, "user_id",
                  R"(field "user_id" )" + want);
  expect_rejected(R"({"user_id":"u","session_id":"s/1","message":"m"})", 400, "session_id", want);
  expect_rejected(R"({"user_id":"","session_id":"s","message":"m"})", 400, "user_id", want);
  expect_rejected(R"({"user_id":"é","session_id":"s","message":"m"})", 400, "user_id", want);
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","request_id":"r#1"})", 400,
                  "request_id", want);
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","request_id":""})", 400,
                  "request_id", want);
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","kb_prefix":"../etc"})", 400,
                  "kb_prefix", want);
  expect_rejected(R"({"user_id":"u\u0000","session_id":"s","message":"m"})", 400, "user_id", want);
}

TEST(protocol_chat_request, id_length_limit) {
  std::string ok(128, 'a');
  std::string too_long(129, 'a');
  EXPECT_TRUE(parse(R"({"user_id":")" + ok + R"(","session_id":"s","message":"m"})").ok);
  expect_rejected(R"({"user_id":"u","session_id":")" + too_long + R"(","message":"m"})", 400,
                  "session_id", "must be 1-128 characters");
  EXPECT_TRUE(is_valid_id("a.B_c:d@e-9", 128));
  EXPECT_FALSE(is_valid_id("abc", 2));
}

TEST(protocol_chat_request, empty_message) {
  expect_rejected(R"({"user_id":"u","session_id":"s","message":""})", 400, "message",
                  R"(field "message" must not be empty)");
  expect_rejected(R"({"user_id":"u","session_id":"s","message":" \n\t "})", 400, "message",
                  "must not be empty");
}

TEST(protocol_chat_request, message_too_long_is_413) {
  request_limits small;
  small.max_message_bytes = 10;
  auto body = [](std::string_view msg) {
    return R"({"user_id":"u","session_id":"s","message":")" + std::string{msg} + R"("})";
  };
  EXPECT_TRUE(parse_chat_request(body("0123456789"), small).ok);
  auto r = parse_chat_request(body("0123456789A"), small);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error.status, 413);
  EXPECT_EQ(r.error.code, "payload_too_large");
  EXPECT_EQ(r.error.field, "message");
  // Default limit: 32 KiB.
  expect_rejected(body(std::string(32 * 1024 + 1, 'x')), 413, "message", "exceeds 32768 bytes");
  EXPECT_TRUE(parse(body(std::string(32 * 1024, 'x'))).ok);
}

TEST(protocol_chat_request, body_too_large_is_413) {
  std::string body = std::string{minimal};
  body += std::string(limits.max_body_bytes, ' ');
  expect_rejected(body, 413, "", "request body exceeds 1048576 bytes");
  request_limits tiny;
  tiny.max_body_bytes = 10;
  auto r = parse_chat_request(minimal, tiny);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error.status, 413);
}

TEST(protocol_chat_request, invalid_utf8_is_400) {
  expect_rejected("{\"user_id\":\"u\",\"session_id\":\"s\",\"message\":\"caf\xC3\"}", 400, "",
                  "invalid UTF-8");
  expect_rejected("{\"user_id\":\"u\",\"session_id\":\"s\",\"message\":\"\xED\xA0\x80\"}", 400, "",
                  "invalid UTF-8");
  // Outside strings too.
  expect_rejected("{\"user_id\":\"u\",\"session_id\":\"s\",\"message\":\"m\"}\xFF", 400, "",
                  "invalid UTF-8");
  // An escaped lone surrogate would decode to invalid UTF-8.
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"\ud800"})", 400, "",
                  "invalid UTF-8");
}

TEST(protocol_chat_request, bad_agent_type) {
  expect_rejected(R"({"user_id":"u","session_id":"s","message":"m","agent_type":"llm_agent"})", 400,
                  "agent_type", R"(field "agent_type" must be one of)");
  for (auto name :
       {"naive_rag_agent", "hybrid_agent", "graph_agent", "deep_research_agent", "fusion_agent"}) {
    auto r = parse(R"({"user_id":"u","session_id":"s","message":"m","agent_type":")"
                   + std::string{name} + R"("})");
    EXPECT_TRUE(r.ok) << name << ": " << r.error.message;
  }
}

TEST(protocol_chat_request, error_body_shape) {
  EXPECT_EQ(
      error_body("invalid_request", R"(unknown field "foo")", "foo"),
      R"({"error":{"code":"invalid_request","message":"unknown field \"foo\"","field":"foo"}})");
  EXPECT_EQ(error_body("payload_too_large", "too big"),
            R"({"error":{"code":"payload_too_large","message":"too big"}})");
  // Always valid JSON, even with hostile content.
  auto body = error_body("invalid_request", "bad \xFF\n", "f\"");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(body).get(doc), simdjson::SUCCESS) << body;
  std::string_view field;
  ASSERT_EQ(doc["error"]["field"].get_string().get(field), simdjson::SUCCESS);
  EXPECT_EQ(field, "f\"");
}

}  // namespace
}  // namespace ragtor
