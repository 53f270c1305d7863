// The extractive generator: verbatim quotes with citations that check out
// against the evidence, honest misses, tokens that add up to the text.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "llm/extractive_generator.hpp"

using namespace ragtor;

namespace {

retrieval_item item(std::string doc_id, std::string title, std::string evidence) {
  retrieval_item it;
  it.result_id = doc_id + "#0";
  it.source_id = it.result_id;
  it.doc_id = std::move(doc_id);
  it.title = std::move(title);
  it.evidence = std::move(evidence);
  it.granularity = "chunk";
  it.source = "bm25";
  return it;
}

retrieval_result evidence() {
  retrieval_result r;
  r.retrieval_results = {
      item("tea", "Brewing tea",
           "# Brewing tea\nGreen tea is steeped at 75 degrees. Black tea likes boiling water."),
      item("moon", "The Moon", "The Moon orbits the Earth every 27 days.")};
  return r;
}

std::string concat(const std::vector<std::string>& tokens) {
  std::string out;
  for (auto& t : tokens)
    out += t;
  return out;
}

const retrieval_item* cited_item(const retrieval_result& ev, const citation& c) {
  for (auto& it : ev.retrieval_results)
    if (it.result_id == c.chunk_id)
      return &it;
  return nullptr;
}

// Every citation is verbatim in the evidence item it names and in the answer.
void expect_verified(const extractive_answer& a, const retrieval_result& ev) {
  for (auto& c : a.citations) {
    EXPECT_TRUE(c.verified);
    auto* it = cited_item(ev, c);
    ASSERT_NE(it, nullptr) << c.chunk_id;
    EXPECT_EQ(c.doc_id, it->doc_id);
    EXPECT_EQ(c.title, it->title);
    EXPECT_FALSE(c.quote.empty());
    EXPECT_NE(it->evidence.find(c.quote), std::string::npos) << c.quote;
    EXPECT_NE(a.text.find(c.quote), std::string::npos) << c.quote;
  }
  EXPECT_EQ(concat(a.tokens), a.text);
}

}  // namespace

TEST(extractive, quotes_the_matching_sentence_verbatim_with_a_citation) {
  auto ev = evidence();
  auto a = extractive_answer_for("At what temperature is green tea steeped?", ev, {});
  ASSERT_EQ(a.citations.size(), 1u) << a.text;
  EXPECT_EQ(a.citations[0].doc_id, "tea");
  EXPECT_EQ(a.citations[0].chunk_id, "tea#0");
  EXPECT_EQ(a.citations[0].title, "Brewing tea");
  EXPECT_EQ(a.citations[0].quote, "Green tea is steeped at 75 degrees.");
  expect_verified(a, ev);
  EXPECT_EQ(a.text,
            "According to the knowledge base: Green tea is steeped at 75 degrees. [1]\n\n"
            "Sources: [1] Brewing tea (tea)");
}

TEST(extractive, several_sources_are_numbered_in_evidence_order) {
  auto ev = evidence();
  auto a = extractive_answer_for("black tea water and the moon orbit", ev, {});
  ASSERT_EQ(a.citations.size(), 2u) << a.text;
  expect_verified(a, ev);
  EXPECT_EQ(a.citations[0].doc_id, "tea");
  EXPECT_EQ(a.citations[1].doc_id, "moon");
  EXPECT_NE(a.text.find(
                "Black tea likes boiling water. [1] The Moon orbits the Earth every 27 days. [2]"),
            std::string::npos)
      << a.text;
  EXPECT_NE(a.text.find("\n\nSources: [1] Brewing tea (tea); [2] The Moon (moon)"),
            std::string::npos)
      << a.text;
}

TEST(extractive, headings_and_list_markers_are_not_quoted) {
  retrieval_result ev;
  ev.retrieval_results = {item("k", "Kettles",
                               "# Kettles and tea\n\n- Kettles boil water for tea.\n"
                               "| kettle | tea |\n")};
  auto a = extractive_answer_for("kettles tea", ev, {});
  ASSERT_EQ(a.citations.size(), 1u) << a.text;
  EXPECT_EQ(a.citations[0].quote, "Kettles boil water for tea.");
  expect_verified(a, ev);
}

