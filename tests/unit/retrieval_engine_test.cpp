// The retrieval engine beyond BM25: weighted RRF math and thresholds, the
// hashed embedder, exact and HNSW vector search, RM3 expansion and
// coverage, weighted BM25 queries, the entity graph's multi-hop search, and
// each of the five agents on a small fixture KB.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "retrieval/agents.hpp"
#include "retrieval/binary_io.hpp"
#include "retrieval/embedder.hpp"
#include "retrieval/entity_graph.hpp"
#include "retrieval/fusion.hpp"
#include "retrieval/fusion_policy.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/vector_index.hpp"

namespace ragtor {
namespace {

TEST(fusion, weighted_rrf_matches_hand_computed_scores) {
  ranked_list vec{"vector", 0.7, std::nullopt, {{"a", 0.9}, {"b", 0.8}, {"c", 0.1}}};
  ranked_list kw{"bm25", 0.3, 5.0, {{"b", 12}, {"d", 7}, {"a", 4.9}}};
  auto f = weighted_rrf({vec, kw}, 10);
  ASSERT_EQ(f.size(), 4u);
  // b: 0.7/62 + 0.3/61; a: 0.7/61 (its BM25 score is below the leg threshold).
  EXPECT_EQ(f[0].id, "b");
  EXPECT_NEAR(f[0].score, 0.7 / 62 + 0.3 / 61, 1e-12);
  EXPECT_EQ(f[1].id, "a");
  EXPECT_NEAR(f[1].score, 0.7 / 61, 1e-12);
  EXPECT_EQ(f[1].ranks.size(), 1u) << "no contribution from a leg that thresholded it out";
  EXPECT_EQ(f[2].id, "c");
  EXPECT_NEAR(f[2].score, 0.7 / 63, 1e-12);
  EXPECT_EQ(f[3].id, "d");
  EXPECT_NEAR(f[3].score, 0.3 / 62, 1e-12);
  EXPECT_EQ(weighted_rrf({vec, kw}, 2).size(), 2u);
  // Ties break by best single-leg rank, then id; duplicates count once.
  auto t = weighted_rrf({{"x", 1, std::nullopt, {{"q", 1}, {"p", 1}, {"q", 1}}},
                         {"y", 1, std::nullopt, {{"p", 1}, {"q", 1}}}},
                        5);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].id, "p");
  EXPECT_NEAR(t[0].score, t[1].score, 1e-15);
  EXPECT_EQ(over_retrieve_depth(5), 50u);
  EXPECT_EQ(over_retrieve_depth(20), 100u);
}

TEST(embedder, hashed_vectors_are_deterministic_normalised_and_lexical) {
  auto e = make_hashed_embedder(128);
  auto other = make_hashed_embedder(128);
  auto v = std::get<embedding_batch>(e->embed(
      {"green tea brewing", "green tea brewing", "brewed green teas", "harbour ships", ""}));
  auto w = std::get<embedding_batch>(other->embed({"green tea brewing"}));
  EXPECT_EQ(v[0], w[0]) << "same text, same vector, across instances";
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i)
      s += a[i] * b[i];
    return s;
  };
  EXPECT_NEAR(dot(v[0], v[0]), 1.0, 1e-5);
  EXPECT_GT(dot(v[0], v[2]), dot(v[0], v[3])) << "shared stems beat unrelated words";
  EXPECT_GT(dot(v[0], v[2]), 0.5);
  EXPECT_NEAR(dot(v[4], v[4]), 0.0, 1e-9) << "empty text -> zero vector";
  EXPECT_EQ(e->name(), "hashed-ngram-v1/128");
}

std::vector<float> random_rows(size_t n, size_t dims, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> d;
  std::vector<float> rows(n * dims);
  for (size_t i = 0; i < n; ++i) {
    double norm = 0;
    for (size_t j = 0; j < dims; ++j)
      norm += std::pow(rows[i * dims + j] = d(rng), 2);
    for (size_t j = 0; j < dims; ++j)
      rows[i * dims + j] /= static_cast<float>(std::sqrt(norm));
  }
  return rows;
}

TEST(vector_index, exact_equals_brute_force_and_hnsw_recall_is_high) {
  constexpr size_t n = 3000, dims = 32;
  auto rows = random_rows(n, dims, 1);
  auto queries = random_rows(50, dims, 2);
  auto exact = vector_index::build(rows, dims);
  ASSERT_FALSE(exact.uses_hnsw());
  vector_index_options o;
  o.exact_below = 100;
  auto approx = vector_index::build(rows, dims, o);
  ASSERT_TRUE(approx.uses_hnsw());
  double recall = 0;
  for (size_t q = 0; q < 50; ++q) {
    std::span<const float> query{queries.data() + q * dims, dims};
    // Brute force reference in double precision.
    std::vector<std::pair<double, uint32_t>> ref;
    for (uint32_t i = 0; i < n; ++i) {
      double s = 0;
      for (size_t j = 0; j < dims; ++j)
        s += double(rows[i * dims + j]) * query[j];
      ref.emplace_back(-s, i);
    }
    std::sort(ref.begin(), ref.end());
    auto hits = exact.search(query, 10);
    ASSERT_EQ(hits.size(), 10u);
    for (size_t i = 0; i < 10; ++i)
      EXPECT_EQ(hits[i].first, ref[i].second) << "query " << q << " rank " << i;
    auto ah = approx.search(query, 10);
    std::set<uint32_t> truth;
    for (size_t i = 0; i < 10; ++i)
      truth.insert(ref[i].second);
    for (auto& [row, sim] : ah)
      recall += truth.count(row) / 500.0;
  }
  EXPECT_GE(recall, 0.9);
  // Concurrent searches agree with sequential ones.
  std::vector<std::vector<vector_index::hit>> seq(50), par(50);
  for (size_t q = 0; q < 50; ++q)
    seq[q] = approx.search({queries.data() + q * dims, dims}, 10);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t q = t; q < 50; q += 4)
        par[q] = approx.search({queries.data() + q * dims, dims}, 10);
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(seq, par);
  EXPECT_TRUE(exact.search({queries.data(), dims - 1}, 5).empty()) << "wrong dimension";
  // Where the ranking is exact, a search for fewer rows is the first rows
  // of a search for more; the graph ranks exactly only past its ef.
  auto ef = vector_index_options{}.ef_search;
  EXPECT_TRUE(exact.ranks_exactly(5) && exact.ranks_exactly(n));
  EXPECT_FALSE(approx.ranks_exactly(10) || approx.ranks_exactly(ef));
  EXPECT_TRUE(approx.ranks_exactly(ef + 1));
  for (size_t q = 0; q < 5; ++q) {
    std::span<const float> query{queries.data() + q * dims, dims};
    for (auto* index : {&exact, &approx}) {
      auto deep = index->search(query, ef + 40);
      auto shallow = index->search(query, ef + 1);
      ASSERT_EQ(shallow.size(), ef + 1);
      EXPECT_TRUE(std::equal(shallow.begin(), shallow.end(), deep.begin()));
    }
    auto few = exact.search(query, 7);
    EXPECT_TRUE(std::equal(few.begin(), few.end(), exact.search(query, 300).begin()));
  }
}

