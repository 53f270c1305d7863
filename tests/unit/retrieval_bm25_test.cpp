// BM25: scores against the formula worked by hand, and the top-k search
// against exhaustive scoring on random corpora.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "retrieval/bm25_index.hpp"
#include "retrieval/tokenizer.hpp"

using namespace ragtor;

namespace {

chunk make_chunk(uint32_t i, std::string text) {
  chunk c;
  c.chunk_id = "d" + std::to_string(i) + "#0";
  c.doc_id = "d" + std::to_string(i);
  c.text = std::move(text);  // no title: it would add terms
  return c;
}

}  // namespace

TEST(bm25, scores_match_the_formula_worked_by_hand) {
  // Terms after tokenizing: d0 = [apple, banana] (len 2),
  // d1 = [apple, apple, cherry] (len 3), d2 = [durian] (len 1).
  // N = 3, avgdl = 6 / 3 = 2.
  std::vector<chunk> cs = {make_chunk(0, "apple banana"), make_chunk(1, "apple apple cherry"),
                           make_chunk(2, "durian")};
  auto idx = bm25_index::build(cs, {.k1 = 1.2, .b = 0.75});
  ASSERT_EQ(idx.size(), 3u);
  // idf(apple) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6)
  // d1: tf 2, len 3: ln(1.6) * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2)) = ln(1.6) * 4.4 / 3.65
  // d0: tf 1, len 2: ln(1.6) * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 2)) = ln(1.6) * 2.2 / 2.2
  double d1 = std::log(1.6) * 4.4 / 3.65;
  double d0 = std::log(1.6) * 2.2 / 2.2;
  EXPECT_NEAR(d1, 0.566580, 1e-6);  // the arithmetic above, as a number
  for (auto hits : {idx.search("apple", 10), idx.search_exhaustive("apple", 10)}) {
    ASSERT_EQ(hits.size(), 2u);
    EXPECT_EQ(hits[0].first, 1u);
    EXPECT_NEAR(hits[0].second, d1, 1e-12);
    EXPECT_EQ(hits[1].first, 0u);
    EXPECT_NEAR(hits[1].second, d0, 1e-12);
  }
  // Two query terms add up: idf(banana) = ln(1 + 2.5 / 1.5) = ln(8 / 3);
  // d0: tf 1, len 2 gives the same length factor as above.
  double banana = std::log(8.0 / 3.0) * 2.2 / 2.2;
  auto hits = idx.search("banana apple", 1);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].first, 0u);
  EXPECT_NEAR(hits[0].second, d0 + banana, 1e-12);
}

TEST(bm25, queries_go_through_the_same_tokenizer) {
  std::vector<chunk> cs = {make_chunk(0, "The servers were running"), make_chunk(1, "idle")};
  auto idx = bm25_index::build(cs);
  auto hits = idx.search("RUN server", 5);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].first, 0u);
  EXPECT_TRUE(idx.search("unknown words", 5).empty());
  EXPECT_TRUE(idx.search("the were", 5).empty()) << "stopwords only";
  EXPECT_TRUE(idx.search("running", 0).empty());
}

TEST(bm25, titles_are_indexed_with_every_chunk) {
  auto c = make_chunk(0, "body text");
  c.title = "Kettle";
  auto idx = bm25_index::build({c, make_chunk(1, "other body")});
  auto hits = idx.search("kettle", 5);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].first, 0u);
}