TEST(extractive, repeated_sentences_from_overlapping_chunks_are_quoted_once) {
  retrieval_result ev;
  ev.retrieval_results = {item("d", "D", "Ragtor streams tokens. It uses actors."),
                          item("d2", "D", "It uses actors. Ragtor streams tokens.")};
  ev.retrieval_results[1].result_id = "d#1";
  ev.retrieval_results[1].doc_id = "d";
  auto a = extractive_answer_for("ragtor streams tokens", ev, {});
  ASSERT_EQ(a.citations.size(), 1u) << a.text;
  EXPECT_EQ(a.citations[0].chunk_id, "d#0") << "the better-ranked copy";
  expect_verified(a, ev);
}

TEST(extractive, answers_chinese_questions_from_chinese_evidence) {
  retrieval_result ev;
  ev.retrieval_results = {item("zh", "检索", "系统使用BM25检索文档。回答会引用原文。天气很好。")};
  auto a = extractive_answer_for("系统怎样检索文档？", ev, {});
  ASSERT_FALSE(a.citations.empty()) << a.text;
  EXPECT_EQ(a.citations[0].quote, "系统使用BM25检索文档。");
  expect_verified(a, ev);
  for (auto& t : a.tokens)
    EXPECT_NE(static_cast<unsigned char>(t[0]) & 0xC0, 0x80u) << "token starts mid-sequence";
}

TEST(extractive, no_match_is_an_honest_reply_without_citations) {
  auto a = extractive_answer_for("quantum chromodynamics", evidence(), {});
  EXPECT_TRUE(a.citations.empty());
  EXPECT_EQ(a.text, "I could not find anything about that in the knowledge base.");
  EXPECT_EQ(concat(a.tokens), a.text);
  auto none = extractive_answer_for("green tea", retrieval_result{}, {});
  EXPECT_TRUE(none.citations.empty());
  EXPECT_EQ(none.text, a.text);
  auto stop = extractive_answer_for("what is the", evidence(), {});
  EXPECT_TRUE(stop.citations.empty()) << "stopwords alone match nothing";
}

TEST(extractive, respects_max_sentences) {
  auto ev = evidence();
  auto a = extractive_answer_for("tea moon earth water", ev, {.max_sentences = 1});
  EXPECT_EQ(a.citations.size(), 1u);
  expect_verified(a, ev);
  auto b = extractive_answer_for("tea moon earth water", ev, {.max_sentences = 0});
  EXPECT_TRUE(b.citations.empty());
}

TEST(extractive, general_reply_says_no_model_is_configured) {
  auto a = general_reply_without_model();
  EXPECT_NE(a.text.find("No language model is configured"), std::string::npos);
  EXPECT_NE(a.text.find("kb_prefix"), std::string::npos);
  EXPECT_TRUE(a.citations.empty());
  EXPECT_EQ(concat(a.tokens), a.text);
}

TEST(extractive, tokens_are_words_with_their_spaces_and_never_split_utf8) {
  EXPECT_EQ(split_tokens("Hello  big\nworld "),
            (std::vector<std::string>{"Hello  ", "big\n", "world "}));
  std::string text = "混合 text 中文检索系统，works！ end\n\nnext é";
  auto tokens = split_tokens(text);
  EXPECT_EQ(concat(tokens), text);
  for (auto& t : tokens) {
    ASSERT_FALSE(t.empty());
    EXPECT_NE(static_cast<unsigned char>(t[0]) & 0xC0, 0x80u) << "token starts mid-sequence";
  }
  EXPECT_GT(tokens.size(), 6u);
  EXPECT_TRUE(split_tokens("").empty());
}

TEST(extractive, a_question_echoing_a_title_prefers_that_document) {
  retrieval_result ev;
  ev.retrieval_results = {
      item("config", "Configuring ragtor",
           "Settings live in ragtor.toml. Use RAGTOR_X__Y to override."),
      item("what", "What is ragtor", "ragtor is a chat backend. It quotes its sources.")};
  auto a = extractive_answer_for("What is ragtor?", ev, {.max_sentences = 1});
  ASSERT_EQ(a.citations.size(), 1u) << a.text;
  EXPECT_EQ(a.citations[0].quote, "ragtor is a chat backend.");
  expect_verified(a, ev);
}