// The rows an index was built from come back as given, one by one and
// all at once, however it keeps them (by dimension, by row with
// half-precision columns, with a graph): an ingest copies the rows it
// keeps from the index before, and writes the index file from them.
TEST(vector_index, gives_back_its_rows_as_built) {
  for (size_t dims : {size_t{256}, size_t{37}})
    for (size_t n : {size_t{13}, size_t{300}}) {
      auto rows = random_rows(n, dims, 3 + dims + n);
      vector_index_options by_column, half, graph;
      by_column.half_precision_from = SIZE_MAX;
      half.half_precision_from = 0;
      graph.exact_below = 1;
      for (auto* o : {&by_column, &half, &graph}) {
        auto index = vector_index::build(rows, dims, *o);
        EXPECT_EQ(index.rows(), rows) << dims << " " << n;
        std::vector<float> one(dims);
        for (size_t i : {size_t{0}, size_t{7}, n - 1}) {
          index.copy_row(i, one.data());
          EXPECT_TRUE(std::equal(one.begin(), one.end(), rows.begin() + i * dims)) << i;
          EXPECT_EQ(index.row(i), one);
        }
      }
    }
}

TEST(vector_index, exact_search_by_dimension_equals_the_row_by_row_scan_bit_for_bit) {
  // Dimensions with and without a remainder past eight; row counts that
  // end inside a block of the scan; dense queries and sparse ones (the
  // hashed embedder's: most dimensions zero); duplicated rows for ties.
  // The full-precision columns and (where the processor has F16C) the
  // half-precision scan with its exact scoring of the candidates.
  for (bool half : {false, true})
    for (size_t dims : {size_t{256}, size_t{37}, size_t{5}}) {
      for (size_t n : {size_t{1}, size_t{513}, size_t{1300}}) {
        auto rows = random_rows(n, dims, 10 + dims + n);
        if (n > 2)
          std::copy_n(rows.begin(), dims, rows.begin() + 2 * static_cast<std::ptrdiff_t>(dims));
        vector_index_options o;
        o.half_precision_from = half ? 0 : SIZE_MAX;
        auto index = vector_index::build(rows, dims, o);
        ASSERT_FALSE(index.uses_hnsw());
        ASSERT_EQ(index.scans_half_precision(), half && vector_index::half_precision_available());
        ASSERT_EQ(index.size(), n);
        auto queries = random_rows(12, dims, 99 + dims);
        std::mt19937_64 rng{dims * 7 + n};
        for (size_t q = 0; q < 12; ++q) {
          std::vector<float> query(queries.begin() + static_cast<std::ptrdiff_t>(q * dims),
                                   queries.begin() + static_cast<std::ptrdiff_t>((q + 1) * dims));
          if (q % 2)  // sparse: two dimensions in three zero
            for (auto& x : query)
              if (rng() % 3)
                x = 0.f;
          std::vector<vector_index::hit> ref;
          for (uint32_t i = 0; i < n; ++i)
            ref.emplace_back(i, row_dot(rows.data() + i * dims, query.data(), dims));
          std::stable_sort(ref.begin(), ref.end(),
                           [](auto& a, auto& b) { return a.second > b.second; });
          auto all = index.search(query, n);
          ASSERT_EQ(all.size(), n);
          for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(all[i].first, ref[i].first)
                << dims << "/" << n << " query " << q << " rank " << i;
            EXPECT_EQ(all[i].second, ref[i].second) << "bit for bit, not nearly";
          }
          for (size_t k : {size_t{1}, size_t{7}, size_t{100}}) {
            auto top = index.search(query, k);
            ASSERT_EQ(top.size(), std::min(k, n));
            EXPECT_TRUE(std::equal(top.begin(), top.end(), ref.begin())) << "k " << k;
          }
        }
        // A row reads back as it went in.
        auto last = index.row(n - 1);
        EXPECT_TRUE(
            std::equal(last.begin(), last.end(), rows.end() - static_cast<std::ptrdiff_t>(dims)));
      }
    }
  // The hashed embedder's vectors, searched with its own query.
  auto e = make_hashed_embedder(256);
  std::vector<std::string> texts{"lighthouse keepers of the northern coast",
                                 "kestrels hunt over the harbour", "the harbour master's log",
                                 "keeping a lighthouse lamp lit", "ships in the harbour at night"};
  auto batch = std::get<embedding_batch>(e->embed(texts));
  std::vector<float> rows;
  for (auto& v : batch)
    rows.insert(rows.end(), v.begin(), v.end());
  auto index = vector_index::build(rows, 256);
  auto q = std::get<embedding_batch>(e->embed({"a lighthouse in the harbour"}))[0];
  auto hits = index.search(q, 5);
  ASSERT_EQ(hits.size(), 5u);
  for (auto& [i, score] : hits)
    EXPECT_EQ(score, row_dot(rows.data() + i * 256, q.data(), 256)) << texts[i];
}

