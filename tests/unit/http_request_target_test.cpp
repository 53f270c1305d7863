// Request targets split by Boost.URL: the raw path for the router and the
// query parameters percent-decoded, '+' as a space, the last of a repeated
// key winning; a malformed query is refused as a whole.
#include "http/request_target.hpp"

#include <gtest/gtest.h>

namespace ragtor::http {
namespace {

TEST(http_request_target, path_without_query) {
  auto t = parse_request_target("/api/v1/conversations");
  EXPECT_TRUE(t.valid);
  EXPECT_EQ(t.path, "/api/v1/conversations");
  EXPECT_TRUE(t.query.empty());
}

TEST(http_request_target, the_path_stays_encoded) {
  auto t = parse_request_target("/api/v1/users/bad%20id/memory?x=1");
  EXPECT_EQ(t.path, "/api/v1/users/bad%20id/memory");
}

TEST(http_request_target, query_parameters_are_decoded) {
  auto t = parse_request_target(
      "/c?user_id=ann&limit=20&cursor=171%3Aconv_1&q=tea+for%20two&plus=%2B&empty=&flag");
  ASSERT_TRUE(t.valid);
  EXPECT_EQ(t.path, "/c");
  EXPECT_EQ(t.query.at("user_id"), "ann");
  EXPECT_EQ(t.query.at("limit"), "20");
  EXPECT_EQ(t.query.at("cursor"), "171:conv_1");
  EXPECT_EQ(t.query.at("q"), "tea for two");
  EXPECT_EQ(t.query.at("plus"), "+");
  EXPECT_EQ(t.query.at("empty"), "");
  EXPECT_EQ(t.query.at("flag"), "");
  EXPECT_EQ(t.query.size(), 7u);
}

TEST(http_request_target, keys_are_decoded_too) {
  auto t = parse_request_target("/c?user%5Fid=ann&a+b=c");
  EXPECT_EQ(t.query.at("user_id"), "ann");
  EXPECT_EQ(t.query.at("a b"), "c");
}

TEST(http_request_target, the_last_repeated_key_wins_and_empty_pairs_are_skipped) {
  auto t = parse_request_target("/c?limit=1&&limit=2&");
  ASSERT_TRUE(t.valid);
  EXPECT_EQ(t.query.at("limit"), "2");
  EXPECT_EQ(t.query.size(), 1u);
}

TEST(http_request_target, an_empty_query_has_no_parameters) {
  auto t = parse_request_target("/c?");
  EXPECT_TRUE(t.valid);
  EXPECT_EQ(t.path, "/c");
  EXPECT_TRUE(t.query.empty());
}

TEST(http_request_target, only_the_first_question_mark_splits) {
  auto t = parse_request_target("/c?next=/a?b=1");
  ASSERT_TRUE(t.valid);
  EXPECT_EQ(t.query.at("next"), "/a?b=1");
}

TEST(http_request_target, bad_percent_escapes_make_the_query_invalid) {
  for (auto raw : {"/c?user_id=%zz", "/c?user_id=%4", "/c?user_id=%", "/c?%G0=1"})
    EXPECT_FALSE(parse_request_target(raw).valid) << raw;
}

TEST(http_request_target, reads_nothing_past_the_end_of_the_target) {
  // As in Beast's header buffer: the target is followed by the rest of the
  // request line, not by a NUL.
  std::string line = "/c?user_id=alice&q=a+b HTTP/1.1\r\nHost: x\r\n\r\n";
  auto t = parse_request_target(std::string_view{line}.substr(0, line.find(' ')));
  ASSERT_TRUE(t.valid);
  EXPECT_EQ(t.query.at("user_id"), "alice");
  EXPECT_EQ(t.query.at("q"), "a b");
}

TEST(http_request_target, int_param_checks_range_and_form) {
  EXPECT_EQ(int_param("20", 1, 100), 20);
  EXPECT_EQ(int_param("0", 1, 100), std::nullopt);
  EXPECT_EQ(int_param("101", 1, 100), std::nullopt);
  EXPECT_EQ(int_param("2x", 1, 100), std::nullopt);
  EXPECT_EQ(int_param("", 1, 100), std::nullopt);
  EXPECT_EQ(int_param("-1", -5, 5), -1);
}

}  // namespace
}  // namespace ragtor::http
