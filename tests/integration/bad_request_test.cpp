// Bad input gets a clear 4xx with {"error":{"code","message","field"?}} and
// changes nothing (DESIGN §5, §13), on both chat endpoints.
#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

using bad_request_test = ragtor_server_test;

struct bad_case {
  std::string name;
  std::string body;
  int status;
  std::string field;  // expected error.field; "" when none is required
};

std::vector<bad_case> bad_chat_requests() {
  const std::string user = R"("user_id":"mallory")";
  const std::string session = R"("session_id":"bad")";
  const std::string message = R"("message":"How long do the batteries last?")";
  return {
      {"unknown field", "{" + user + "," + session + "," + message + R"(,"colour":"blue"})", 400,
       "colour"},
      {"missing message", "{" + user + "," + session + "}", 400, "message"},
      {"missing user_id", "{" + session + "," + message + "}", 400, "user_id"},
      {"missing session_id", "{" + user + "," + message + "}", 400, "session_id"},
      {"invalid JSON", "{" + user + "," + session + ",", 400, ""},
      {"not an object", R"(["mallory","bad"])", 400, ""},
      {"empty body", "", 400, ""},
      {"invalid UTF-8", "{" + user + "," + session + R"(,"message":"tea )" + "\xff\xfe" + R"("})",
       400, ""},
      {"lone surrogate escape", "{" + user + "," + session + R"(,"message":"\ud800"})", 400, ""},
      {"wrong type", "{" + user + "," + session + "," + message + R"(,"debug":"yes"})", 400,
       "debug"},
      {"bad id characters", R"({"user_id":"mallory the great",)" + session + "," + message + "}",
       400, "user_id"},
      {"empty message", "{" + user + "," + session + R"(,"message":""})", 400, "message"},
      {"message over 32 KiB",
       "{" + user + "," + session + R"(,"message":")" + std::string(32 * 1024 + 1, 'a') + "\"}",
       413, "message"},
      {"body over 1 MiB",
       "{" + user + "," + session + R"(,"message":")" + std::string(1024 * 1024 + 16, 'a') + "\"}",
       413, ""},
  };
}

// The response is an error JSON naming `field` (when not empty).
::testing::AssertionResult is_error_response(const http_response& res, int status,
                                             const std::string& field) {
  if (res.status != status)
    return ::testing::AssertionFailure()
           << "status " << res.status << " (want " << status << "), body " << res.body;
  try {
    auto j = json::parse(res.body);
    if (!j.has("/error/code") || j.str("/error/code").empty() || !j.has("/error/message"))
      return ::testing::AssertionFailure() << "no error.code/error.message in " << res.body;
    j.str("/error/message");
    if (!field.empty() && (!j.has("/error/field") || j.str("/error/field") != field))
      return ::testing::AssertionFailure()
             << "error.field is not \"" << field << "\": " << res.body;
  } catch (const json_error& e) {
    return ::testing::AssertionFailure() << e.what();
  }
  return ::testing::AssertionSuccess();
}

int64_t conversation_rows(const db_reader& db) {
  if (!std::filesystem::exists(db.db_path()))
    return 0;
  return db.scalar("SELECT count(*) FROM conversations").value_or(0);
}

TEST_F(bad_request_test, malformed_chat_requests_get_4xx_and_change_nothing) {
  for (auto path : {chat_stream_path, chat_path}) {
    for (const auto& c : bad_chat_requests()) {
      SCOPED_TRACE(std::string{path} + ": " + c.name);
      http_response res;
      try {
        res = request(port(), "POST", path, c.body);
      } catch (const http_error& e) {
        ADD_FAILURE() << "no response: " << e.what();
        continue;
      }
      EXPECT_TRUE(is_error_response(res, c.status, c.field));
      EXPECT_FALSE(res.header("content-type").starts_with("text/event-stream"));
    }
  }
  EXPECT_TRUE(healthy());
  EXPECT_EQ(conversation_rows(db()), 0) << "a rejected request created a conversation";
}

TEST_F(bad_request_test, message_of_exactly_32_kib_is_accepted) {
  auto body = chat_body("mallory", "big", std::string(32 * 1024, 'a'));
  auto r = chat_stream(port(), body);
  EXPECT_TRUE(well_formed_stream(r));
}

TEST_F(bad_request_test, wrong_method_and_unknown_path) {
  auto wrong_method = request(port(), "GET", chat_stream_path);
  EXPECT_TRUE(wrong_method.status == 405 || wrong_method.status == 404)
      << "GET " << chat_stream_path << ": " << wrong_method.status;
  EXPECT_TRUE(is_error_response(wrong_method, wrong_method.status, ""));

  auto put = request(port(), "PUT", chat_path, chat_body("mallory", "m", "hello"));
  EXPECT_TRUE(put.status == 405 || put.status == 404) << "PUT " << chat_path << ": " << put.status;
  EXPECT_TRUE(is_error_response(put, put.status, ""));

  auto unknown = request(port(), "GET", "/api/v1/no-such-thing");
  EXPECT_TRUE(is_error_response(unknown, 404, ""));

  auto unknown_post = request(port(), "POST", "/api/v2/chat", chat_body("mallory", "m", "hi"));
  EXPECT_TRUE(is_error_response(unknown_post, 404, ""));

  EXPECT_TRUE(healthy());
  EXPECT_EQ(conversation_rows(db()), 0);
}

// A known path asked with another method is a 405 whose Allow header names
// the methods the path takes; an unknown path is a 404 without one.
TEST_F(bad_request_test, wrong_method_is_405_with_allow) {
  struct wrong {
    std::string method, path, allow;
  };
  for (auto& w : std::vector<wrong>{{"GET", std::string{chat_stream_path}, "POST"},
                                    {"PUT", std::string{chat_path}, "POST"},
                                    {"POST", "/healthz", "GET"},
                                    {"DELETE", "/api/v1/kbs", "GET, POST"},
                                    {"POST", "/api/v1/users/ann/memory", "GET, PUT"},
                                    {"GET", "/api/v1/conversations/c1", "DELETE"}}) {
    SCOPED_TRACE(w.method + " " + w.path);
    auto res = request(port(), w.method, w.path, w.method == "GET" ? "" : "{}");
    EXPECT_TRUE(is_error_response(res, 405, ""));
    EXPECT_EQ(json::parse(res.body).str("/error/code"), "method_not_allowed");
    EXPECT_EQ(res.header("allow"), w.allow);
  }
  auto unknown = request(port(), "GET", "/api/v1/no-such-thing");
  EXPECT_TRUE(is_error_response(unknown, 404, ""));
  EXPECT_EQ(json::parse(unknown.body).str("/error/code"), "not_found");
  EXPECT_EQ(unknown.header("allow"), "");
  EXPECT_TRUE(healthy());
  EXPECT_EQ(conversation_rows(db()), 0);
}

TEST_F(bad_request_test, garbage_on_the_socket_does_not_hurt_the_server) {
  try {
    auto res = request_raw(port(), "THIS IS NOT HTTP\r\n\r\n", 10s);
    EXPECT_GE(res.status, 400);
  } catch (const http_error&) {
    // Closing the connection without a response is acceptable too.
  }
  EXPECT_TRUE(healthy());
}

}  // namespace
}  // namespace ragtor::test
