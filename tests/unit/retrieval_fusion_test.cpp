// Fusion that cannot dilute a strong leg, the fusion policy chosen by the
// embedder's kind (and overridden by a KB's settings), the trace naming the
// choice, and typo expansion against the BM25 vocabulary (bounded, and off
// for terms the index knows).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "retrieval/agents.hpp"
#include "retrieval/embedder.hpp"
#include "retrieval/fusion.hpp"
#include "retrieval/fusion_policy.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/tokenizer.hpp"
#include "retrieval/typo_expansion.hpp"

namespace ragtor {
namespace {

std::vector<std::string> ids_of(const std::vector<fused_item>& f) {
  std::vector<std::string> out;
  for (auto& x : f)
    out.push_back(x.id);
  return out;
}

// A strong leg with a clear top 3 and a weak leg that likes other items
// (and ranks the strong leg's best last).
ranked_list strong_leg(double weight) {
  return {"bm25",
          weight,
          std::nullopt,
          {{"s1", 20}, {"s2", 18}, {"s3", 16}, {"m1", 6}, {"m2", 5}, {"m3", 4}}};
}
ranked_list weak_leg(double weight) {
  return {"vector",
          weight,
          std::nullopt,
          {{"w1", 0.62}, {"w2", 0.61}, {"w3", 0.60}, {"m1", 0.59}, {"s3", 0.40}, {"s1", 0.31}}};
}

TEST(fusion_rules, the_lexical_default_keeps_the_strong_legs_top_results_on_top) {
  auto p = default_fusion(embedder_kind::lexical);
  auto f = fuse({strong_leg(p.keyword_weight), weak_leg(p.vector_weight)}, 3, p.rule);
  EXPECT_EQ(ids_of(f), (std::vector<std::string>{"s1", "s2", "s3"}));
  // The same legs under rank-only RRF at the DESIGN weights: the weak leg's
  // favourites push the strong leg's top results out of the top 3 — the
  // dilution the lexical default exists to avoid.
  auto rrf = weighted_rrf({strong_leg(0.3), weak_leg(0.7)}, 3);
  EXPECT_NE(ids_of(rrf), (std::vector<std::string>{"s1", "s2", "s3"}));
}

TEST(fusion_rules, convex_fusion_bounds_what_a_weak_leg_alone_can_reach) {
  // An item only the weak leg (weight w of W) returns scores at most w/W,
  // so every item the strong leg scores above w/(W-w) of its best stays
  // ahead of it, whatever the weak leg's order.
  for (double w : {0.05, 0.1, 0.2, 0.3}) {
    auto f = convex_fusion({strong_leg(1 - w), weak_leg(w)}, 20);
    ASSERT_FALSE(f.empty());
    double best_weak_only = 0;
    for (auto& x : f)
      if (x.id[0] == 'w') {
        EXPECT_LE(x.score, w + 1e-12) << x.id;
        best_weak_only = std::max(best_weak_only, x.score);
      }
    for (auto& x : f) {
      if (x.id[0] == 's') {
        EXPECT_GT(x.score, best_weak_only) << "w=" << w << " " << x.id;
      }
    }
  }
  // Scores are max-normalised per leg: the top of each leg counts its weight.
  auto single = convex_fusion({strong_leg(1)}, 3);
  ASSERT_EQ(single.size(), 3u);
  EXPECT_DOUBLE_EQ(single[0].score, 1.0);
  EXPECT_DOUBLE_EQ(single[1].score, 18.0 / 20.0);
}

TEST(fusion_rules, convex_fusion_thresholds_dedupes_and_ignores_legs_without_scores) {
  ranked_list kw{"bm25", 0.5, 10.0, {{"a", 30}, {"b", 9}, {"a", 30}, {"c", 15}}};
  ranked_list empty{"vector", 0.5, std::nullopt, {}};
  auto f = convex_fusion({kw, empty}, 10);
  ASSERT_EQ(f.size(), 2u) << "b is below the leg's threshold; a counts once";
  EXPECT_EQ(f[0].id, "a");
  EXPECT_DOUBLE_EQ(f[0].score, 0.5) << "weights are shares of all legs' weight";
  EXPECT_DOUBLE_EQ(f[1].score, 0.5 * 15 / 30);
  EXPECT_EQ(f[0].ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(fuse({kw}, 10, fusion_rule::rrf).front().score, 0.5 / 61);
}

// Both rules against a plain reading of their definitions, on random legs
// of a few thousand ids (thresholds, duplicates, ties, legs without
// scores), fused one after another on one thread as agents do.
TEST(fusion_rules, equal_a_plain_reading_of_the_rules_on_random_legs) {
  struct acc {
    double score = 0;
    int best_rank = INT32_MAX;
    std::vector<std::pair<std::string, int>> ranks;
  };
  auto reference = [](const std::vector<ranked_list>& lists, size_t k, fusion_rule rule) {
    std::map<std::string, acc> by_id;
    double total_weight = 0;
    for (auto& l : lists)
      total_weight += std::max(l.weight, 0.0);
    for (auto& l : lists) {
      auto kept = [&](double score) { return !l.min_score || score >= *l.min_score; };
      double best = 0;
      for (auto& [id, score] : l.items)
        if (kept(score))
          best = std::max(best, score);
      std::set<std::string> seen;
      int rank = 0;
      for (auto& [id, score] : l.items) {
        if (!kept(score) || !seen.insert(id).second)
          continue;
        ++rank;
        auto& a = by_id[id];
        a.best_rank = std::min(a.best_rank, rank);
        a.ranks.emplace_back(l.leg, rank);
        if (rule == fusion_rule::rrf)
          a.score += l.weight / (60.0 + rank);
        else if (best > 0 && total_weight > 0)
          a.score += std::max(score, 0.0) * (std::max(l.weight, 0.0) / (best * total_weight));
      }
    }
    std::vector<fused_item> out;
    for (auto& [id, a] : by_id)
      out.push_back({id, a.score, a.ranks});
    std::sort(out.begin(), out.end(), [&](auto& x, auto& y) {
      if (x.score != y.score)
        return x.score > y.score;
      auto rx = by_id[x.id].best_rank, ry = by_id[y.id].best_rank;
      return rx != ry ? rx < ry : x.id < y.id;
    });
    out.resize(std::min(k, out.size()));
    return out;
  };
  std::mt19937 rng{11};
  int compared = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<ranked_list> lists;
    auto legs = 1 + rng() % 5;
    for (size_t leg = 0; leg < legs; ++leg) {
      ranked_list l{"leg" + std::to_string(leg), 0.1 + (rng() % 10) / 10.0, std::nullopt, {}};
      if (rng() % 3 == 0)
        l.min_score = 2.0;
      auto n = round % 4 == 0 ? rng() % 3000 : rng() % 60;
      for (size_t i = 0; i < n; ++i)
        // Scores of a few values: ties in score and in fused score.
        l.items.emplace_back(std::to_string(rng() % (2 * n + 1)), double(rng() % 8));
      lists.push_back(std::move(l));
    }
    for (auto rule : {fusion_rule::rrf, fusion_rule::convex})
      for (size_t k : {size_t{1}, size_t{10}, size_t{100000}}) {
        auto got = fuse(lists, k, rule);
        auto want = reference(lists, k, rule);
        ASSERT_EQ(ids_of(got), ids_of(want)) << "round " << round << " k " << k;
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].score, want[i].score);
          EXPECT_EQ(got[i].ranks, want[i].ranks);
        }
        compared += static_cast<int>(got.size());
      }
  }
  EXPECT_GT(compared, 10000);
}

