// The extractive generator: verbatim quotes, honest misses, exact tokens.
#include <gtest/gtest.h>

#include "llm/extractive_generator.hpp"

using namespace ragtor;

namespace {

retrieval_result evidence() {
  retrieval_result r;
  retrieval_item a;
  a.result_id = "tea#0";
  a.doc_id = "tea";
  a.title = "Brewing tea";
  a.evidence = "# Brewing tea\nGreen tea is steeped at 75 degrees. Black tea likes boiling water.";
  retrieval_item b;
  b.result_id = "moon#0";
  b.doc_id = "moon";
  b.title = "The Moon";
  b.evidence = "The Moon orbits the Earth every 27 days.";
  r.retrieval_results = {a, b};
  return r;
}

std::string concat(const std::vector<std::string>& tokens) {
  std::string out;
  for (auto& t : tokens)
    out += t;
  return out;
}

}  // namespace

TEST(extractive, quotes_matching_sentences_verbatim_with_citations) {
  auto ev = evidence();
  auto a = extractive_answer_for("At what temperature is green tea steeped?", ev, {});
  ASSERT_FALSE(a.citations.empty());
  EXPECT_EQ(a.citations[0].doc_id, "tea");
  EXPECT_EQ(a.citations[0].chunk_id, "tea#0");
  EXPECT_EQ(a.citations[0].quote, "Green tea is steeped at 75 degrees.");
  for (auto& c : a.citations) {
    EXPECT_TRUE(c.verified);
    auto& item = c.doc_id == "tea" ? ev.retrieval_results[0] : ev.retrieval_results[1];
    EXPECT_NE(item.evidence.find(c.quote), std::string::npos) << c.quote;
    EXPECT_NE(a.text.find(c.quote), std::string::npos);
    EXPECT_NE(c.quote.rfind("#", 0), 0u) << "a heading was quoted";
  }
  EXPECT_NE(a.text.find("Sources: [1] Brewing tea (tea)"), std::string::npos) << a.text;
  EXPECT_EQ(concat(a.tokens), a.text);
}

TEST(extractive, no_match_is_an_honest_reply_without_citations) {
  auto a = extractive_answer_for("quantum chromodynamics", evidence(), {});
  EXPECT_TRUE(a.citations.empty());
  EXPECT_NE(a.text.find("could not find"), std::string::npos);
  EXPECT_EQ(concat(a.tokens), a.text);
  auto none = extractive_answer_for("green tea", retrieval_result{}, {});
  EXPECT_TRUE(none.citations.empty());
}

TEST(extractive, respects_max_sentences) {
  extractive_options opts;
  opts.max_sentences = 1;
  auto a = extractive_answer_for("tea moon earth water", evidence(), opts);
  EXPECT_EQ(a.citations.size(), 1u);
}

TEST(extractive, general_reply_says_no_model_is_configured) {
  auto a = general_reply_without_model();
  EXPECT_NE(a.text.find("No language model is configured"), std::string::npos);
  EXPECT_EQ(concat(a.tokens), a.text);
}

TEST(extractive, tokens_never_split_utf8_and_concatenate_exactly) {
  std::string text = "混合 text 中文检索系统，works！ end\n\nnext";
  auto tokens = split_tokens(text);
  EXPECT_EQ(concat(tokens), text);
  for (auto& t : tokens) {
    ASSERT_FALSE(t.empty());
    EXPECT_NE(static_cast<unsigned char>(t[0]) & 0xC0, 0x80u) << "token starts mid-sequence";
  }
  EXPECT_GT(tokens.size(), 6u);
}
