// Typo tolerance for the BM25 leg: a query term that is not in the index's
// vocabulary ("lightouse", "kestral") also searches the indexed terms
// within a small edit distance (optimal string alignment: insert, delete,
// substitute, swap two neighbours). Terms the index knows are never
// expanded, so correctly spelled queries search exactly as before.
// Bounded: only Latin letter terms of at least `min_length` bytes (CJK
// terms are 1-2 characters and numbers must match exactly), distance 1 up
// to `long_length` bytes and 2 from there, and at most `max_expansions`
// index terms per query term — those at the smallest distance found, the
// most frequent first (the common spelling is the likelier intent).
// Works on index terms (after stemming), as BM25 does.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "retrieval/bm25_index.hpp"

namespace ragtor {

struct typo_options {
  size_t min_length = 4;
  size_t long_length = 8;  // from this length on, distance 2
  size_t max_expansions = 3;
  // Weight of an expansion at distance 1 / 2, relative to the query term.
  double weight_distance_1 = 1.0;
  double weight_distance_2 = 0.8;
};

struct typo_expansion {
  std::string term;                                  // the unknown query term
  std::vector<std::pair<std::string, int>> matches;  // (index term, distance)
};

struct expanded_query {
  // The query's index terms (weight = multiplicity) plus the expansions,
  // for bm25_index::search_terms.
  std::vector<std::pair<std::string, double>> terms;
  std::vector<typo_expansion> expansions;  // empty: search the query as is
};

// The optimal-string-alignment distance of a and b when it is at most
// `max_distance`, else max_distance + 1 (stops early).
int bounded_edit_distance(std::string_view a, std::string_view b, int max_distance);

expanded_query expand_typos(const bm25_index& index, std::string_view query,
                            const typo_options& opts = {});

// "lightous->lighthous,lightouse; kestral->kestrel" for traces.
std::string describe(const std::vector<typo_expansion>& expansions);

}  // namespace ragtor