TEST(fusion_policy, the_embedder_kind_chooses_the_default) {
  kb_settings s;  // no weights, fusion "auto"
  auto hashed = make_hashed_embedder(64);
  EXPECT_EQ(hashed->kind(), embedder_kind::lexical);
  auto lexical = choose_fusion(s, hashed.get());
  EXPECT_EQ(lexical.rule, fusion_rule::convex);
  EXPECT_GT(lexical.keyword_weight, 4 * lexical.vector_weight) << "BM25 leads";
  EXPECT_NE(lexical.reason.find("lexical embedder hashed-ngram-v1/64"), std::string::npos)
      << lexical.reason;
  EXPECT_NE(lexical.reason.find("defaults"), std::string::npos) << lexical.reason;

  struct semantic_embedder final : embedder {
    std::string name() const override { return "remote-model/8"; }
    size_t dims() const override { return 8; }
    std::variant<embedding_batch, std::string> embed(const std::vector<std::string>&) override {
      return std::string{"not used"};
    }
  } model;
  EXPECT_EQ(model.kind(), embedder_kind::semantic) << "an embedding model is semantic";
  auto semantic = choose_fusion(s, &model);
  EXPECT_EQ(semantic.rule, fusion_rule::rrf);
  EXPECT_DOUBLE_EQ(semantic.vector_weight, 0.7);
  EXPECT_DOUBLE_EQ(semantic.keyword_weight, 0.3);
  EXPECT_NE(semantic.reason.find("semantic embedder remote-model/8"), std::string::npos);
}

