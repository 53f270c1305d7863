// Rank fusion and the offline deep-research helpers (DESIGN §6).
//
// Every leg over-retrieves max(5k, 50) and drops its own results below its
// threshold (on the leg's own score scale — never a 0-1 threshold on a
// fused score); the survivors are fused by one of two rules:
//   weighted RRF  each item scores sum(weight / (60 + rank)): ranks only,
//                 so a weak leg's rank 1 counts as much as a strong leg's;
//   convex        each item scores sum(weight * score / leg's best score)
//                 / sum(weights): score-aware, so an item a leg ranks
//                 first by a wide margin keeps that margin, and an item
//                 only a leg of weight w likes scores at most w.
// Which rule and weights a KB gets: fusion_policy.hpp. RM3
// pseudo-relevance feedback and a query-coverage measure drive the
// research loop without a model.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ragtor {

struct ranked_list {
  std::string leg;
  double weight = 1.0;
  std::optional<double> min_score;  // applied to the leg's own scores, before fusion
  std::vector<std::pair<std::string, double>> items;  // (id, leg score), best first
  std::string error;  // why the leg could not run ("" = it ran); items is then empty
  std::string note;   // what the leg did beyond the plain search, for the trace
};

struct fused_item {
  std::string id;
  double score = 0;
  std::vector<std::pair<std::string, int>> ranks;  // (leg, 1-based rank)
};

size_t over_retrieve_depth(size_t k);

// Ties: better best single-leg rank, then id.
std::vector<fused_item> weighted_rrf(const std::vector<ranked_list>& lists, size_t k,
                                     double rrf_k = 60);

// The convex combination of max-normalised leg scores (above); a leg whose
// best score is not positive contributes nothing. Same ties as weighted_rrf.
std::vector<fused_item> convex_fusion(const std::vector<ranked_list>& lists, size_t k);

enum class fusion_rule { rrf, convex };
std::string_view to_string(fusion_rule rule);

std::vector<fused_item> fuse(const std::vector<ranked_list>& lists, size_t k, fusion_rule rule);

struct weighted_term {
  std::string term;  // an index term (tokenize())
  double weight;
};

// RM3: a relevance model over the feedback texts (term probability in each
// text x the text's normalised retrieval score), its top `expansion_terms`
// terms that are not query terms, interpolated with the query:
// original_weight * P(t|Q) + (1 - original_weight) * P(t|R). Sums to 1.
std::vector<weighted_term> rm3_expand(std::string_view query,
                                      const std::vector<std::pair<std::string, double>>& feedback,
                                      size_t expansion_terms = 10, double original_weight = 0.5);

// The idf-weighted share of distinct query terms that occur in at least
// one evidence text (1 = all found; an empty query counts as covered).
double query_coverage(std::string_view query, const std::vector<std::string>& evidence,
                      const std::function<double(std::string_view)>& idf);
// The same with holds(term) telling whether some evidence text holds a
// query term (each distinct term asked once, in sorted order).
double query_coverage(std::string_view query, const std::function<bool(const std::string&)>& holds,
                      const std::function<double(std::string_view)>& idf);

}  // namespace ragtor
