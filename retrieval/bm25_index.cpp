#include "retrieval/bm25_index.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

#include "retrieval/binary_io.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

// Orders hits best first; ties by smaller index.
bool better(const bm25_index::hit& a, const bm25_index::hit& b) {
  return a.second > b.second || (a.second == b.second && a.first < b.first);
}

// Min-heap of the current top k (worst on top).
class top_k {
public:
  explicit top_k(size_t k) : k_(k) {}
  void offer(uint32_t doc, double score) {
    if (k_ == 0)
      return;
    if (heap_.size() < k_) {
      heap_.push_back({doc, score});
      std::push_heap(heap_.begin(), heap_.end(), better);
    } else if (better({doc, score}, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), better);
      heap_.back() = {doc, score};
      std::push_heap(heap_.begin(), heap_.end(), better);
    }
  }
  // A later (higher-index) document needs a score above this to enter;
  // -1 until the heap is full (BM25 scores are never negative).
  double threshold() const { return heap_.size() < k_ ? -1.0 : heap_.front().second; }
  std::vector<bm25_index::hit> sorted() {
    std::sort(heap_.begin(), heap_.end(), better);
    return std::move(heap_);
  }

private:
  size_t k_;
  std::vector<bm25_index::hit> heap_;
};

}  // namespace

namespace {

std::vector<std::pair<std::string, uint32_t>> counts_of(const chunk& c, uint64_t& length) {
  auto terms = tokenize(c.title + "\n" + c.text);
  length = terms.size();
  std::map<std::string, uint32_t> tf;
  for (auto& t : terms)
    ++tf[t];
  return {tf.begin(), tf.end()};
}

}  // namespace

bm25_index bm25_index::build(const std::vector<chunk>& chunks, params p) {
  return build(chunks, p, bm25_index{}, std::vector<int64_t>(chunks.size(), -1));
}

bm25_index bm25_index::build(const std::vector<chunk>& chunks, params p, const bm25_index& previous,
                             const std::vector<int64_t>& previous_row) {
  // The previous index turned around: its rows' terms, from the postings
  // (much cheaper than tokenizing the text again).
  std::vector<term_counts> forward;
  bool reuse = std::any_of(previous_row.begin(), previous_row.end(),
                           [&](int64_t r) { return r >= 0 && size_t(r) < previous.size(); });
  if (reuse) {
    forward.resize(previous.size());
    for (auto& [term, pl] : previous.postings_)
      for (size_t i = 0; i < pl.docs.size(); ++i)
        forward[pl.docs[i]].emplace_back(term, pl.tfs[i]);
    for (auto& row : forward)
      std::sort(row.begin(), row.end());
  }
  std::vector<term_counts> rows(chunks.size());
  std::vector<uint32_t> lengths(chunks.size());
  for (size_t d = 0; d < chunks.size(); ++d) {
    auto r = d < previous_row.size() ? previous_row[d] : -1;
    if (reuse && r >= 0 && size_t(r) < forward.size()) {
      rows[d] = forward[size_t(r)];
      lengths[d] = previous.doc_len_[size_t(r)];
    } else {
      uint64_t len = 0;
      rows[d] = counts_of(chunks[d], len);
      lengths[d] = static_cast<uint32_t>(len);
    }
  }
  auto idx = from_counts(std::move(rows), p);
  idx.doc_len_ = std::move(lengths);
  uint64_t total = 0;
  for (auto l : idx.doc_len_)
    total += l;
  idx.avg_len_ = chunks.empty() ? 1.0 : std::max(1.0, double(total) / double(chunks.size()));
  idx.norms();
  double n = static_cast<double>(chunks.size());
  for (auto& [term, pl] : idx.postings_) {
    double df = static_cast<double>(pl.docs.size());
    pl.idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
    double ub = 0;
    for (size_t i = 0; i < pl.docs.size(); ++i)
      ub = std::max(ub, idx.term_score(pl, i, 1.0));
    pl.upper_bound = ub;
  }
  return idx;
}

// Postings from per-row term counts (rows in order: postings ascending).
bm25_index bm25_index::from_counts(std::vector<term_counts> rows, params p) {
  bm25_index idx;
  idx.params_ = p;
  for (uint32_t d = 0; d < rows.size(); ++d)
    for (auto& [term, n] : rows[d]) {
      auto& pl = idx.postings_[term];
      pl.docs.push_back(d);
      pl.tfs.push_back(n);
    }
  idx.index_vocabulary();
  return idx;
}