TEST(fusion_policy, a_kbs_own_settings_win_over_every_default) {
  auto hashed = make_hashed_embedder(64);
  kb_settings s;
  s.vector_weight = 0.7;
  s.keyword_weight = 0.3;
  auto both = choose_fusion(s, hashed.get());
  EXPECT_DOUBLE_EQ(both.vector_weight, 0.7);
  EXPECT_DOUBLE_EQ(both.keyword_weight, 0.3);
  EXPECT_EQ(both.rule, fusion_rule::convex) << "the rule stays the kind's default";
  EXPECT_NE(both.reason.find("KB weights"), std::string::npos) << both.reason;
  EXPECT_NE(both.reason.find("vector-led"), std::string::npos) << both.reason;

  kb_settings one;
  one.vector_weight = 0.25;
  auto completed = choose_fusion(one, hashed.get());
  EXPECT_DOUBLE_EQ(completed.keyword_weight, 0.75) << "the other weight is the complement";

  kb_settings rule;
  rule.fusion = "rrf";
  auto by_rule = choose_fusion(rule, hashed.get());
  EXPECT_EQ(by_rule.rule, fusion_rule::rrf);
  EXPECT_DOUBLE_EQ(by_rule.keyword_weight, default_fusion(embedder_kind::lexical).keyword_weight);
  EXPECT_NE(by_rule.reason.find("KB fusion rule"), std::string::npos) << by_rule.reason;
}

std::vector<document> harbour_docs() {
  return {
      {"lighthouse", "The lighthouse",
       "The lighthouse on the cape guides ships past the reef at night.", ""},
      {"kestrel", "Birds of the cliffs", "A kestrel hovers over the cliffs hunting voles.", ""},
      {"harbour", "The harbour", "Ships unload timber and salt in the harbour at dawn.", ""},
      {"market", "The market", "Fishermen sell their catch at the market near the harbour.", ""},
  };
}

TEST(fusion_policy, the_search_trace_names_the_choice) {
  auto snap = kb_catalog::build_snapshot("harbour", harbour_docs(), kb_build_options{});
  auto r = run_agent(*snap, "hybrid_agent", "ships in the harbour", 2);
  auto step = std::find_if(r.trace.begin(), r.trace.end(),
                           [](const trace_step& s) { return s.step == "fusion"; });
  ASSERT_NE(step, r.trace.end());
  EXPECT_NE(step->detail.find("BM25-led convex vector=0.10 keyword=0.90"), std::string::npos)
      << step->detail;

  kb_settings s;
  s.name = "harbour";
  s.vector_weight = 0.7;
  s.keyword_weight = 0.3;
  s.fusion = "rrf";
  auto own = kb_catalog::build_snapshot(s, harbour_docs(), kb_build_options{});
  auto r2 = run_agent(*own, "hybrid_agent", "ships in the harbour", 2);
  step = std::find_if(r2.trace.begin(), r2.trace.end(),
                      [](const trace_step& s) { return s.step == "fusion"; });
  ASSERT_NE(step, r2.trace.end());
  EXPECT_NE(step->detail.find("rrf vector=0.70 keyword=0.30 (KB weights and KB fusion rule)"),
            std::string::npos)
      << step->detail;
}

TEST(typo_expansion, bounded_edit_distance_counts_swaps_as_one_and_stops_at_the_bound) {
  EXPECT_EQ(bounded_edit_distance("kestral", "kestrel", 2), 1);
  EXPECT_EQ(bounded_edit_distance("lightouse", "lighthouse", 2), 1);
  EXPECT_EQ(bounded_edit_distance("hrabour", "harbour", 2), 1) << "a swap of neighbours";
  EXPECT_EQ(bounded_edit_distance("harbour", "harbour", 1), 0);
  EXPECT_EQ(bounded_edit_distance("abcdef", "badcfe", 2), 3) << "more than the bound: bound + 1";
  EXPECT_EQ(bounded_edit_distance("ab", "abcdef", 2), 3) << "lengths too far apart";
}

