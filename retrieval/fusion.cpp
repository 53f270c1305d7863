#include "retrieval/fusion.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "retrieval/tokenizer.hpp"

namespace ragtor {

size_t over_retrieve_depth(size_t k) {
  return std::max<size_t>(5 * k, 50);
}

namespace {

// What fusion keeps of an item while the legs are added: its id (a view
// of a leg's, which outlives fusion), its fused score, the leg that added
// it last (an id a leg lists twice counts once, at its first rank) and
// its best single-leg rank (the first tie-break).
struct fusing {
  std::string_view id;
  double score = 0;
  uint32_t last_leg = UINT32_MAX;
  int best_rank = INT32_MAX;
};

// The items of one fusion in flat arrays kept per thread, found by id
// through an open-addressed table of their positions: no allocation per
// item (a map node and a vector of ranks each made fusing a few thousand
// items mostly malloc and free), the ranks in one array by item and leg.
class fusing_table {
public:
  static fusing_table& for_thread(const std::vector<ranked_list>& lists) {
    thread_local fusing_table t;
    size_t n = 0;
    for (auto& list : lists)
      n += list.items.size();
    t.legs_ = lists.size();
    t.items.clear();
    t.items.reserve(n);
    t.ranks_.clear();
    size_t size = 16;
    while (size < 2 * n)
      size *= 2;
    t.slots_.assign(size, UINT32_MAX);
    return t;
  }

  // The item with this id, added if new.
  uint32_t find_or_add(std::string_view id) {
    auto mask = slots_.size() - 1;
    for (auto at = std::hash<std::string_view>{}(id)&mask;; at = (at + 1) & mask) {
      auto i = slots_[at];
      if (i == UINT32_MAX) {
        i = static_cast<uint32_t>(items.size());
        slots_[at] = i;
        items.push_back({id});
        ranks_.resize(ranks_.size() + legs_, 0);
        return i;
      }
      if (items[i].id == id)
        return i;
    }
  }

  // Item i's rank in leg `leg` (0: not in it).
  int& rank(uint32_t i, size_t leg) { return ranks_[i * legs_ + leg]; }
  int rank(uint32_t i, size_t leg) const { return ranks_[i * legs_ + leg]; }

  std::vector<fusing> items;

private:
  std::vector<int> ranks_;
  size_t legs_ = 0;
  std::vector<uint32_t> slots_;
};

// Adds leg number `leg`'s surviving items (thresholded, first occurrence
// of an id) to `table`, each with its 1-based rank and
// contribution(rank, score).
template <class Contribution>
void add_leg(const ranked_list& list, size_t leg, fusing_table& table, Contribution contribution) {
  int rank = 0;
  for (auto& [id, score] : list.items) {
    if (list.min_score && score < *list.min_score)
      continue;
    auto i = table.find_or_add(id);
    auto& f = table.items[i];
    if (f.last_leg == leg)
      continue;
    f.last_leg = static_cast<uint32_t>(leg);
    ++rank;
    f.best_rank = std::min(f.best_rank, rank);
    f.score += contribution(rank, score);
    table.rank(i, leg) = rank;
  }
}

std::vector<fused_item> ranked(const fusing_table& table, const std::vector<ranked_list>& lists,
                               size_t k) {
  thread_local std::vector<uint32_t> order;
  order.resize(table.items.size());
  for (uint32_t i = 0; i < order.size(); ++i)
    order[i] = i;
  auto better = [&](uint32_t ia, uint32_t ib) {
    auto &a = table.items[ia], &b = table.items[ib];
    if (a.score != b.score)
      return a.score > b.score;
    if (a.best_rank != b.best_rank)
      return a.best_rank < b.best_rank;
    return a.id < b.id;
  };
  auto keep = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    better);
  std::vector<fused_item> out(keep);
  for (size_t i = 0; i < keep; ++i) {
    auto& f = table.items[order[i]];
    out[i].id = f.id;
    out[i].score = f.score;
    for (size_t leg = 0; leg < lists.size(); ++leg)
      if (auto rank = table.rank(order[i], leg))
        out[i].ranks.emplace_back(lists[leg].leg, rank);
  }
  return out;
}

}  // namespace

std::vector<fused_item> weighted_rrf(const std::vector<ranked_list>& lists, size_t k,
                                     double rrf_k) {
  auto& table = fusing_table::for_thread(lists);
  for (size_t leg = 0; leg < lists.size(); ++leg) {
    auto& list = lists[leg];
    add_leg(list, leg, table, [&](int rank, double) { return list.weight / (rrf_k + rank); });
  }
  return ranked(table, lists, k);
}