uint32_t letter_set(std::string_view term) {
  uint32_t set = 0;
  for (unsigned char c : term)
    set |= c >= 'a' && c <= 'z' ? 1u << (c - 'a') : 1u << (26 + c % 6);
  return set;
}

void bm25_index::index_vocabulary() {
  by_length_.clear();
  for (auto& [term, pl] : postings_) {
    if (term.size() >= by_length_.size())
      by_length_.resize(term.size() + 1);
    auto& bucket = by_length_[term.size()];
    bucket.terms += term;
    bucket.letters.push_back(letter_set(term));
    bucket.df.push_back(static_cast<uint32_t>(pl.docs.size()));
  }
}

void bm25_index::norms() {
  norm_.resize(doc_len_.size());
  for (size_t d = 0; d < doc_len_.size(); ++d) {
    double len = doc_len_[d];
    norm_[d] = params_.k1 * (1.0 - params_.b + params_.b * len / avg_len_);
  }
}

double bm25_index::term_score(const posting_list& pl, size_t pos, double weight) const {
  double tf = pl.tfs[pos];
  return weight * pl.idf * tf * (params_.k1 + 1.0) / (tf + norm_[pl.docs[pos]]);
}

std::vector<bm25_index::query_term> bm25_index::query_terms(std::string_view query) const {
  std::map<std::string, double> counts;
  for (auto& t : tokenize(query))
    counts[t] += 1.0;
  return weighted_query_terms(counts);
}

std::vector<bm25_index::query_term> bm25_index::weighted_query_terms(
    const std::map<std::string, double>& counts) const {
  std::vector<query_term> out;
  for (auto& [term, w] : counts)
    if (auto i = postings_.find(term); i != postings_.end())
      out.push_back({&i->second, w, out.size()});
  return out;
}

std::vector<bm25_index::hit> bm25_index::search_exhaustive(std::string_view query, size_t k) const {
  std::vector<double> scores(doc_len_.size(), 0.0);
  std::vector<bool> seen(doc_len_.size(), false);
  for (auto& qt : query_terms(query))
    for (size_t i = 0; i < qt.list->docs.size(); ++i) {
      scores[qt.list->docs[i]] += term_score(*qt.list, i, qt.weight);
      seen[qt.list->docs[i]] = true;
    }
  top_k top{k};
  for (uint32_t d = 0; d < scores.size(); ++d)
    if (seen[d])
      top.offer(d, scores[d]);
  return top.sorted();
}

double bm25_index::idf(std::string_view term) const {
  auto i = postings_.find(std::string{term});
  return i == postings_.end() ? 0.0 : i->second.idf;
}

size_t bm25_index::document_frequency(std::string_view term) const {
  auto i = postings_.find(std::string{term});
  return i == postings_.end() ? 0 : i->second.docs.size();
}

size_t bm25_index::memory_bytes() const {
  size_t bytes = doc_len_.capacity() * sizeof(uint32_t) + norm_.capacity() * sizeof(double);
  for (auto& [term, pl] : postings_)
    bytes += term.capacity() + sizeof(pl) + 48 + (pl.docs.capacity() + pl.tfs.capacity()) * 4;
  for (auto& b : by_length_)
    bytes += sizeof(b) + b.terms.capacity() + (b.letters.capacity() + b.df.capacity()) * 4;
  return bytes;
}

std::vector<bm25_index::hit> bm25_index::search(std::string_view query, size_t k) const {
  return search_terms(query_terms(query), k);
}

std::vector<bm25_index::hit> bm25_index::search_terms(
    const std::vector<std::pair<std::string, double>>& weighted_terms, size_t k) const {
  std::map<std::string, double> counts;
  for (auto& [t, w] : weighted_terms)
    if (w > 0)
      counts[t] += w;
  return search_terms(weighted_query_terms(counts), k);
}

