#include "retrieval/fusion.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>

#include "retrieval/tokenizer.hpp"

namespace ragtor {

size_t over_retrieve_depth(size_t k) {
  return std::max<size_t>(5 * k, 50);
}

namespace {

// What fusion keeps of an item while the legs are added: the item, the
// leg that added it last (an id a leg lists twice counts once, at its
// first rank) and its best single-leg rank (the first tie-break).
struct fusing {
  fused_item item;  // without its id (the map's key) until it is kept
  size_t last_leg = SIZE_MAX;
  int best_rank = INT32_MAX;
};

// Keyed by views of the legs' ids (the legs outlive fusion).
using fusing_map = std::unordered_map<std::string_view, fusing>;

// Adds leg number `leg`'s surviving items (thresholded, first occurrence
// of an id) to `by_id`, each with its 1-based rank and
// contribution(rank, score).
template <class Contribution>
void add_leg(const ranked_list& list, size_t leg, fusing_map& by_id, Contribution contribution) {
  int rank = 0;
  for (auto& [id, score] : list.items) {
    if (list.min_score && score < *list.min_score)
      continue;
    auto& f = by_id[id];
    if (f.last_leg == leg)
      continue;
    f.last_leg = leg;
    ++rank;
    f.best_rank = std::min(f.best_rank, rank);
    f.item.score += contribution(rank, score);
    f.item.ranks.emplace_back(list.leg, rank);
  }
}

std::vector<fused_item> ranked(fusing_map by_id, size_t k) {
  using entry = fusing_map::value_type;
  std::vector<entry*> order;
  order.reserve(by_id.size());
  for (auto& e : by_id)
    order.push_back(&e);
  auto better = [](const entry* a, const entry* b) {
    if (a->second.item.score != b->second.item.score)
      return a->second.item.score > b->second.item.score;
    if (a->second.best_rank != b->second.best_rank)
      return a->second.best_rank < b->second.best_rank;
    return a->first < b->first;
  };
  auto keep = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    better);
  std::vector<fused_item> out;
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    out.push_back(std::move(order[i]->second.item));
    out.back().id = order[i]->first;
  }
  return out;
}

fusing_map fusing_map_for(const std::vector<ranked_list>& lists) {
  size_t n = 0;
  for (auto& list : lists)
    n += list.items.size();
  fusing_map by_id;
  by_id.reserve(n);
  return by_id;
}

}  // namespace

std::vector<fused_item> weighted_rrf(const std::vector<ranked_list>& lists, size_t k,
                                     double rrf_k) {
  auto by_id = fusing_map_for(lists);
  for (size_t leg = 0; leg < lists.size(); ++leg) {
    auto& list = lists[leg];
    add_leg(list, leg, by_id, [&](int rank, double) { return list.weight / (rrf_k + rank); });
  }
  return ranked(std::move(by_id), k);
}

std::vector<fused_item> convex_fusion(const std::vector<ranked_list>& lists, size_t k) {
  double total_weight = 0;
  for (auto& list : lists)
    total_weight += std::max(list.weight, 0.0);
  auto by_id = fusing_map_for(lists);
  for (size_t leg = 0; leg < lists.size(); ++leg) {
    auto& list = lists[leg];
    double best = 0;
    for (auto& [id, score] : list.items)
      if (!list.min_score || score >= *list.min_score)
        best = std::max(best, score);
    double scale =
        best > 0 && total_weight > 0 ? std::max(list.weight, 0.0) / (best * total_weight) : 0.0;
    add_leg(list, leg, by_id, [&](int, double score) { return std::max(score, 0.0) * scale; });
  }
  return ranked(std::move(by_id), k);
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

double query_coverage(std::string_view query, const std::function<bool(const std::string&)>& holds,
                      const std::function<double(std::string_view)>& idf) {
  auto qterms = tokenize(query);
  std::set<std::string> distinct{qterms.begin(), qterms.end()};
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

double query_coverage(std::string_view query, const std::vector<std::string>& evidence,
                      const std::function<double(std::string_view)>& idf) {
  auto qterms = tokenize(query);
  std::set<std::string> distinct{qterms.begin(), qterms.end()};
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
  return query_coverage(
      query, [&](const std::string& t) { return found.count(t) > 0; }, idf);
}

}  // namespace ragtor