TEST(vector_index, the_half_precision_scan_ranks_rows_it_cannot_tell_apart_exactly) {
  if (!vector_index::half_precision_available())
    GTEST_SKIP() << "no F16C on this processor: the full-precision scan is the only one";
  // Rows in clusters of near-copies: each copy differs from its original
  // by less than half precision resolves (a few parts in 100,000), so the
  // approximate scores of a cluster tie or cross while their exact scores
  // differ. A cut that missed a row the exact order needs, or a bound
  // too tight, would change the k best.
  constexpr size_t dims = 64, originals = 40, copies = 25, n = originals * copies;
  auto base = random_rows(originals, dims, 7);
  std::mt19937_64 rng{8};
  std::uniform_real_distribution<float> tiny{-3e-5f, 3e-5f};
  std::vector<float> rows(n * dims);
  for (size_t i = 0; i < n; ++i)
    for (size_t d = 0; d < dims; ++d)
      rows[i * dims + d] = base[(i % originals) * dims + d] + (i < originals ? 0.f : tiny(rng));
  vector_index_options half, full;
  half.half_precision_from = 0;
  full.half_precision_from = SIZE_MAX;
  auto index = vector_index::build(rows, dims, half);
  ASSERT_TRUE(index.scans_half_precision());
  auto reference = vector_index::build(rows, dims, full);
  ASSERT_FALSE(reference.scans_half_precision());
  auto queries = random_rows(30, dims, 9);
  for (size_t q = 0; q < 30; ++q) {
    // Half the queries are one of the originals, so a whole cluster
    // scores near 1 and its members differ only in their last bits.
    std::span<const float> query{
        q % 2 ? base.data() + (q % originals) * dims : queries.data() + q * dims, dims};
    for (size_t k : {size_t{1}, size_t{3}, size_t{25}, size_t{26}, size_t{60}})
      EXPECT_EQ(index.search(query, k), reference.search(query, k)) << "query " << q << " k " << k;
  }
  // An HNSW index asked for more rows than its ef answers exactly, from
  // the same half-precision scan.
  vector_index_options graph = half;
  graph.exact_below = 1;
  graph.ef_search = 16;
  auto hnsw = vector_index::build(rows, dims, graph);
  ASSERT_TRUE(hnsw.uses_hnsw());
  ASSERT_TRUE(hnsw.scans_half_precision());
  for (size_t q = 0; q < 10; ++q) {
    std::span<const float> query{queries.data() + q * dims, dims};
    EXPECT_EQ(hnsw.search(query, 40), reference.search(query, 40)) << "query " << q;
  }
  // A query with a non-finite value is scored row by row, as before.
  std::vector<float> odd(dims, 0.f);
  odd[3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(index.search(odd, 5).size(), 5u);
  // Values beyond half precision's range keep the full-precision columns.
  auto big = rows;
  big[5] = 1e6f;
  EXPECT_FALSE(vector_index::build(big, dims, half).scans_half_precision());
}

TEST(vector_index, a_saved_hnsw_graph_loads_and_answers_identically) {
  constexpr size_t n = 2000, dims = 16;
  auto rows = random_rows(n, dims, 3);
  vector_index_options o;
  o.exact_below = 50;  // rows of 256 dimensions: 800 of 16
  auto built = vector_index::build(rows, dims, o);
  ASSERT_TRUE(built.uses_hnsw());
  EXPECT_FALSE(built.graph_loaded());
  auto bytes = built.graph_bytes();
  ASSERT_FALSE(bytes.empty());
  auto loaded = vector_index::build(rows, dims, o, bytes);
  EXPECT_TRUE(loaded.uses_hnsw());
  EXPECT_TRUE(loaded.graph_loaded());
  auto queries = random_rows(20, dims, 4);
  for (size_t q = 0; q < 20; ++q) {
    std::span<const float> query{queries.data() + q * dims, dims};
    EXPECT_EQ(built.search(query, 10), loaded.search(query, 10)) << "query " << q;
  }
  // A graph of other rows, or garbage, is not used: the graph is rebuilt.
  auto fewer = std::vector<float>(rows.begin(), rows.begin() + 1000 * dims);
  EXPECT_FALSE(vector_index::build(fewer, dims, o, bytes).graph_loaded());
  EXPECT_TRUE(vector_index::build(fewer, dims, o, bytes).uses_hnsw());
  EXPECT_FALSE(vector_index::build(rows, dims, o, "not a graph").graph_loaded());
  EXPECT_EQ(vector_index::build(rows, dims).graph_bytes(), "") << "exact: no graph";
}

TEST(query_expansion, rm3_weights_and_coverage) {
  std::vector<std::pair<std::string, double>> fb{
      {"kettle temperature for green tea sencha", 3.0},
      {"green tea sencha steeping temperature", 2.0},
      {"the harbour ships carry sencha", 0.1},
  };
  auto terms = rm3_expand("green tea", fb, 3, 0.5);
  double total = 0;
  std::set<std::string> names;
  for (auto& t : terms) {
    total += t.weight;
    names.insert(t.term);
  }
  EXPECT_NEAR(total, 1.0, 1e-9);
  EXPECT_TRUE(names.count("green") && names.count("tea")) << "original terms kept";
  EXPECT_TRUE(names.count("sencha"));
  EXPECT_FALSE(names.count("harbour")) << "a term from one feedback text only is dropped";
  auto idf = [](std::string_view t) { return t == "sencha" ? 3.0 : 1.0; };
  EXPECT_DOUBLE_EQ(query_coverage("green sencha", {"green things"}, idf), 0.25);
  EXPECT_DOUBLE_EQ(query_coverage("green sencha", {"sencha", "green"}, idf), 1.0);
  EXPECT_DOUBLE_EQ(query_coverage("", {"x"}, idf), 1.0);
  EXPECT_DOUBLE_EQ(query_coverage("绿茶", {"绿茶很好"}, idf), 1.0);
}

TEST(bm25, weighted_term_queries_equal_exhaustive_scoring) {
  std::mt19937_64 rng{5};
  std::vector<chunk> chunks(400);
  for (auto& c : chunks)
    for (int w = 0; w < 12; ++w)
      c.text += "w" + std::to_string(rng() % 60) + " ";
  auto idx = bm25_index::build(chunks);
  for (int q = 0; q < 50; ++q) {
    std::vector<std::pair<std::string, double>> terms;
    std::string plain;
    for (int t = 0; t < 4; ++t) {
      auto w = "w" + std::to_string(rng() % 70);
      terms.emplace_back(w, 1.0);
      plain += w + " ";
    }
    EXPECT_EQ(idx.search_terms(terms, 10), idx.search(plain, 10));
  }
  EXPECT_GT(idx.idf("w1"), 0);
  EXPECT_EQ(idx.idf("nope"), 0);
}

std::vector<document> fixture_docs() {
  return {
      {"quellin", "Port Quellin",
       "Port Quellin is a harbour town. The schooner Marigold is moored at Port Quellin. "
       "Captain Odile Varga commands the Marigold.",
       ""},
      {"marigold", "The Marigold",
       "The Marigold carries saffron and indigo. Captain Odile Varga sails the Marigold "
       "north every spring.",
       ""},
      {"tea", "Brewing tea",
       "Green tea wants water at 70 degrees. Black tea takes boiling water and four minutes.", ""},
      {"kettle", "Kettles", "A kettle with a thermometer helps brewing green tea properly.", ""},
  };
}

// The chunks ingestion makes of `docs`, in order.
std::vector<chunk> chunks_of(const std::vector<document>& docs) {
  std::vector<chunk> chunks;
  for (auto& d : docs)
    for (auto& c : chunk_document(d, chunker_options{}))
      chunks.push_back(c);
  return chunks;
}

TEST(entity_graph, finds_names_and_takes_the_multi_hop_step) {
  auto chunks = chunks_of(fixture_docs());
  auto g = entity_graph::build(chunks);
  EXPECT_GT(g.entity_count(), 3u);
  EXPECT_GT(g.relation_count(), 0u);
  auto r = g.local_search("Where is Port Quellin?", 5);
  ASSERT_FALSE(r.chunks.empty());
  EXPECT_NE(std::find(r.entity_ids.begin(), r.entity_ids.end(), "e:port quellin"),
            r.entity_ids.end());
  // The Marigold chunk never names Port Quellin; the graph reaches it through
  // the Marigold / Odile Varga neighbours, and ranks it above tea.
  std::set<std::string> docs;
  for (auto& [idx, s] : r.chunks)
    docs.insert(chunks[idx].doc_id);
  EXPECT_TRUE(docs.count("marigold"));
  EXPECT_FALSE(docs.count("tea"));
  EXPECT_FALSE(r.relation_ids.empty());
  auto topics = g.global_search("tea brewing", 2);
  ASSERT_FALSE(topics.empty());
  EXPECT_NE(topics[0].summary.find("Topic:"), std::string::npos);
  EXPECT_EQ(entity_graph::build({}).entity_count(), 0u);
  std::vector<chunk> cjk{{"c#0", "c", "", "绿茶的水温是七十度。绿茶很好喝。", 0},
                         {"d#0", "d", "", "红茶的水温是一百度。", 0}};
  EXPECT_NO_THROW(entity_graph::build(cjk).local_search("绿茶", 3));
}

// Local search scores chunks in an array each thread keeps: what one search
// leaves there never reaches the next, on a graph with more chunks or
// fewer, and a smaller k keeps the first of a larger one's chunks.
TEST(entity_graph, a_search_is_the_same_whatever_its_thread_searched_before) {
  auto docs = fixture_docs();
  std::vector<document> many;
  for (int i = 0; i < 300; ++i)
    many.push_back({"log" + std::to_string(i), "Log " + std::to_string(i),
                    "Captain Odile Varga sailed the Marigold to Port Quellin on day "
                        + std::to_string(i) + " with Bram Oster and crate " + std::to_string(i % 7)
                        + ".",
                    ""});
  auto small = entity_graph::build(chunks_of(docs));
  auto large = entity_graph::build(chunks_of(many));
  auto fresh = [](const entity_graph& g, const char* query, size_t k) {
    entity_graph::local_result r;
    std::thread{[&] { r = g.local_search(query, k); }}.join();
    return r;
  };
  auto expected_large = fresh(large, "Odile Varga at Port Quellin", 400);
  auto expected_small = fresh(small, "Where is Port Quellin?", 5);
  ASSERT_GT(expected_large.chunks.size(), 100u);
  ASSERT_FALSE(expected_small.chunks.empty());
  for (int round = 0; round < 2; ++round) {
    auto a = large.local_search("Odile Varga at Port Quellin", 400);
    EXPECT_EQ(a.chunks, expected_large.chunks);
    EXPECT_EQ(a.entity_ids, expected_large.entity_ids);
    auto b = small.local_search("Where is Port Quellin?", 5);
    EXPECT_EQ(b.chunks, expected_small.chunks);
    EXPECT_EQ(b.relation_ids, expected_small.relation_ids);
  }
  for (size_t i = 1; i < expected_large.chunks.size(); ++i) {
    auto& [c0, s0] = expected_large.chunks[i - 1];
    auto& [c1, s1] = expected_large.chunks[i];
    EXPECT_TRUE(s0 > s1 || (s0 == s1 && c0 < c1)) << i;
  }
  auto top = large.local_search("Odile Varga at Port Quellin", 7);
  ASSERT_EQ(top.chunks.size(), 7u);
  EXPECT_TRUE(std::equal(top.chunks.begin(), top.chunks.end(), expected_large.chunks.begin()));
  // Global search tokenizes the entities' keys at its first call: threads
  // that make that call at once all get the same topics, as later calls do.
  auto graph = entity_graph::build(chunks_of(many));
  std::vector<std::vector<entity_graph::topic_hit>> at_once(4);
  std::vector<std::thread> threads;
  for (auto& r : at_once)
    threads.emplace_back([&] { r = graph.global_search("Bram Oster", 3); });
  for (auto& t : threads)
    t.join();
  auto later = graph.global_search("Bram Oster", 3);
  ASSERT_FALSE(later.empty());
  for (auto& r : at_once) {
    ASSERT_EQ(r.size(), later.size());
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i].id, later[i].id);
      EXPECT_EQ(r[i].score, later[i].score);
      EXPECT_EQ(r[i].chunks, later[i].chunks);
    }
  }
  EXPECT_TRUE(graph.global_search("xyzzy", 3).empty());
}

