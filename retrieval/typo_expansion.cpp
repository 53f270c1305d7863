#include "retrieval/typo_expansion.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

bool is_latin_word(std::string_view term) {
  return !term.empty() && std::all_of(term.begin(), term.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || c == '\'';
  });
}

}  // namespace

namespace {

// The OSA distance, its table's three rows (b.size() + 1 ints each) at
// `rows`.
int bounded_edit_distance(std::string_view a, std::string_view b, int max_distance, int* rows) {
  auto la = static_cast<int>(a.size()), lb = static_cast<int>(b.size());
  int* prev2 = rows;
  int* prev = rows + (lb + 1);
  int* cur = rows + 2 * (lb + 1);
  for (int j = 0; j <= lb; ++j)
    prev[j] = j;
  for (int i = 1; i <= la; ++i) {
    cur[0] = i;
    int row_min = cur[0];
    for (int j = 1; j <= lb; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > max_distance)
      return max_distance + 1;
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return std::min(prev[lb], max_distance + 1);
}

}  // namespace

int bounded_edit_distance(std::string_view a, std::string_view b, int max_distance) {
  auto la = static_cast<int>(a.size()), lb = static_cast<int>(b.size());
  if (std::abs(la - lb) > max_distance)
    return max_distance + 1;
  // Three rows of the OSA table, on the stack for terms of up to 63 bytes;
  // a row whose minimum exceeds the bound ends the computation.
  constexpr int on_stack = 64;
  if (lb < on_stack) {
    int rows[3 * on_stack];
    return bounded_edit_distance(a, b, max_distance, rows);
  }
  std::vector<int> rows(3 * static_cast<size_t>(lb + 1));
  return bounded_edit_distance(a, b, max_distance, rows.data());
}

expanded_query expand_typos(const bm25_index& index, std::string_view query,
                            const typo_options& opts) {
  expanded_query out;
  std::map<std::string, double> counts;
  for (auto& t : tokenize(query))
    counts[t] += 1.0;
  for (auto& entry : counts) {
    // Not a structured binding: clang 14 lambdas cannot capture one.
    const std::string& term = entry.first;
    double weight = entry.second;
    out.terms.emplace_back(term, weight);
    if (term.size() < opts.min_length || !is_latin_word(term) || index.has_term(term))
      continue;
    int bound = term.size() >= opts.long_length ? 2 : 1;
    // (distance, -df, term): the closest, then the most frequent. Which
    // terms are found does not depend on the order they are looked at
    // (all at the smallest distance within the bound), so the lengths
    // nearest the term's go first: a close match found early narrows the
    // rest of the search.
    std::vector<std::tuple<int, int64_t, std::string>> found;
    int best = bound;
    auto letters = letter_set(term);
    auto len = static_cast<int>(term.size());
    for (int step = 0; step <= 2 * bound; ++step) {
      int diff = (step + 1) / 2;  // 0, 1, 1, 2, 2
      if (diff > best)
        break;
      auto n = static_cast<size_t>(step % 2 ? len - diff : len + diff);  // none below 0
      auto* bucket = index.terms_with_length(n);
      if (!bucket)
        continue;
      for (size_t i = 0; i < bucket->size(); ++i) {
        if (std::popcount(bucket->letters[i] ^ letters) > 2 * best)
          continue;  // more than `best` edits apart (letter_set)
        std::string_view candidate{bucket->terms.data() + i * n, n};
        auto d = bounded_edit_distance(term, candidate, best);
        if (d > best)
          continue;
        if (d < best) {
          found.clear();  // only the smallest distance found counts
          best = d;
        }
        found.emplace_back(d, -static_cast<int64_t>(bucket->df[i]), std::string{candidate});
      }
    }
    if (found.empty())
      continue;
    std::sort(found.begin(), found.end());
    if (found.size() > opts.max_expansions)
      found.resize(opts.max_expansions);
    typo_expansion e;
    e.term = term;
    for (auto& [d, neg_df, candidate] : found) {
      // Ambiguity splits the term's weight: one clear correction counts
      // as the term, three guesses a third each.
      auto w = (d == 1 ? opts.weight_distance_1 : opts.weight_distance_2)
               / static_cast<double>(found.size());
      out.terms.emplace_back(candidate, weight * w);
      e.matches.emplace_back(candidate, d);
    }
    out.expansions.push_back(std::move(e));
  }
  return out;
}

std::string describe(const std::vector<typo_expansion>& expansions) {
  std::string s;
  for (auto& e : expansions) {
    if (!s.empty())
      s += "; ";
    s += e.term + "->";
    for (size_t i = 0; i < e.matches.size(); ++i)
      s += (i ? "," : "") + e.matches[i].first;
  }
  return s;
}

}  // namespace ragtor