TEST(typo_expansion, an_unknown_term_finds_its_near_spelling_and_the_document) {
  auto snap = kb_catalog::build_snapshot("harbour", harbour_docs(), kb_build_options{});
  auto e = expand_typos(snap->index, "the lightouse at night");
  ASSERT_EQ(e.expansions.size(), 1u) << describe(e.expansions);
  EXPECT_EQ(e.expansions[0].matches.front().first, "lighthous");  // stemmed
  auto kestrel = expand_typos(snap->index, "Kestral");
  ASSERT_EQ(kestrel.expansions.size(), 1u);
  EXPECT_EQ(kestrel.expansions[0].matches.front().first, "kestrel");
  EXPECT_TRUE(snap->index.search("Kestral", 3).empty()) << "without expansion nothing matches";
  for (auto agent : {"hybrid_agent", "deep_research_agent", "fusion_agent"}) {
    auto r = run_agent(*snap, agent, "Kestral", 3);
    ASSERT_FALSE(r.retrieval_results.empty()) << agent;
    EXPECT_EQ(r.retrieval_results[0].doc_id, "kestrel") << agent;
  }
  auto r = run_agent(*snap, "hybrid_agent", "Kestral", 3);
  bool noted = false;
  for (auto& s : r.trace)
    noted |= s.detail.find("typos kestral->kestrel") != std::string::npos;
  EXPECT_TRUE(noted) << "the trace shows the expansion";
}

TEST(typo_expansion, is_off_for_known_short_or_numeric_terms_and_bounded) {
  auto snap = kb_catalog::build_snapshot("harbour", harbour_docs(), kb_build_options{});
  EXPECT_TRUE(expand_typos(snap->index, "ships in the harbour").expansions.empty())
      << "known terms are never expanded";
  EXPECT_TRUE(expand_typos(snap->index, "sal").expansions.empty()) << "too short";
  EXPECT_TRUE(expand_typos(snap->index, "2024 20245").expansions.empty()) << "numbers";
  EXPECT_TRUE(expand_typos(snap->index, "zzzzzzzz").expansions.empty()) << "nothing near";
  // Distance 1 below long_length: "harbxxr" is 2 edits from "harbour".
  EXPECT_TRUE(expand_typos(snap->index, "harbxxr").expansions.empty());
  // From long_length on, distance 2.
  auto two = expand_typos(snap->index, "lighxxouse");
  ASSERT_EQ(two.expansions.size(), 1u);
  EXPECT_EQ(two.expansions[0].matches.front().second, 2);

  // Many equally near terms: at most max_expansions, the closest only.
  std::vector<chunk> chunks;
  for (auto w : {"tamper", "temper", "timper", "tomper", "tumper", "tempera"}) {
    chunk c;
    c.chunk_id = w;
    c.text = std::string{w} + " " + w;
    chunks.push_back(c);
  }
  auto index = bm25_index::build(chunks, {});
  typo_options opts;
  opts.max_expansions = 2;
  opts.long_length = 100;
  auto e = expand_typos(index, "txmper", opts);
  ASSERT_EQ(e.expansions.size(), 1u);
  EXPECT_EQ(e.expansions[0].matches.size(), 2u);
  for (auto& [term, d] : e.expansions[0].matches)
    EXPECT_EQ(d, 1) << term;
  // Ambiguity splits the term's weight among its expansions.
  double expansion_weight = 0;
  for (auto& [term, w] : e.terms)
    if (term != "txmper")
      expansion_weight += w;
  EXPECT_DOUBLE_EQ(expansion_weight, 1.0);

  kb_settings off;
  off.name = "harbour";
  off.search_mode = "bm25";  // the BM25 leg alone (the hashed vectors share trigrams)
  auto on = kb_catalog::build_snapshot(off, harbour_docs(), kb_build_options{});
  EXPECT_FALSE(run_agent(*on, "hybrid_agent", "Kestral", 3).retrieval_results.empty());
  off.typo_tolerance = false;
  auto plain = kb_catalog::build_snapshot(off, harbour_docs(), kb_build_options{});
  EXPECT_TRUE(run_agent(*plain, "hybrid_agent", "Kestral", 3).retrieval_results.empty())
      << "typo_tolerance=false: no expansion";
}