std::vector<bm25_index::hit> bm25_index::search_terms(std::vector<query_term> terms,
                                                      size_t k) const {
  if (terms.empty() || k == 0)
    return {};
  // Ascending upper bound: terms [0, first_essential) are non-essential.
  std::sort(terms.begin(), terms.end(), [](const query_term& a, const query_term& b) {
    return a.list->upper_bound * a.weight < b.list->upper_bound * b.weight;
  });
  size_t n = terms.size();
  std::vector<double> prefix_ub(n + 1, 0.0);  // sum of bounds of terms [0, i)
  for (size_t i = 0; i < n; ++i)
    prefix_ub[i + 1] = prefix_ub[i] + terms[i].list->upper_bound * terms[i].weight;
  // Each term's place in its postings, by pointer: the loop below reads
  // a term's next document without going through its list.
  struct cursor {
    const posting_list* list;
    const uint32_t* at;
    const uint32_t* end;
    double weight;
    size_t canonical;
    uint32_t doc() const { return at < end ? *at : UINT32_MAX; }
    size_t pos() const { return static_cast<size_t>(at - list->docs.data()); }
  };
  std::vector<cursor> cur;
  cur.reserve(n);
  for (auto& t : terms)
    cur.push_back({t.list, t.list->docs.data(), t.list->docs.data() + t.list->docs.size(), t.weight,
                   t.canonical});
  std::vector<double> contrib(n, 0.0);
  top_k top{k};
  size_t first_essential = 0;
  constexpr uint32_t end = UINT32_MAX;
  // True when a document whose score is at most `bound` cannot enter the
  // top k. A tie cannot enter either: candidates arrive in ascending index
  // order and ties go to the smaller index. The bound is inflated a little
  // because it is summed in a different order (and with the query weight
  // applied differently) than the exact score, which may differ in the
  // last bits; pruning must never drop a document exhaustive scoring keeps.
  auto cannot_enter = [&](double bound) { return bound * (1.0 + 1e-9) <= top.threshold(); };
  for (;;) {
    // Next candidate: the smallest doc among essential lists.
    uint32_t doc = end;
    for (size_t t = first_essential; t < n; ++t)
      doc = std::min(doc, cur[t].doc());
    if (doc == end)
      break;
    std::fill(contrib.begin(), contrib.end(), 0.0);
    double score = 0;
    for (size_t t = first_essential; t < n; ++t)
      if (cur[t].doc() == doc) {
        auto s = term_score(*cur[t].list, cur[t].pos(), cur[t].weight);
        contrib[cur[t].canonical] = s;
        score += s;
        ++cur[t].at;
      }
    // Non-essential terms, highest bound first, while they could matter.
    bool complete = true;
    for (size_t t = first_essential; t-- > 0;) {
      if (cannot_enter(score + prefix_ub[t + 1])) {
        complete = false;
        break;
      }
      cur[t].at = std::lower_bound(cur[t].at, cur[t].end, doc);
      if (cur[t].doc() == doc) {
        auto s = term_score(*cur[t].list, cur[t].pos(), cur[t].weight);
        contrib[cur[t].canonical] = s;
        score += s;
      }
    }
    if (complete) {
      // Sum in canonical order so scores equal exhaustive scoring bit for bit.
      double exact = 0;
      for (auto c : contrib)
        exact += c;
      top.offer(doc, exact);
    }
    // Grow the non-essential set while its bounds cannot reach the top k.
    while (first_essential < n && cannot_enter(prefix_ub[first_essential + 1]))
      ++first_essential;
  }
  return top.sorted();
}

namespace {
constexpr uint64_t bm25_magic = 0x3135324d42475452ull;  // "RTGBM251"
}  // namespace

std::string bm25_index::serialize() const {
  binary::writer w;
  w.put(bm25_magic);
  w.put(params_.k1);
  w.put(params_.b);
  w.put(avg_len_);
  w.put_array(doc_len_);
  w.put<uint64_t>(postings_.size());
  for (auto& [term, pl] : postings_) {
    w.put_string(term);
    w.put(pl.idf);
    w.put(pl.upper_bound);
    w.put_array(pl.docs);
    w.put_array(pl.tfs);
  }
  return w.finish();
}

std::optional<bm25_index> bm25_index::deserialize(std::string_view data) {
  binary::reader r{data};
  uint64_t magic = 0, terms = 0;
  bm25_index idx;
  if (!r.get(magic) || magic != bm25_magic || !r.get(idx.params_.k1) || !r.get(idx.params_.b)
      || !r.get(idx.avg_len_) || !r.get_array(idx.doc_len_) || !r.get(terms))
    return std::nullopt;
  idx.postings_.reserve(terms);
  for (uint64_t i = 0; i < terms; ++i) {
    std::string term;
    posting_list pl;
    if (!r.get_string(term) || !r.get(pl.idf) || !r.get(pl.upper_bound) || !r.get_array(pl.docs)
        || !r.get_array(pl.tfs) || pl.docs.size() != pl.tfs.size())
      return std::nullopt;
    for (auto d : pl.docs)
      if (d >= idx.doc_len_.size())
        return std::nullopt;
    idx.postings_.emplace(std::move(term), std::move(pl));
  }
  if (!r.at_end())
    return std::nullopt;
  idx.norms();
  idx.index_vocabulary();
  return idx;
}

}  // namespace ragtor