// An entity is named by the form it was written in most often, counting
// its salient term ("brca1", as indexed) as a form too; on a tie, the
// first in byte order.
TEST(entity_graph, an_entity_is_named_by_its_most_frequent_form) {
  auto name_of = [](const std::vector<document>& docs, const std::string& id) {
    auto chunks = chunks_of(docs);
    for (auto& row : entity_graph::build(chunks).rows("kb", chunks).entities)
      if (row.id == id)
        return row.name;
    return std::string{"(none)"};
  };
  // "Brca1" twice, "BRCA1" once, the salient term in both chunks: a tie
  // of "Brca1" and "brca1".
  EXPECT_EQ(name_of({{"a", "", "Mice with Brca1 lose Brca1 early.", ""},
                     {"b", "", "Women with BRCA1 are screened.", ""},
                     {"c", "", "Nothing here.", ""}},
                    "e:brca1"),
            "Brca1");
  // "BRCA1" three times now.
  EXPECT_EQ(
      name_of({{"a", "", "Mice with Brca1 lose Brca1 early.", ""},
               {"b", "", "Women with BRCA1 are screened, BRCA1 carriers and BRCA1 sisters.", ""},
               {"c", "", "Nothing here.", ""}},
              "e:brca1"),
      "BRCA1");
}

// What an ingest sends the store instead of every row of the KB's graph:
// applied to the old rows, the change gives the new rows exactly (ids
// removed, rows added or updated), rows that did not change are not in
// it, and its signatures are rows()'s.
TEST(entity_graph, a_change_of_rows_turns_the_old_rows_into_the_new) {
  auto entity_text = [](const graph_entity_row& r) {
    return r.name + "|" + r.kind + "|" + r.description;
  };
  auto relation_text = [](const graph_relation_row& r) {
    return r.source + "|" + r.target + "|" + r.kind + "|" + std::to_string(r.weight) + "|"
           + r.chunk_id;
  };
  auto apply = [](auto& rows, auto& removed, auto& upserts, auto text) {
    std::map<std::string, std::string> table;
    for (auto& r : rows)
      table[r.id] = text(r);
    for (auto& id : removed)
      EXPECT_EQ(table.erase(id), 1u) << id << " was not there to remove";
    for (auto& r : upserts) {
      auto [at, added] = table.emplace(r.id, text(r));
      if (!added) {
        EXPECT_NE(at->second, text(r)) << r.id << " is sent without a change";
        at->second = text(r);
      }
    }
    return table;
  };
  auto whole = [](auto& rows, auto text) {
    std::map<std::string, std::string> table;
    for (auto& r : rows)
      table[r.id] = text(r);
    return table;
  };
  // The change from the graph of `old_docs` to that of `new_docs`.
  auto change_between = [&](const std::vector<document>& old_docs,
                            const std::vector<document>& new_docs) {
    auto before_chunks = chunks_of(old_docs), after_chunks = chunks_of(new_docs);
    auto before_graph = entity_graph::build(before_chunks);
    auto after_graph = entity_graph::build(after_chunks);
    auto before = before_graph.rows("harbour", before_chunks);
    auto after = after_graph.rows("harbour", after_chunks);
    auto change = after_graph.rows_since(before_graph, before_chunks, "harbour", after_chunks);
    EXPECT_EQ(change.kb, "harbour");
    EXPECT_EQ(change.base_signature, before.signature);
    EXPECT_EQ(change.signature, after.signature);
    EXPECT_EQ(after_graph.rows_signature(after_chunks), after.signature);
    // Each kept link is one row.
    std::set<std::string> relation_ids;
    for (auto& r : after.relations)
      relation_ids.insert(r.id);
    EXPECT_EQ(relation_ids.size(), after.relations.size());
    // With before's signature known (what the KB admin remembers from the
    // previous ingest), the same change, against the signature given.
    auto told =
        after_graph.rows_since(before_graph, before_chunks, "harbour", after_chunks, "told");
    EXPECT_EQ(told.base_signature, "told");
    EXPECT_EQ(told.signature, change.signature);
    EXPECT_EQ(whole(told.entities, entity_text), whole(change.entities, entity_text));
    EXPECT_EQ(whole(told.relations, relation_text), whole(change.relations, relation_text));
    EXPECT_EQ(told.removed_entities, change.removed_entities);
    EXPECT_EQ(told.removed_relations, change.removed_relations);
    EXPECT_EQ(change.entity_count, static_cast<int64_t>(after.entities.size()));
    EXPECT_EQ(change.relation_count, static_cast<int64_t>(after.relations.size()));
    EXPECT_EQ(apply(before.entities, change.removed_entities, change.entities, entity_text),
              whole(after.entities, entity_text));
    EXPECT_EQ(apply(before.relations, change.removed_relations, change.relations, relation_text),
              whole(after.relations, relation_text));
    EXPECT_LT(change.entities.size() + change.relations.size(),
              after.entities.size() + after.relations.size())
        << "rows that did not change are left out";
    return change;
  };

  auto docs = fixture_docs();
  auto edited = docs;
  edited[1].text = "The Marigold carries indigo now. Captain Odile Varga sails the Marigold south.";
  edited[2].text = "Green tea wants water at 70 degrees and three minutes of brewing.";
  edited.push_back({"fees", "Harbour fees",
                    "Port Quellin charges harbour fees. The harbour master of Port Quellin is "
                    "Bram Oster, who counts the ships.",
                    ""});
  auto change = change_between(docs, edited);
  EXPECT_EQ(change.removed_entities, std::vector<std::string>{"e:black"});
  EXPECT_FALSE(change.entities.empty());

  // The same documents in another order: the entities are numbered in
  // another order, so some links' ids name their ends the other way round
  // (a removed id and an added row), while most rows stay.
  auto reordered = docs;
  std::reverse(reordered.begin(), reordered.end());
  auto moved = change_between(docs, reordered);
  EXPECT_TRUE(moved.removed_entities.empty());
  EXPECT_FALSE(moved.removed_relations.empty());

  auto none = change_between(edited, edited);
  EXPECT_TRUE(none.entities.empty() && none.relations.empty() && none.removed_entities.empty()
              && none.removed_relations.empty());
  EXPECT_EQ(none.base_signature, none.signature);
}