TEST(bm25, a_terms_frequency_in_a_chunk_counts_its_title_and_text) {
  auto c = make_chunk(0, "Kettles boil; the kettle sings. 绿茶");
  c.title = "Kettle notes";
  auto idx = bm25_index::build({c, make_chunk(1, "other body"), make_chunk(2, "kettle")});
  std::map<std::string, uint32_t> want;
  for (auto& t : tokenize(c.title + "\n" + c.text))
    ++want[t];
  ASSERT_GE(want.size(), 4u);
  for (auto& [term, n] : want)
    EXPECT_EQ(idx.term_frequency(term, 0), n) << term;
  EXPECT_EQ(idx.term_frequency("kettl", 0), 3u) << "stemmed, title and text";
  EXPECT_EQ(idx.term_frequency("kettl", 1), 0u);
  EXPECT_EQ(idx.term_frequency("kettl", 2), 1u);
  EXPECT_EQ(idx.term_frequency("kettl", 7), 0u) << "no such chunk";
  EXPECT_EQ(idx.term_frequency("saffron", 0), 0u) << "no such term";
}

TEST(bm25, ties_go_to_the_smaller_index) {
  std::vector<chunk> cs;
  for (uint32_t i = 0; i < 10; ++i)
    cs.push_back(make_chunk(i, i % 2 ? "same words here" : "different"));
  auto idx = bm25_index::build(cs);
  auto hits = idx.search("same words", 3);
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].first, 1u);
  EXPECT_EQ(hits[1].first, 3u);
  EXPECT_EQ(hits[2].first, 5u);
  EXPECT_EQ(hits, idx.search_exhaustive("same words", 3));
}

TEST(bm25, empty_index) {
  auto idx = bm25_index::build({});
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_TRUE(idx.search("anything", 5).empty());
}

TEST(bm25, top_k_equals_exhaustive_scoring) {
  std::mt19937 rng{20240607};
  size_t cut_queries = 0;  // more hits than k: the top k was chosen
  for (int corpus = 0; corpus < 24; ++corpus) {
    // Vocabulary with a skewed (Zipf-like) distribution, so some terms are
    // in most chunks and others in few.
    size_t vocab_size = 20 + corpus * 10;
    std::vector<std::string> vocab;
    for (size_t i = 0; i < vocab_size; ++i)
      vocab.push_back("w" + std::to_string(i) + "x");
    std::vector<double> weights;
    for (size_t i = 0; i < vocab_size; ++i)
      weights.push_back(1.0 / double(i + 1));
    std::discrete_distribution<size_t> word{weights.begin(), weights.end()};
    std::uniform_int_distribution<int> len{1, 40};
    std::vector<chunk> cs;
    uint32_t n_chunks = 50 + corpus * 40;
    for (uint32_t d = 0; d < n_chunks; ++d) {
      std::string text;
      for (int i = len(rng); i > 0; --i)
        text += vocab[word(rng)] + " ";
      cs.push_back(make_chunk(d, text));
    }
    bm25_index::params p{.k1 = 0.5 + 0.1 * (corpus % 10), .b = 0.1 * (corpus % 11)};
    auto idx = bm25_index::build(cs, p);
    std::uniform_int_distribution<size_t> any_word{0, vocab_size - 1};
    for (int q = 0; q < 40; ++q) {
      std::string query;
      for (int i = 1 + q % 6; i > 0; --i)
        query += vocab[q % 2 ? word(rng) : any_word(rng)] + " ";  // repeats allowed
      for (size_t k : {1u, 3u, 10u, 1000u}) {
        auto fast = idx.search(query, k);
        auto full = idx.search_exhaustive(query, k);
        ASSERT_EQ(fast, full) << "corpus " << corpus << " query '" << query << "' k=" << k;
        cut_queries += fast.size() == k;
      }
    }
  }
  EXPECT_GT(cut_queries, 0u);
}

