#include "protocol/json_writer.hpp"
#include "protocol/json_document.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>

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

// Plain bytes are passed over 16 at a time; whatever falls on or across
// those steps (quotes, backslashes, controls, DEL, UTF-8 of every length,
// a byte that is never UTF-8) is written as when it stands alone.
TEST(protocol_json_writer, every_piece_is_escaped_wherever_it_falls) {
  const std::vector<std::string> pieces{
      "k", std::string(15, 'a'), std::string(16, 'b'), std::string(17, 'c'), std::string(33, 'd'),
      "\"", "\\", "\n", "\x01", "\x1f", "\x7f", " ", "\xC3\xA9", "\xE4\xB8\xAD",
      "\xF0\x9F\x99\x82", "\xFF"};
  auto bare = [](std::string_view piece) {
    auto q = str(piece);
    return q.substr(1, q.size() - 2);
  };
  std::mt19937 rng{99};
  for (int n = 0; n < 2000; ++n) {
    std::string text, expected;
    auto target = rng() % 200;
    while (text.size() < target) {
      auto& piece = pieces[rng() % pieces.size()];
      text += piece;
      expected += bare(piece);
    }
    ASSERT_EQ(str(text), "\"" + expected + "\"") << n;
  }
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

// The first 64 levels keep their commas in a word, deeper ones apart:
// both, and the way back up through them, as at one level.
TEST(protocol_json_writer, commas_at_every_depth) {
  for (int depth : {1, 63, 64, 65, 130}) {
    json_writer w;
    std::string expected;
    for (int d = 0; d < depth; ++d) {
      w.begin_array().value(d);
      expected += "[" + std::to_string(d) + ",";
    }
    w.value("x");
    expected += "\"x\"";
    for (int d = depth - 1; d >= 1; --d) {
      w.end_array().value(-d);
      expected += "]," + std::to_string(-d);
    }
    w.end_array();
    expected += "]";
    EXPECT_EQ(w.str(), expected) << depth;
  }
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

std::string_view string_at(const json_document& d, const char* key) {
  simdjson::dom::object obj;
  std::string_view s;
  if (d.get(obj) != simdjson::SUCCESS || obj[key].get_string().get(s) != simdjson::SUCCESS)
    return "<missing>";
  return s;
}

TEST(protocol_json_document, documents_one_after_another_share_the_threads_parser) {
  for (int i = 0; i < 3; ++i) {
    std::string text = R"({"n": ")" + std::to_string(i) + R"(", "pad": ")" + std::string(i * 300, 'x')
                       + R"("})";
    json_document d{text};
    EXPECT_TRUE(d.reused()) << i;
    EXPECT_EQ(string_at(d, "n"), std::to_string(i));
  }
}

TEST(protocol_json_document, a_document_parsed_while_another_lives_leaves_it_intact) {
  json_document outer{R"({"k": "outer", "list": [1, 2, 3]})"};
  ASSERT_TRUE(outer.reused());
  {
    // Longer than the outer text, so that reusing the outer's parser would
    // overwrite its tape and strings.
    json_document inner{R"({"k": "inner-inner-inner", "more": [4, 5, 6, 7, 8, 9]})"};
    EXPECT_FALSE(inner.reused());
    EXPECT_EQ(string_at(inner, "k"), "inner-inner-inner");
  }
  EXPECT_EQ(string_at(outer, "k"), "outer");
  simdjson::dom::object obj;
  ASSERT_EQ(outer.get(obj), simdjson::SUCCESS);
  EXPECT_EQ(obj["list"].get_array().size(), 3u);
  // With the inner gone and the outer still alive, the next is not reused either.
  json_document third{R"({"k": "third"})"};
  EXPECT_FALSE(third.reused());
  EXPECT_EQ(string_at(outer, "k"), "outer");
}

TEST(protocol_json_document, large_documents_and_errors) {
  std::string big = R"({"k": ")" + std::string(json_document::kReusedMaxBytes, 'b') + R"("})";
  {
    json_document d{big};
    EXPECT_FALSE(d.reused());
    EXPECT_EQ(string_at(d, "k").size(), json_document::kReusedMaxBytes);
  }
  {
    json_document bad{R"({"k": )"};
    EXPECT_NE(bad.error(), simdjson::SUCCESS);
    json_document bad_utf8{"{\"k\": \"\xff\"}"};
    EXPECT_EQ(bad_utf8.error(), simdjson::UTF8_ERROR);
  }
  // The thread's parser is free again and parses correctly after the errors.
  json_document d{R"({"k": "after"})"};
  EXPECT_TRUE(d.reused());
  EXPECT_EQ(string_at(d, "k"), "after");
}

TEST(protocol_json_document, each_thread_has_its_own_parser) {
  json_document here{R"({"k": "main thread"})"};
  ASSERT_TRUE(here.reused());
  bool reused_there = false;
  std::string there_k;
  std::thread t{[&] {
    json_document there{R"({"k": "other thread, longer text"})"};
    reused_there = there.reused();
    there_k = std::string{string_at(there, "k")};
  }};
  t.join();
  EXPECT_TRUE(reused_there);
  EXPECT_EQ(there_k, "other thread, longer text");
  EXPECT_EQ(string_at(here, "k"), "main thread");
}

}  // namespace
}  // namespace ragtor

