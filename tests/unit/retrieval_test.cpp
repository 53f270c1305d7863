// The retrieval library: tokenizer, chunker, BM25 (against the formula and
// against exhaustive scoring), on-disk KBs and the catalog.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "persistence/store_backend.hpp"
#include "protocol/errc.hpp"
#include "retrieval/bm25_index.hpp"
#include "retrieval/chunker.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/kb_store.hpp"
#include "retrieval/tokenizer.hpp"

using namespace ragtor;
namespace fs = std::filesystem;

namespace {

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("ragtor-retrieval-" + new_id());
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& body) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream{path / name} << body;
  }
};

chunk make_chunk(uint32_t i, std::string text) {
  chunk c;
  c.chunk_id = "d" + std::to_string(i) + "#0";
  c.doc_id = "d" + std::to_string(i);
  c.text = std::move(text);
  return c;
}

}  // namespace

TEST(tokenizer, english_is_stemmed_and_stopwords_dropped) {
  auto t = tokenize("The runners were Running quickly");
  EXPECT_TRUE(contains(t, "run"));
  EXPECT_TRUE(contains(t, "runner"));
  EXPECT_TRUE(contains(t, "quick"));
  EXPECT_FALSE(contains(t, "the"));
  EXPECT_FALSE(contains(t, "were"));
  auto raw = tokenize("The Running", {false, false});
  EXPECT_EQ(raw, (std::vector<std::string>{"the", "running"}));
}

TEST(tokenizer, chinese_gives_unigrams_and_bigrams) {
  auto t = tokenize("中文检索");
  for (auto s : {"中", "文", "检", "索", "中文", "文检", "检索"})
    EXPECT_TRUE(contains(t, s)) << s;
  EXPECT_EQ(t.size(), 7u);
}

TEST(tokenizer, mixed_text_emoji_and_width_folding) {
  auto t = tokenize("用CAF写actors 🎉 ＡＢＣ");
  EXPECT_TRUE(contains(t, "用"));
  EXPECT_TRUE(contains(t, "caf"));
  EXPECT_TRUE(contains(t, "写"));
  EXPECT_TRUE(contains(t, "actor"));
  EXPECT_TRUE(contains(t, "abc"));    // full-width letters fold (NFKC)
  EXPECT_FALSE(contains(t, "用写"));  // not adjacent: no bigram across Latin
  for (auto& s : t)
    EXPECT_EQ(s.find("\xF0\x9F"), std::string::npos) << "emoji leaked: " << s;
}

TEST(tokenizer, invalid_utf8_yields_nothing) {
  EXPECT_TRUE(tokenize("abc \xFF\xFE def").empty());
}

TEST(tokenizer, sentences_split_on_latin_and_cjk_punctuation) {
  auto s = split_sentences("First one. Second!  Third?\n第一句。第二句！end");
  std::vector<std::string> got(s.begin(), s.end());
  EXPECT_EQ(got, (std::vector<std::string>{"First one.", "Second!", "Third?", "第一句。",
                                           "第二句！", "end"}));
}

TEST(tokenizer, hard_wrapped_lines_continue_a_sentence) {
  auto s = split_sentences(
      "# Title\nA sentence that is\nwrapped here. Next one\n\n- item one\n- item two");
  std::vector<std::string> got(s.begin(), s.end());
  EXPECT_EQ(got, (std::vector<std::string>{"# Title", "A sentence that is\nwrapped here.",
                                           "Next one", "- item one", "- item two"}));
}

TEST(chunker, chunks_are_slices_within_the_size_bound) {
  document d;
  d.id = "doc";
  d.title = "T";
  for (int i = 0; i < 60; ++i)
    d.text += "Sentence number " + std::to_string(i) + " talks about retrieval. ";
  chunker_options opts;
  opts.max_chars = 200;
  opts.overlap_chars = 60;
  auto cs = chunk_document(d, opts);
  ASSERT_GT(cs.size(), 5u);
  for (size_t i = 0; i < cs.size(); ++i) {
    EXPECT_EQ(cs[i].chunk_id, "doc#" + std::to_string(i));
    EXPECT_LE(cs[i].text.size(), 200u);
    EXPECT_EQ(d.text.substr(cs[i].offset, cs[i].text.size()), cs[i].text);
    if (i > 0) {  // overlap: each chunk starts before the previous one ended
      EXPECT_LT(cs[i].offset, cs[i - 1].offset + cs[i - 1].text.size());
    }
  }
  EXPECT_EQ(cs.back().offset + cs.back().text.size(), d.text.find_last_not_of(' ') + 1);
}

TEST(chunker, overlong_cjk_sentences_split_on_code_points) {
  document d;
  d.id = "zh";
  for (int i = 0; i < 100; ++i)
    d.text += "检索";
  chunker_options opts;
  opts.max_chars = 50;
  opts.overlap_chars = 0;
  for (auto& c : chunk_document(d, opts)) {
    EXPECT_LE(c.text.size(), 50u);
    EXPECT_EQ(c.text.size() % 3, 0u);  // whole 3-byte characters only
  }
}