// The expansions a scan of the whole vocabulary finds (the search before
// terms were grouped by length and letters): every index term within the
// bound, the smallest distance only, closest then most frequent.
std::vector<std::pair<std::string, int>> expansions_by_full_scan(const bm25_index& index,
                                                                  const std::string& term,
                                                                  const typo_options& opts) {
  int bound = term.size() >= opts.long_length ? 2 : 1;
  std::vector<std::tuple<int, int64_t, std::string>> found;
  index.visit_vocabulary([&](std::string_view candidate, size_t df) {
    auto d = bounded_edit_distance(term, candidate, bound);
    if (d <= bound)
      found.emplace_back(d, -static_cast<int64_t>(df), std::string{candidate});
  });
  std::vector<std::pair<std::string, int>> out;
  if (found.empty())
    return out;
  std::sort(found.begin(), found.end());
  for (auto& [d, neg_df, candidate] : found)
    if (d == std::get<0>(found.front()) && out.size() < opts.max_expansions)
      out.emplace_back(candidate, d);
  return out;
}

TEST(typo_expansion, finds_what_a_scan_of_the_whole_vocabulary_finds) {
  // A vocabulary dense in near spellings: words over six letters, 3 to 12
  // long, each in a random number of chunks (document frequencies differ).
  std::mt19937_64 rng{20261128};
  auto word = [&](size_t len) {
    std::string w;
    for (size_t i = 0; i < len; ++i)
      w += "aeilnrst"[rng() % 6 + (i % 2) * 2];
    return w;
  };
  std::vector<std::string> vocab;
  for (int i = 0; i < 3000; ++i)
    vocab.push_back(word(3 + rng() % 10));
  vocab.push_back("hello'world");  // a byte outside a-z
  std::vector<chunk> chunks;
  for (int c = 0; c < 400; ++c) {
    chunk ch;
    ch.chunk_id = "c" + std::to_string(c);
    for (int w = 0; w < 30; ++w)
      ch.text += vocab[rng() % vocab.size()] + " ";
    chunks.push_back(ch);
  }
  auto index = bm25_index::build(chunks, {});
  // Queries: index terms with one to three random edits, and fresh words.
  std::vector<std::string> terms;
  index.visit_vocabulary([&](std::string_view v, size_t) { terms.emplace_back(v); });
  std::sort(terms.begin(), terms.end());
  size_t compared = 0, expanded = 0;
  for (int q = 0; q < 1500; ++q) {
    std::string t;
    if (q % 5 == 4) {
      t = word(4 + rng() % 9);
    } else {
      t = terms[rng() % terms.size()];
      for (int e = 0, edits = 1 + q % 3; e < edits && t.size() > 1; ++e) {
        auto at = rng() % t.size();
        switch (rng() % 4) {
          case 0: t.erase(at, 1); break;
          case 1: t.insert(at, 1, "aeilnrstxz"[rng() % 10]); break;
          case 2: t[at] = "aeilnrstxz"[rng() % 10]; break;
          default: if (at + 1 < t.size()) std::swap(t[at], t[at + 1]);
        }
      }
    }
    for (auto opts : {typo_options{}, typo_options{4, 6, 5, 1.0, 0.8}}) {
      auto e = expand_typos(index, t, opts);
      auto tokens = tokenize(t);
      if (tokens.size() != 1 || tokens[0].size() < opts.min_length || index.has_term(tokens[0])) {
        EXPECT_TRUE(e.expansions.empty()) << t;
        continue;
      }
      auto want = expansions_by_full_scan(index, tokens[0], opts);
      ++compared;
      if (want.empty()) {
        EXPECT_TRUE(e.expansions.empty()) << t;
        continue;
      }
      ++expanded;
      ASSERT_EQ(e.expansions.size(), 1u) << t;
      EXPECT_EQ(e.expansions[0].matches, want) << t;
    }
  }
  EXPECT_GT(compared, 1000u);
  EXPECT_GT(expanded, 500u) << "most edited terms have a near spelling";
}

}  // namespace
}  // namespace ragtor
