// Base URLs of OpenAI-compatible endpoints parsed by Boost.URL: http and
// https with their default ports, explicit ports, IPv6 literals and the
// path prefix requests are sent under.
#include "llm/base_url.hpp"

#include <gtest/gtest.h>

namespace ragtor::llm {
namespace {

base_url parse_ok(std::string_view s) {
  auto u = parse_base_url(s);
  EXPECT_TRUE(u) << s;
  return u.value_or(base_url{});
}

TEST(llm_base_url, http_with_port_and_prefix) {
  auto u = parse_ok("http://127.0.0.1:8080/v1");
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "8080");
  EXPECT_EQ(u.prefix, "/v1");
}

TEST(llm_base_url, default_ports) {
  EXPECT_EQ(parse_ok("http://api.example.com/v1").port, "80");
  auto u = parse_ok("https://api.example.com/v1");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.port, "443");
  EXPECT_EQ(parse_ok("https://api.example.com:/v1").port, "443") << "an empty port";
}

TEST(llm_base_url, trailing_slashes_and_no_path) {
  EXPECT_EQ(parse_ok("http://h/v1/").prefix, "/v1");
  EXPECT_EQ(parse_ok("http://h/api/openai//").prefix, "/api/openai");
  EXPECT_EQ(parse_ok("http://h").prefix, "");
  EXPECT_EQ(parse_ok("http://h/").prefix, "");
}

TEST(llm_base_url, ipv6_literals_lose_their_brackets) {
  auto u = parse_ok("http://[::1]:9000/v1");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, "9000");
  EXPECT_EQ(u.prefix, "/v1");
  auto d = parse_ok("https://[2001:db8::7]/v1");
  EXPECT_EQ(d.host, "2001:db8::7");
  EXPECT_EQ(d.port, "443");
}

TEST(llm_base_url, user_info_is_not_part_of_the_host) {
  EXPECT_EQ(parse_ok("http://user:secret@h:81/v1").host, "h");
}

TEST(llm_base_url, refuses_what_it_cannot_call) {
  for (auto s : {"", "ftp://x", "x", "127.0.0.1:8080/v1", "http://", "http:///v1", "http://[::1/v1",
                 "http://h:port/v1", "//h/v1"})
    EXPECT_FALSE(parse_base_url(s)) << s;
}

}  // namespace
}  // namespace ragtor::llm