TEST(bm25, an_incremental_build_equals_a_full_build) {
  std::mt19937 rng{7};
  std::vector<std::string> vocab;
  for (int i = 0; i < 60; ++i)
    vocab.push_back("w" + std::to_string(i) + "x");
  std::uniform_int_distribution<size_t> word{0, vocab.size() - 1};
  auto text = [&] {
    std::string t;
    for (int i = 0; i < 12; ++i)
      t += vocab[word(rng)] + " ";
    return t;
  };
  std::vector<chunk> old_chunks;
  for (uint32_t d = 0; d < 200; ++d)
    old_chunks.push_back(make_chunk(d, text()));
  auto previous = bm25_index::build(old_chunks);
  // The next version: some chunks dropped, the rest shuffled, new ones
  // added; previous_row says which old row each chunk's text was.
  std::vector<chunk> chunks;
  std::vector<int64_t> previous_row;
  for (uint32_t d = 0; d < 200; d += 2) {
    chunks.push_back(old_chunks[d]);
    previous_row.push_back(d);
  }
  for (uint32_t d = 0; d < 50; ++d) {
    chunks.push_back(make_chunk(1000 + d, text()));
    previous_row.push_back(-1);
  }
  chunks.push_back(old_chunks[0]);  // one old row twice
  previous_row.push_back(0);
  std::vector<size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<chunk> shuffled;
  std::vector<int64_t> shuffled_rows;
  for (auto i : order) {
    shuffled.push_back(chunks[i]);
    shuffled_rows.push_back(previous_row[i]);
  }
  auto incremental = bm25_index::build(shuffled, {}, previous, shuffled_rows);
  auto full = bm25_index::build(shuffled);
  ASSERT_EQ(incremental.size(), full.size());
  EXPECT_EQ(incremental.serialize(), full.serialize()) << "the same index, term for term";
  for (int q = 0; q < 100; ++q) {
    auto query = vocab[word(rng)] + " " + vocab[word(rng)] + " " + vocab[word(rng)];
    EXPECT_EQ(incremental.search(query, 10), full.search(query, 10)) << query;
    EXPECT_EQ(incremental.idf(vocab[q % vocab.size()]), full.idf(vocab[q % vocab.size()]));
  }
}

// An ingest of new documents: the previous rows in order, then new ones.
// The previous postings are copied and the new rows added, which must
// leave the index a build from nothing makes, term for term in the same
// order, through the map's rehashes (thousands of terms, most of them new
// in the appended rows), over generations of appends, and from an index
// read from its snapshot (which enters its terms as a build did).
TEST(bm25, appending_rows_equals_a_full_build) {
  std::mt19937 rng{11};
  size_t next_word = 0;
  auto text = [&](size_t fresh_words) {
    std::uniform_int_distribution<size_t> known{0, std::max<size_t>(next_word, 1) - 1};
    std::string t;
    for (int i = 0; i < 10; ++i)
      t += "k" + std::to_string(known(rng)) + " ";
    for (size_t i = 0; i < fresh_words; ++i)
      t += "k" + std::to_string(next_word++) + " ";
    return t;
  };
  std::vector<chunk> chunks;
  for (uint32_t d = 0; d < 100; ++d)
    chunks.push_back(make_chunk(d, text(5)));
  auto index = bm25_index::build(chunks);
  for (int generation = 0; generation < 4; ++generation) {
    std::vector<int64_t> previous_row(chunks.size());
    std::iota(previous_row.begin(), previous_row.end(), int64_t{0});
    for (uint32_t d = 0; d < 40; ++d) {
      chunks.push_back(make_chunk(static_cast<uint32_t>(chunks.size()), text(generation * 40)));
      previous_row.push_back(-1);
    }
    auto appended = bm25_index::build(chunks, {}, index, previous_row);
    auto full = bm25_index::build(chunks);
    ASSERT_EQ(appended.size(), full.size());
    EXPECT_EQ(appended.serialize(), full.serialize()) << "generation " << generation;
    for (int q = 0; q < 20; ++q) {
      auto query =
          "k" + std::to_string(rng() % next_word) + " k" + std::to_string(rng() % next_word);
      EXPECT_EQ(appended.search(query, 5), full.search(query, 5)) << query;
    }
    // Read back from its bytes, the next generation is built from it.
    auto read = bm25_index::deserialize(appended.serialize());
    ASSERT_TRUE(read);
    index = generation % 2 ? std::move(*read) : std::move(appended);
  }
  EXPECT_GT(next_word, 5000u);
}