std::vector<fused_item> convex_fusion(const std::vector<ranked_list>& lists, size_t k) {
  double total_weight = 0;
  for (auto& list : lists)
    total_weight += std::max(list.weight, 0.0);
  auto& table = fusing_table::for_thread(lists);
  for (size_t leg = 0; leg < lists.size(); ++leg) {
    auto& list = lists[leg];
    double best = 0;
    for (auto& [id, score] : list.items)
      if (!list.min_score || score >= *list.min_score)
        best = std::max(best, score);
    double scale =
        best > 0 && total_weight > 0 ? std::max(list.weight, 0.0) / (best * total_weight) : 0.0;
    add_leg(list, leg, table, [&](int, double score) { return std::max(score, 0.0) * scale; });
  }
  return ranked(table, lists, k);
}

std::string_view to_string(fusion_rule rule) {
  return rule == fusion_rule::rrf ? "rrf" : "convex";
}

std::vector<fused_item> fuse(const std::vector<ranked_list>& lists, size_t k, fusion_rule rule) {
  return rule == fusion_rule::rrf ? weighted_rrf(lists, k) : convex_fusion(lists, k);
}

std::vector<weighted_term> rm3_expand(std::string_view query,
                                      const std::vector<std::pair<std::string, double>>& feedback,
                                      size_t expansion_terms, double original_weight) {
  auto qterms = tokenize(query);
  std::map<std::string, double> pq;
  for (auto& t : qterms)
    pq[t] += 1.0 / static_cast<double>(qterms.size());
  // Normalised document weights.
  double total_score = 0;
  for (auto& [text, score] : feedback)
    total_score += std::max(score, 0.0);
  std::map<std::string, double> pr;
  std::map<std::string, int> df;
  for (auto& [text, score] : feedback) {
    auto terms = tokenize(text);
    if (terms.empty())
      continue;
    std::map<std::string, int> tf;
    for (auto& t : terms)
      ++tf[t];
    double dw = total_score > 0 ? std::max(score, 0.0) / total_score
                                : 1.0 / static_cast<double>(feedback.size());
    for (auto& [t, n] : tf) {
      pr[t] += dw * n / static_cast<double>(terms.size());
      ++df[t];
    }
  }
  std::vector<std::pair<std::string, double>> candidates;
  for (auto& [t, p] : pr) {
    if (pq.count(t))
      continue;
    if (feedback.size() >= 3 && df[t] < 2)
      continue;  // a term from one feedback text only is noise
    candidates.emplace_back(t, p);
  }
  std::sort(candidates.begin(), candidates.end(), [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (candidates.size() > expansion_terms)
    candidates.resize(expansion_terms);
  double cand_total = 0;
  for (auto& [t, p] : candidates)
    cand_total += p;
  std::vector<weighted_term> out;
  double expansion_weight = candidates.empty() ? 0 : 1 - original_weight;
  double query_weight = 1 - expansion_weight;
  for (auto& [t, p] : pq)
    out.push_back({t, query_weight * p});
  for (auto& [t, p] : candidates)
    out.push_back({t, expansion_weight * p / cand_total});
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.term < b.term;
  });
  return out;
}

namespace {

std::set<std::string> distinct_terms(std::string_view query) {
  auto terms = tokenize(query);
  return {terms.begin(), terms.end()};
}

// The idf-weighted share of `distinct` that holds(term) finds.
double covered_share(const std::set<std::string>& distinct,
                     const std::function<bool(const std::string&)>& holds,
                     const std::function<double(std::string_view)>& idf) {
  double total = 0, got = 0;
  for (auto& t : distinct) {
    auto w = idf ? std::max(idf(t), 0.0) : 1.0;
    if (w == 0)
      w = 1.0;  // unknown to the index: still counts
    total += w;
    if (holds(t))
      got += w;
  }
  return total > 0 ? got / total : 1.0;
}

}  // namespace

double query_coverage(std::string_view query, const std::function<bool(const std::string&)>& holds,
                      const std::function<double(std::string_view)>& idf) {
  return covered_share(distinct_terms(query), holds, idf);
}

double query_coverage(std::string_view query, const std::vector<std::string>& evidence,
                      const std::function<double(std::string_view)>& idf) {
  auto distinct = distinct_terms(query);
  // The evidence is read only until every term is found (tokenizing a
  // text is most of the cost).
  std::set<std::string> found;
  for (auto& text : evidence) {
    if (found.size() == distinct.size())
      break;
    for (auto& t : tokenize(text))
      if (distinct.count(t))
        found.insert(t);
  }
  return covered_share(
      distinct, [&](const std::string& t) { return found.count(t) > 0; }, idf);
}

}  // namespace ragtor