TEST(agents, every_agent_answers_on_a_fixture_kb_with_a_trace) {
  auto snap = kb_catalog::build_snapshot("fixture", fixture_docs(), kb_build_options{});
  for (auto agent :
       {"naive_rag_agent", "hybrid_agent", "graph_agent", "deep_research_agent", "fusion_agent"}) {
    auto r = run_agent(*snap, agent, "What does the Marigold carry?", 3);
    ASSERT_FALSE(r.retrieval_results.empty()) << agent;
    EXPECT_LE(r.retrieval_results.size(), 3u) << agent;
    EXPECT_EQ(r.retrieval_results[0].doc_id, "marigold") << agent;
    EXPECT_FALSE(r.trace.empty()) << agent;
    EXPECT_EQ(r.chunk_ids.size(), r.retrieval_results.size()) << agent;
    EXPECT_NE(r.context.find("saffron"), std::string::npos) << agent;
    for (auto& item : r.retrieval_results) {
      EXPECT_EQ(item.kb_prefix, "fixture");
      // Each item carries its own chunk's fields.
      auto c = std::find_if(snap->chunks.begin(), snap->chunks.end(),
                            [&](auto& c) { return c.chunk_id == item.result_id; });
      ASSERT_NE(c, snap->chunks.end()) << agent << " " << item.result_id;
      EXPECT_EQ(item.evidence, c->text) << agent;
      EXPECT_EQ(item.doc_id, c->doc_id) << agent;
      EXPECT_EQ(item.title, c->title) << agent;
      EXPECT_EQ(item.source_id, c->chunk_id) << agent;
    }
  }
  auto fused = run_agent(*snap, "fusion_agent", "green tea temperature", 2);
  // The fused items' sources name the agents that found them, their scores
  // are the fusion's (not an agent's).
  auto hybrid_alone = run_agent(*snap, "hybrid_agent", "green tea temperature", 2);
  ASSERT_FALSE(fused.retrieval_results.empty());
  for (auto& item : fused.retrieval_results) {
    EXPECT_NE(item.source.find("hybrid"), std::string::npos) << item.source;
    for (auto& h : hybrid_alone.retrieval_results) {
      if (h.result_id == item.result_id) {
        EXPECT_NE(h.score, item.score) << item.result_id;
      }
    }
  }
  bool per_agent_trace = false;
  for (auto& s : fused.trace)
    per_agent_trace |= s.step.starts_with("graph_agent/");
  EXPECT_TRUE(per_agent_trace) << "fusion reports each agent's trace";
  auto research = run_agent(*snap, "deep_research_agent", "kettle thermometer saffron", 2);
  EXPECT_GE(research.trace.size(), 1u);
  EXPECT_TRUE(research.trace[0].detail.find("coverage=") != std::string::npos);
}

// Fusion makes one BM25 and one vector search for its four agents, at the
// deepest depth any asks for, and hands each the first hits it asks for:
// what it fuses is what the four agents find alone. 300 chunks, k = 2:
// the agents ask for 50 and 250 hits.
TEST(agents, fusion_fuses_what_its_agents_find_alone_from_shared_searches) {
  std::vector<std::string> words{"saffron", "kettle", "harbour", "ledger",  "crate", "wool",
                                 "copper",  "tide",   "lantern", "quellin", "oster", "marigold"};
  std::mt19937 rng{7};
  std::vector<document> docs;
  for (int i = 0; i < 300; ++i) {
    std::string text = "Captain Odile Varga logged";
    for (int w = 0; w < 12; ++w)
      text += " " + words[rng() % words.size()];
    docs.push_back({"log" + std::to_string(i), "Log " + words[i % words.size()], text + ".", ""});
  }
  // An exact vector index, and an HNSW graph (approximate for up to its
  // ef rows: an agent asking for fewer is not handed the first of more).
  kb_build_options with_graph;
  with_graph.vectors.exact_below = 10;
  for (bool hnsw : {false, true}) {
    auto snap = kb_catalog::build_snapshot("many", docs, hnsw ? with_graph : kb_build_options{});
    ASSERT_EQ(snap->chunks.size(), 300u);
    ASSERT_EQ(snap->vectors.uses_hnsw(), hnsw);
    auto policy = choose_fusion(snap->settings, snap->embed.get());
    auto weak = std::min(1.0, policy.vector_weight / policy.keyword_weight);
    for (auto query : {"saffron kettle harbour", "Odile Varga copper tide", "lantern ledgr wool"}) {
      size_t k = 2, depth = over_retrieve_depth(k);
      auto fused = run_agent(*snap, "fusion_agent", query, k);
      auto qv = embed_query(*snap, query);
      auto st = research_first_round(*snap, query, qv, depth);
      research_rm3_rounds(*snap, st, 2);
      std::vector<std::pair<std::string, retrieval_result>> alone{
          {"naive_rag_agent", run_agent(*snap, "naive_rag_agent", query, depth)},
          {"hybrid_agent", run_agent(*snap, "hybrid_agent", query, depth)},
          {"graph_agent", run_agent(*snap, "graph_agent", query, depth)},
          {"deep_research_agent", research_result(*snap, st)}};
      std::vector<ranked_list> lists;
      for (auto& [name, r] : alone) {
        ASSERT_FALSE(r.retrieval_results.empty()) << query << " " << name;
        ranked_list l{name,
                      name == "naive_rag_agent" || name == "graph_agent" ? weak : 1.0,
                      std::nullopt,
                      {}};
        for (auto& item : r.retrieval_results)
          l.items.emplace_back(item.result_id, item.score);
        lists.push_back(std::move(l));
      }
      EXPECT_EQ(alone[0].second.retrieval_results.size(), depth) << "more vector hits than asked";
      auto want = fuse(lists, k, policy.rule);
      ASSERT_EQ(fused.retrieval_results.size(), want.size()) << query;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(fused.retrieval_results[i].result_id, want[i].id) << query << " " << i;
        EXPECT_EQ(fused.retrieval_results[i].score, want[i].score) << query << " " << i;
      }
      // Each agent's steps report what it found alone (hits, coverage,
      // rewrites), but for their durations.
      for (auto& [name, r] : alone) {
        std::vector<std::string> in_fusion, by_itself;
        for (auto& step : fused.trace)
          if (step.step.starts_with(name + "/"))
            in_fusion.push_back(step.step.substr(name.size() + 1) + ": " + step.detail);
        for (auto& step : r.trace)
          by_itself.push_back(step.step + ": " + step.detail);
        EXPECT_EQ(in_fusion, by_itself) << query << " " << name;
      }
      auto legs = std::find_if(fused.trace.begin(), fused.trace.end(),
                               [](auto& s) { return s.step == "legs"; });
      ASSERT_NE(legs, fused.trace.end());
      EXPECT_NE(legs->detail.find("2 shared searches"), std::string::npos) << legs->detail;
    }
  }
}