TEST(bm25, scores_match_the_formula) {
  // Three one-field documents; title empty so the title adds no terms.
  std::vector<chunk> cs = {make_chunk(0, "apple banana"), make_chunk(1, "apple apple cherry"),
                           make_chunk(2, "durian")};
  bm25_params p{1.2, 0.75};
  auto idx = bm25_index::build(cs, p);
  auto hits = idx.search_exhaustive("apple", 10);
  ASSERT_EQ(hits.size(), 2u);
  // N = 3, df(apple) = 2, lengths 2, 3, 1 -> avg 2.
  double idf = std::log(1.0 + (3 - 2 + 0.5) / (2 + 0.5));
  auto score = [&](double tf, double len) {
    return idf * tf * (1.2 + 1) / (tf + 1.2 * (1 - 0.75 + 0.75 * len / 2.0));
  };
  EXPECT_EQ(hits[0].first, 1u);
  EXPECT_NEAR(hits[0].second, score(2, 3), 1e-12);
  EXPECT_EQ(hits[1].first, 0u);
  EXPECT_NEAR(hits[1].second, score(1, 2), 1e-12);
  EXPECT_TRUE(idx.search("unknown words", 5).empty());
}

TEST(bm25, maxscore_top_k_equals_exhaustive_scoring) {
  std::mt19937 rng{42};
  std::vector<std::string> vocab;
  for (int i = 0; i < 50; ++i)
    vocab.push_back("w" + std::string(1, char('a' + i % 26)) + std::string(1, char('a' + i / 26)));
  for (int corpus = 0; corpus < 20; ++corpus) {
    std::vector<chunk> cs;
    std::uniform_int_distribution<int> len{1, 30};
    std::uniform_int_distribution<int> word{0, 49};
    for (uint32_t d = 0; d < 200; ++d) {
      std::string text;
      int n = len(rng);
      for (int i = 0; i < n; ++i)
        text += vocab[std::min(word(rng), word(rng))] + " ";  // skewed frequencies
      cs.push_back(make_chunk(d, text));
    }
    auto idx = bm25_index::build(cs);
    for (int q = 0; q < 30; ++q) {
      std::string query;
      int terms = 1 + q % 5;
      for (int i = 0; i < terms; ++i)
        query += vocab[word(rng)] + " ";
      for (size_t k : {1u, 5u, 10u})
        ASSERT_EQ(idx.search(query, k), idx.search_exhaustive(query, k))
            << "corpus " << corpus << " query '" << query << "' k=" << k;
    }
  }
}

TEST(kb_store, ingests_files_and_replaces_documents_by_id) {
  temp_dir src, data;
  src.write("guide.md", "# Kettle guide\n\nThe kettle whistles at boiling point.\n");
  src.write("notes.txt", "Plain notes about saucepans.\n");
  src.write("sub/more.jsonl",
            "{\"id\":\"j1\",\"title\":\"Spoons\",\"text\":\"Silver spoons tarnish.\"}\n"
            "{\"id\":\"j2\",\"text\":\"Forks have tines.\"}\n");
  size_t last_done = 0, last_total = 0;
  auto r = ingest_paths(data.path, "kitchen", {src.path},
                        [&](size_t d, size_t t) { last_done = d, last_total = t; });
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->documents_added, 4u);
  EXPECT_EQ(last_done, 3u);
  EXPECT_EQ(last_total, 3u);
  auto cat = kb_catalog::load(data.path, {});
  ASSERT_TRUE(cat);
  auto snap = (*cat)->get("kitchen");
  ASSERT_TRUE(snap);
  auto hits = snap->search("silver spoon", 3);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].doc_id, "j1");
  EXPECT_EQ(hits[0].title, "Spoons");
  EXPECT_EQ(hits[0].kb_prefix, "kitchen");
  // Re-ingesting a changed document replaces it.
  src.write("sub/more.jsonl", "{\"id\":\"j1\",\"title\":\"Spoons\",\"text\":\"Wooden ladles.\"}\n");
  auto r2 = ingest_paths(data.path, "kitchen", {src.path / "sub/more.jsonl"}, {});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->documents_replaced, 1u);
  EXPECT_EQ(r2->documents_added, 0u);
  auto snap2 = (*kb_catalog::load(data.path, {}))->get("kitchen");
  EXPECT_TRUE(snap2->search("silver", 3).empty());
  EXPECT_FALSE(snap2->search("wooden ladle", 3).empty());
  EXPECT_EQ(list_kbs(data.path), std::vector<std::string>{"kitchen"});
}

TEST(kb_store, reports_bad_input_with_its_location) {
  temp_dir src, data;
  src.write("bad.jsonl", "{\"id\":\"a\",\"text\":\"ok\"}\n{\"id\":3,\"text\":\"x\"}\n");
  auto r = ingest_paths(data.path, "kb", {src.path / "bad.jsonl"}, {});
  ASSERT_FALSE(r);
  EXPECT_NE(error_message(r.error()).find("bad.jsonl:2"), std::string::npos)
      << error_message(r.error());
  EXPECT_TRUE(list_kbs(data.path).empty()) << "a failed ingest must not create the KB";
  EXPECT_FALSE(ingest_paths(data.path, "bad name!", {src.path}, {}));
  EXPECT_FALSE(ingest_paths(data.path, "kb", {src.path / "missing.md"}, {}));
}
