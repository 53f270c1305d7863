// Rule-based long-term memory extraction (English and Chinese) and recall.
#include <gtest/gtest.h>

#include "memory/long_term.hpp"

namespace ragtor {
namespace {

std::vector<std::pair<std::string, std::string>> kinds(std::string_view msg) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& m : extract_memories(msg))
    out.emplace_back(m.kind, m.content);
  return out;
}

TEST(long_term_memory, extracts_stated_facts_in_english) {
  auto got = kinds(
      "Hi! My name is Ann. I really love green tea. I don't like bitter coffee; "
      "I'm allergic to peanuts. Please always answer in French. I work as a nurse.");
  std::vector<std::pair<std::string, std::string>> expected{
      {"identity", "My name is Ann"},
      {"preference", "I really love green tea"},
      {"dislike", "I don't like bitter coffee"},
      {"constraint", "I'm allergic to peanuts"},
      {"constraint", "Please always answer in French"},
      {"identity", "I work as a nurse"},
  };
  EXPECT_EQ(got, expected);
  for (auto& m : extract_memories("I'm allergic to peanuts."))
    EXPECT_EQ(m.ttl_days, 365);
}

TEST(long_term_memory, extracts_chinese_and_ignores_questions_and_other_text) {
  auto got = kinds("我叫小王。我不喜欢咖啡！我喜欢绿茶。我对花生过敏。");
  std::vector<std::pair<std::string, std::string>> expected{
      {"identity", "我叫小王"},
      {"dislike", "我不喜欢咖啡"},
      {"preference", "我喜欢绿茶"},
      {"constraint", "我对花生过敏"},
  };
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(kinds("Do I like tea? What is the capital of France?").empty());
  EXPECT_TRUE(kinds("你喜欢茶吗？").empty());
  EXPECT_TRUE(kinds("The lighthouse was built in 1870.").empty());
  EXPECT_EQ(kinds("I like tea. I like tea.").size(), 1u) << "duplicates once";
}

TEST(long_term_memory, recall_prefers_related_then_recent) {
  std::vector<std::pair<std::string, int64_t>> mem{
      {"I really love green tea", 1}, {"My name is Ann", 3}, {"I'm allergic to peanuts", 2}};
  auto r = recall_memories("Which tea should I brew?", mem, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], "I really love green tea");
  EXPECT_EQ(r[1], "My name is Ann") << "then the most recent";
  EXPECT_EQ(recall_memories("x", mem, 5).size(), 3u);
}

}  // namespace
}  // namespace ragtor