// Deep research's coverage counts a query term found in the text of one
// of its first k chunks, not one found only in a title (the BM25 index
// holds both): the same as reading the texts.
TEST(agents, research_coverage_counts_terms_in_the_evidence_text_not_its_title) {
  std::vector<document> docs{
      {"a", "Saffron ledger", "The ship carries wool and copper.", ""},
      {"b", "Kettle kettle", "The kettle boils water for green tea.", ""},
      {"c", "", "Saffron is a spice from crocus flowers, traded by the ledger.", ""},
      {"d", "绿茶", "绿茶很好喝。", ""}};
  auto snap = kb_catalog::build_snapshot("titles", docs, kb_build_options{});
  auto idf = [&](std::string_view t) { return snap->index.idf(t); };
  int partial = 0;
  for (auto query : {"ledger wool", "saffron copper", "kettle water", "绿茶", "crocus ledger",
                     "saffron ledger wool kettle", "nothing here"}) {
    for (size_t k : {1, 2, 4}) {
      auto st = research_first_round(*snap, query, embed_query(*snap, query), k);
      std::vector<std::string> texts;
      for (size_t i = 0; i < st.fused.size() && i < k; ++i)
        texts.push_back(snap->chunks[std::stoul(st.fused[i].id)].text);
      EXPECT_DOUBLE_EQ(st.coverage, query_coverage(query, texts, idf)) << query << " k=" << k;
      partial += st.coverage > 0 && st.coverage < 1;
    }
  }
  auto first = research_first_round(*snap, "ledger wool", embed_query(*snap, "ledger wool"), 1);
  ASSERT_FALSE(first.fused.empty());
  EXPECT_EQ(snap->chunks[std::stoul(first.fused[0].id)].doc_id, "a");
  EXPECT_GT(first.coverage, 0);
  EXPECT_LT(first.coverage, 1) << "\"ledger\" is only in a's title";
  EXPECT_GT(partial, 1);
}

}  // namespace
}  // namespace ragtor

