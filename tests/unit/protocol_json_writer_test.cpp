#include "protocol/json_writer.hpp"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <simdjson.h>

namespace ragtor {
namespace {

std::string str(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

TEST(protocol_json_writer, escapes_quotes_backslashes_and_controls) {
  EXPECT_EQ(str("plain"), "\"plain\"");
  EXPECT_EQ(str("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(str("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(str(std::string_view{"\x00\x01\x1f\x7f", 4}), "\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(str("/"), "\"/\"");
}

TEST(protocol_json_writer, keeps_valid_utf8) {
  EXPECT_EQ(str("héllo 中文 🙂"), "\"héllo 中文 🙂\"");
  EXPECT_TRUE(is_valid_utf8("héllo 中文 🙂"));
  EXPECT_TRUE(is_valid_utf8(""));
}

TEST(protocol_json_writer, replaces_invalid_utf8) {
  const std::string fffd = "\xEF\xBF\xBD";
  // Lone continuation byte, invalid lead bytes.
  EXPECT_EQ(str("a\x80z"), "\"a" + fffd + "z\"");
  EXPECT_EQ(str("\xC0\xAF"), "\"" + fffd + fffd + "\"");  // overlong '/'
  EXPECT_EQ(str("\xFF"), "\"" + fffd + "\"");
  // Truncated sequence: one replacement for the maximal subpart.
  EXPECT_EQ(str("\xE4\xB8"), "\"" + fffd + "\"");
  EXPECT_EQ(str("\xE4\xB8x"), "\"" + fffd + "x\"");
  // Surrogate half and code point above U+10FFFF.
  EXPECT_EQ(str("\xED\xA0\x80"), "\"" + fffd + fffd + fffd + "\"");
  EXPECT_EQ(str("\xF4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");
  for (auto bad : {"\x80", "\xC0\xAF", "\xE4\xB8", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                   "\xF8\x88\x80\x80\x80", "ok\xC3"})
    EXPECT_FALSE(is_valid_utf8(bad)) << bad;
}

TEST(protocol_json_writer, nests_with_commas) {
  json_writer w;
  w.begin_object()
      .field("a", 1)
      .key("b")
      .begin_array()
      .value(true)
      .null()
      .begin_object()
      .end_object()
      .begin_array()
      .end_array()
      .value("x")
      .end_array()
      .key("c")
      .begin_object()
      .field("d", false)
      .field("e", std::string{"f"})
      .end_object()
      .key("r")
      .raw(R"({"z":[1,2]})")
      .field("u", uint64_t{18446744073709551615ull})
      .field("i", int64_t{-9223372036854775807LL - 1})
      .end_object();
  EXPECT_EQ(w.str(), R"({"a":1,"b":[true,null,{},[],"x"],"c":{"d":false,"e":"f"},)"
                     R"("r":{"z":[1,2]},"u":18446744073709551615,"i":-9223372036854775808})");
}

TEST(protocol_json_writer, top_level_scalars_and_empty_containers) {
  EXPECT_EQ(json_writer{}.value("s").str(), "\"s\"");
  EXPECT_EQ(json_writer{}.begin_array().end_array().str(), "[]");
  EXPECT_EQ(json_writer{}.begin_object().end_object().str(), "{}");
  EXPECT_EQ(json_writer{}.begin_array().value(1).value(2).value(3).end_array().str(), "[1,2,3]");
}

TEST(protocol_json_writer, doubles) {
  auto num = [](double d) { return json_writer{}.value(d).take(); };
  EXPECT_EQ(num(0.1), "0.1");
  EXPECT_EQ(num(1.0), "1");
  EXPECT_EQ(num(-2.5), "-2.5");
  EXPECT_EQ(num(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(num(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(num(-std::numeric_limits<double>::infinity()), "null");
  json_writer w;
  w.begin_array().value(std::nan("")).value(0.5).end_array();
  EXPECT_EQ(w.str(), "[null,0.5]");
}

TEST(protocol_json_writer, round_trips_through_simdjson) {
  const std::string nasty = std::string{"q\"b\\s\n\t\x01 é 🙂 "} + "\xC3" + "end";
  const double values[] = {0.1,
                           1.0 / 3.0,
                           1e300,
                           -1e-300,
                           123456789.125,
                           std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::denorm_min()};
  json_writer w;
  w.begin_object().field("s", nasty).key("d").begin_array();
  for (double d : values)
    w.value(d);
  w.end_array().field("n", int64_t{-42}).end_object();

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(w.str()).get(doc), simdjson::SUCCESS) << w.str();
  std::string_view s;
  ASSERT_EQ(doc["s"].get_string().get(s), simdjson::SUCCESS);
  EXPECT_EQ(s, std::string{"q\"b\\s\n\t\x01 é 🙂 "} + "\xEF\xBF\xBD" + "end");
  simdjson::dom::array arr;
  ASSERT_EQ(doc["d"].get_array().get(arr), simdjson::SUCCESS);
  size_t i = 0;
  for (auto el : arr) {
    double d;
    ASSERT_EQ(el.get_double().get(d), simdjson::SUCCESS);
    EXPECT_EQ(d, values[i]) << i;
    ++i;
  }
  EXPECT_EQ(i, std::size(values));
  int64_t n;
  ASSERT_EQ(doc["n"].get_int64().get(n), simdjson::SUCCESS);
  EXPECT_EQ(n, -42);
}

}  // namespace
}  // namespace ragtor