namespace ragtor {
namespace {

struct snapshot_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path()
                               / ("ragtor_snap_" + std::to_string(std::random_device{}()));
  ~snapshot_dir() { std::filesystem::remove_all(path); }
};

TEST(index_snapshots, reused_when_unchanged_rebuilt_when_changed_or_corrupt) {
  snapshot_dir dir;
  kb_build_options opts;
  opts.snapshot_dir = dir.path;
  auto docs = fixture_docs();
  auto first = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_FALSE(first->loaded_from_snapshot);
  auto index_dir = dir.path / "kbs" / "kb" / "index";
  ASSERT_TRUE(std::filesystem::exists(index_dir / "bm25.bin"));
  ASSERT_TRUE(std::filesystem::exists(index_dir / "vectors.bin"));
  ASSERT_TRUE(std::filesystem::exists(index_dir / "graph.bin"));
  auto second = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_TRUE(second->loaded_from_snapshot);
  // The graph read back is the graph built: the same rows, the same
  // answers.
  EXPECT_EQ(second->graph.rows("kb", second->chunks).signature,
            first->graph.rows("kb", first->chunks).signature);
  EXPECT_EQ(second->graph.topic_count(), first->graph.topic_count());
  EXPECT_EQ(second->graph.relation_count(), first->graph.relation_count());
  for (auto query : {"Where is Port Quellin?", "Odile Varga", "green tea kettle"}) {
    auto a = first->graph.local_search(query, 5), b = second->graph.local_search(query, 5);
    EXPECT_EQ(a.chunks, b.chunks) << query;
    EXPECT_EQ(a.entity_ids, b.entity_ids) << query;
    EXPECT_EQ(a.relation_ids, b.relation_ids) << query;
    auto ta = first->graph.global_search(query, 3), tb = second->graph.global_search(query, 3);
    ASSERT_EQ(ta.size(), tb.size()) << query;
    for (size_t i = 0; i < ta.size(); ++i)
      EXPECT_EQ(ta[i].summary, tb[i].summary) << query;
  }
  for (auto agent : {"naive_rag_agent", "hybrid_agent", "graph_agent"}) {
    auto a = run_agent(*first, agent, "Marigold saffron captain", 4);
    auto b = run_agent(*second, agent, "Marigold saffron captain", 4);
    ASSERT_EQ(a.chunk_ids, b.chunk_ids) << agent;
    for (size_t i = 0; i < a.retrieval_results.size(); ++i)
      EXPECT_DOUBLE_EQ(a.retrieval_results[i].score, b.retrieval_results[i].score) << agent;
  }
  // Changed documents: rebuilt, not served stale.
  docs[2].text = "Rooibos is not tea at all.";
  auto third = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_FALSE(third->loaded_from_snapshot);
  EXPECT_FALSE(run_agent(*third, "hybrid_agent", "rooibos", 2).retrieval_results.empty());
  // Changed options: rebuilt too.
  opts.bm25.k1 = 1.2;
  EXPECT_FALSE(kb_catalog::build_snapshot("kb", docs, opts)->loaded_from_snapshot);
  // A corrupt snapshot is ignored and replaced.
  {
    std::fstream f{index_dir / "bm25.bin", std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(40);
    f.put('\x7f');
  }
  auto fixed = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_FALSE(fixed->loaded_from_snapshot);
  EXPECT_TRUE(kb_catalog::build_snapshot("kb", docs, opts)->loaded_from_snapshot);
  // Past its signature too: a byte changed in the payload, a file cut
  // short or one with a byte more is ignored and replaced.
  auto damage = [&](const std::filesystem::path& file, auto how) {
    how(file);
    EXPECT_FALSE(kb_catalog::build_snapshot("kb", docs, opts)->loaded_from_snapshot)
        << file.filename();
    EXPECT_TRUE(kb_catalog::build_snapshot("kb", docs, opts)->loaded_from_snapshot);
  };
  auto flip_middle = [](const std::filesystem::path& file) {
    auto size = std::filesystem::file_size(file);
    std::fstream f{file, std::ios::in | std::ios::out | std::ios::binary};
    f.seekg(static_cast<std::streamoff>(size / 2));
    auto c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put(static_cast<char>(c ^ 0x10));
  };
  auto cut_short = [](const std::filesystem::path& file) {
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);
  };
  auto one_more = [](const std::filesystem::path& file) {
    std::ofstream{file, std::ios::app | std::ios::binary}.put('\0');
  };
  for (auto name : {"bm25.bin", "vectors.bin", "graph.bin"}) {
    damage(index_dir / name, flip_middle);
    damage(index_dir / name, cut_short);
    damage(index_dir / name, one_more);
  }
}

// The graph rows' signature a snapshot remembers (the next ingest's changed
// rows are made against it), and the stages a build reports.
TEST(index_snapshots, a_snapshot_remembers_its_graph_rows_signature_and_reports_its_stages) {
  snapshot_dir dir;
  kb_build_options opts;
  opts.snapshot_dir = dir.path;
  auto built = kb_catalog::build_snapshot("kb", fixture_docs(), opts);
  auto expected = built->graph.rows("kb", built->chunks).signature;
  EXPECT_EQ(built->graph_rows_signature(), expected);
  built->remember_graph_rows_signature("another");  // known already: kept
  EXPECT_EQ(built->graph_rows_signature(), expected);
  std::vector<std::string_view> stages;
  for (auto& [stage, ms] : built->build_stages) {
    stages.push_back(stage);
    EXPECT_GE(ms, 0) << stage;
  }
  EXPECT_EQ(stages,
            (std::vector<std::string_view>{"chunks", "signature", "bm25", "vectors", "graph"}));
  // Loaded from its files: nothing built but the chunks.
  auto loaded = kb_catalog::build_snapshot("kb", fixture_docs(), opts);
  ASSERT_TRUE(loaded->loaded_from_snapshot);
  stages.clear();
  for (auto& [stage, ms] : loaded->build_stages)
    stages.push_back(stage);
  EXPECT_EQ(stages, (std::vector<std::string_view>{"chunks", "signature"}));
  // Told first (the changed rows' signature), it is not computed.
  loaded->remember_graph_rows_signature("told");
  EXPECT_EQ(loaded->graph_rows_signature(), "told");
}

// An ingest takes an unchanged document's chunks from the snapshot before
// instead of chunking it again: the chunks are those a build from nothing
// makes, whatever changed (a text, a title, only the line breaks that end
// paragraphs, the chunking itself).
TEST(index_snapshots, an_unchanged_documents_chunks_are_taken_from_the_snapshot_before) {
  std::vector<document> docs;
  for (int i = 0; i < 6; ++i) {
    std::string text;
    for (int s = 0; s < 30; ++s)
      text += "Sentence " + std::to_string(s) + " of log " + std::to_string(i)
              + " names Port Quellin." + (s % 7 == 6 ? "\n\n" : " ");
    docs.push_back({"log" + std::to_string(i), "Log " + std::to_string(i), text, ""});
  }
  kb_build_options opts;
  opts.chunking.max_chars = 300;
  auto same_chunks = [](const kb_snapshot& a, const kb_snapshot& b) {
    if (a.chunks.size() != b.chunks.size())
      return false;
    for (size_t i = 0; i < a.chunks.size(); ++i) {
      auto &x = a.chunks[i], &y = b.chunks[i];
      if (x.chunk_id != y.chunk_id || x.doc_id != y.doc_id || x.title != y.title || x.text != y.text
          || x.offset != y.offset)
        return false;
    }
    return true;
  };
  kb_settings kb;
  kb.name = "kb";
  auto before = kb_catalog::build_snapshot(kb, docs, opts);
  EXPECT_EQ(before->chunks_reused, 0u);
  auto changed = docs;
  changed[1].text.replace(changed[1].text.find("Sentence 3 "), 11, "Sentence three ");
  changed[2].title = "Another title";
  // Spaces where a paragraph ended: the same sentences, other chunk
  // boundaries.
  auto at = changed[3].text.find("\n\n");
  changed[3].text.replace(at, 2, "  ");
  changed.push_back({"log9", "Log 9", "A new log names Bram Oster.", ""});
  std::swap(changed[0], changed[4]);  // another order
  auto after = kb_catalog::build_snapshot(kb, changed, opts, before.get());
  auto fresh = kb_catalog::build_snapshot(kb, changed, opts);
  EXPECT_TRUE(same_chunks(*after, *fresh));
  size_t unchanged = 0;
  for (auto& c : fresh->chunks)
    unchanged += c.doc_id == "log0" || c.doc_id == "log4" || c.doc_id == "log5";
  EXPECT_EQ(after->chunks_reused, unchanged);
  EXPECT_GT(unchanged, 6u);
  EXPECT_EQ(after->index.search("three", 5).size(), fresh->index.search("three", 5).size());
  // Other chunking: nothing is taken.
  auto other = opts;
  other.chunking.max_chars = 200;
  auto rechunked = kb_catalog::build_snapshot(kb, changed, other, after.get());
  EXPECT_EQ(rechunked->chunks_reused, 0u);
  EXPECT_TRUE(same_chunks(*rechunked, *kb_catalog::build_snapshot(kb, changed, other)));
}

// An ingest's graph takes the named phrases of the chunks it kept from the
// graph before, and is the graph a build from nothing makes: byte for byte,
// through edits, removals, another order and another chunking, and when
// its book of phrases, grown past twice the phrases in use, starts again.
TEST(index_snapshots, an_ingests_graph_is_the_graph_built_from_nothing) {
  auto log = [](int i, const std::string& name) {
    std::string text;
    for (int s = 0; s < 12; ++s)
      text += "Sentence " + std::to_string(s) + " of log " + std::to_string(i) + " names "
              + (s % 3 ? "Port Quellin" : name) + " and BRCA" + std::to_string(i % 4)
              + (s % 5 == 4 ? ".\n\n" : ". ");
    return document{"log" + std::to_string(i), "Log " + std::to_string(i), text, ""};
  };
  std::vector<document> docs;
  for (int i = 0; i < 8; ++i)
    docs.push_back(log(i, "Captain Odile Varga"));
  kb_build_options opts;
  opts.chunking.max_chars = 300;
  kb_settings kb;
  kb.name = "kb";
  auto same_graph = [&](const kb_snapshot& built, const std::vector<document>& now) {
    auto fresh = kb_catalog::build_snapshot(kb, now, opts);
    EXPECT_EQ(built.graph.serialize(), fresh->graph.serialize());
    EXPECT_EQ(built.graph_rows_signature(), fresh->graph_rows_signature());
  };
  auto before = kb_catalog::build_snapshot(kb, docs, opts);
  EXPECT_GT(before->graph.phrases_known(), 0u);
  auto changed = docs;
  changed[1].text.replace(changed[1].text.find("Port Quellin"), 12, "Bram Oster");
  changed[2].title = "Another title";
  changed.erase(changed.begin() + 5);
  changed.push_back(log(9, "Marigold Harbour"));
  std::swap(changed[0], changed[4]);
  auto after = kb_catalog::build_snapshot(kb, changed, opts, before.get());
  same_graph(*after, changed);
  // A chunk whose text changed but whose row did not: its phrases are
  // found again, not taken from the row before.
  auto renamed = changed;
  for (auto& d : renamed)
    if (auto at = d.text.find("Port Quellin"); at != std::string::npos)
      d.text.replace(at, 12, "Port Zephyr");
  auto again = kb_catalog::build_snapshot(kb, renamed, opts, after.get());
  same_graph(*again, renamed);
  auto rechunked_opts = opts;
  rechunked_opts.chunking.max_chars = 200;
  auto rechunked = kb_catalog::build_snapshot(kb, renamed, rechunked_opts, again.get());
  EXPECT_EQ(rechunked->graph.serialize(),
            kb_catalog::build_snapshot(kb, renamed, rechunked_opts)->graph.serialize());
  // Generations of documents naming phrases never seen before (five a
  // document): the book keeps them until it holds more than twice those
  // in use plus 4,096, then starts again; every graph is the one built
  // from nothing.
  auto snap = again;
  size_t largest = 0;
  for (int generation = 0; generation < 5; ++generation) {
    std::vector<document> many;
    for (int i = 0; i < 600; ++i) {
      auto tag = std::to_string(generation) + "x" + std::to_string(i);
      many.push_back({"n" + std::to_string(i), "Note",
                      "Zeta" + tag + " Alpha met Kappa" + tag + ", Theta" + tag + " and Iota" + tag
                          + " in Lambda" + tag + " Mu.",
                      ""});
    }
    auto next = kb_catalog::build_snapshot(kb, many, opts, snap.get());
    same_graph(*next, many);
    auto& g = next->graph;
    largest = std::max(largest, g.phrases_known());
    // What the book held (at most twice the phrases in use plus 4,096)
    // and this generation's.
    EXPECT_LE(g.phrases_known(), 3 * g.phrases_in_use() + 4096);
    snap = next;
  }
  EXPECT_GT(largest, 3 * snap->graph.phrases_in_use()) << "the book grew past its bound";
  EXPECT_LT(snap->graph.phrases_known(), largest) << "and started again";
}

// A snapshot's signature names its documents by an FNV-1a hash of them as
// a binary::writer lays them out; it is computed as it goes, and must stay
// the value it always was: another would make every KB's snapshots stale
// at an upgrade (and re-embed every chunk with a remote embedder).
TEST(index_snapshots, the_signature_hashes_the_documents_as_a_writer_lays_them_out) {
  EXPECT_EQ(binary::fnv1a("world", binary::fnv1a("hello ")), binary::fnv1a("hello world"));
  snapshot_dir dir;
  kb_build_options opts;
  opts.snapshot_dir = dir.path;
  auto docs = fixture_docs();
  kb_catalog::build_snapshot("kb", docs, opts);
  std::ifstream in{dir.path / "kbs" / "kb" / "index" / "bm25.bin", std::ios::binary};
  std::string file{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  binary::reader r{file};
  std::string signature;
  ASSERT_TRUE(r.get_string(signature));
  binary::writer w;
  for (auto& d : docs) {
    w.put_string(d.id);
    w.put_string(d.title);
    w.put_string(d.text);
  }
  auto hash = " hash=" + std::to_string(binary::fnv1a(w.finish())) + " ";
  EXPECT_NE(signature.find(hash), std::string::npos) << signature << " lacks" << hash;
}

// An ingest's index files are written after its reply: queued, nothing is
// on disk until they run, and what they write is what a restart loads.
TEST(index_snapshots, deferred_writes_write_nothing_until_run_then_what_a_restart_loads) {
  snapshot_dir dir;
  kb_build_options opts;
  opts.snapshot_dir = dir.path;
  opts.vectors.exact_below = 2;  // the HNSW graph's file is queued too
  auto docs = fixture_docs();
  auto index_dir = dir.path / "kbs" / "kb" / "index";
  kb_settings settings;
  settings.name = "kb";
  std::vector<std::function<void()>> later;
  auto built = kb_catalog::build_snapshot(settings, docs, opts, nullptr, &later);
  EXPECT_FALSE(built->loaded_from_snapshot);
  EXPECT_EQ(later.size(), 4u) << "bm25, vectors, hnsw, graph";
  EXPECT_FALSE(std::filesystem::exists(index_dir));
  // An ingest on top of it: the previous snapshot's vectors reused, its
  // files still not written.
  docs[2].text = "Rooibos is not tea at all.";
  std::vector<std::function<void()>> next;
  auto ingested = kb_catalog::build_snapshot(settings, docs, opts, built.get(), &next);
  EXPECT_FALSE(std::filesystem::exists(index_dir));
  built.reset();  // the writes hold what they write
  for (auto& write : next)
    write();
  for (auto name : {"bm25.bin", "vectors.bin", "hnsw.bin", "graph.bin"})
    EXPECT_TRUE(std::filesystem::exists(index_dir / name)) << name;
  auto restarted = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_TRUE(restarted->loaded_from_snapshot);
  EXPECT_TRUE(restarted->vectors.graph_loaded());
  EXPECT_EQ(restarted->graph.rows("kb", restarted->chunks).signature,
            ingested->graph.rows("kb", ingested->chunks).signature);
  for (auto agent : {"naive_rag_agent", "hybrid_agent", "graph_agent"}) {
    auto a = run_agent(*ingested, agent, "rooibos tea", 4);
    auto b = run_agent(*restarted, agent, "rooibos tea", 4);
    ASSERT_FALSE(a.chunk_ids.empty()) << agent;
    ASSERT_EQ(a.chunk_ids, b.chunk_ids) << agent;
    for (size_t i = 0; i < a.retrieval_results.size(); ++i)
      EXPECT_DOUBLE_EQ(a.retrieval_results[i].score, b.retrieval_results[i].score) << agent;
  }
  // The first build's writes, run late, would write files of documents no
  // longer current: a restart ignores them (kb_admin skips them anyway).
  for (auto& write : later)
    write();
  EXPECT_FALSE(kb_catalog::build_snapshot("kb", docs, opts)->loaded_from_snapshot);
}

TEST(index_snapshots, the_hnsw_graph_is_kept_above_vector_exact_below) {
  snapshot_dir dir;
  kb_build_options opts;
  opts.snapshot_dir = dir.path;
  opts.vectors.exact_below = 2;  // the fixture KB is small
  auto docs = fixture_docs();
  auto first = kb_catalog::build_snapshot("kb", docs, opts);
  ASSERT_TRUE(first->vectors.uses_hnsw());
  EXPECT_FALSE(first->vectors.graph_loaded());
  ASSERT_TRUE(std::filesystem::exists(dir.path / "kbs" / "kb" / "index" / "hnsw.bin"));
  auto second = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_TRUE(second->loaded_from_snapshot);
  EXPECT_TRUE(second->vectors.graph_loaded()) << "not rebuilt at load";
  auto a = run_agent(*first, "naive_rag_agent", "Marigold saffron captain", 4);
  auto b = run_agent(*second, "naive_rag_agent", "Marigold saffron captain", 4);
  EXPECT_EQ(a.chunk_ids, b.chunk_ids);
  // Below the threshold again (the default): exact, and the graph's file,
  // no longer read, is removed.
  opts.vectors.exact_below = vector_index_options{}.exact_below;
  auto third = kb_catalog::build_snapshot("kb", docs, opts);
  EXPECT_FALSE(third->vectors.uses_hnsw());
  EXPECT_FALSE(std::filesystem::exists(dir.path / "kbs" / "kb" / "index" / "hnsw.bin"));
  EXPECT_EQ(run_agent(*third, "naive_rag_agent", "Marigold saffron captain", 4).chunk_ids,
            a.chunk_ids);
}

TEST(index_snapshots, bm25_round_trip_and_truncation) {
  std::vector<chunk> chunks;
  for (auto& d : fixture_docs())
    for (auto& c : chunk_document(d, {}))
      chunks.push_back(c);
  auto idx = bm25_index::build(chunks);
  auto bytes = idx.serialize();
  auto back = bm25_index::deserialize(bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->search("captain Marigold tea", 5), idx.search("captain Marigold tea", 5));
  EXPECT_DOUBLE_EQ(back->idf("marigold"), idx.idf("marigold"));
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_FALSE(bm25_index::deserialize(std::string_view{bytes}.substr(0, cut))) << cut;
  EXPECT_FALSE(bm25_index::deserialize("definitely not an index"));
}

}  // namespace
}  // namespace ragtor
