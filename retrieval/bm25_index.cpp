#include "retrieval/bm25_index.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <span>

#include "retrieval/binary_io.hpp"
#include "retrieval/sparse_scores.hpp"
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
  auto reused = [&](size_t d) {
    auto r = d < previous_row.size() ? previous_row[d] : -1;
    return r >= 0 && size_t(r) < previous.size() ? r : int64_t{-1};
  };
  std::vector<uint32_t> lengths(chunks.size());
  bool reuse = false;
  for (size_t d = 0; d < chunks.size() && !reuse; ++d)
    reuse = reused(d) >= 0;
  // Previous's rows in order, then new ones.
  bool appended = previous.built_order_ && previous.size() > 0 && previous.size() <= chunks.size();
  for (size_t d = 0; d < previous.size() && appended; ++d)
    appended = reused(d) == static_cast<int64_t>(d);
  bm25_index idx;
  if (appended) {
    // A build from nothing enters previous's terms in the same order,
    // then the new rows' terms after them.
    idx.params_ = p;
    idx.postings_ = previous.postings_;
    std::copy(previous.doc_len_.begin(), previous.doc_len_.end(), lengths.begin());
    for (auto d = static_cast<uint32_t>(previous.size()); d < chunks.size(); ++d) {
      uint64_t len = 0;
      for (auto& [term, n] : counts_of(chunks[d], len)) {
        auto& pl = idx.postings_[term];
        pl.docs.push_back(d);
        pl.tfs.push_back(n);
      }
      lengths[d] = static_cast<uint32_t>(len);
    }
    idx.index_vocabulary();
  } else if (!reuse) {
    std::vector<term_counts> rows(chunks.size());
    for (size_t d = 0; d < chunks.size(); ++d) {
      uint64_t len = 0;
      rows[d] = counts_of(chunks[d], len);
      lengths[d] = static_cast<uint32_t>(len);
    }
    idx = from_counts(std::move(rows), p);
  } else {
    // The previous index turned around: its rows' terms from its
    // postings (much cheaper than tokenizing the text again), each term
    // by its place in the previous vocabulary sorted, so that appending
    // the terms in that order leaves every row sorted by term.
    std::vector<const std::pair<const std::string, posting_list>*> vocabulary;
    vocabulary.reserve(previous.postings_.size());
    for (auto& entry : previous.postings_)
      vocabulary.push_back(&entry);
    std::sort(vocabulary.begin(), vocabulary.end(),
              [](auto* a, auto* b) { return a->first < b->first; });
    // Each previous row's (term, count) pairs in one array, row r's at
    // forward[start[r]..start[r + 1]): counted, then placed.
    std::vector<uint32_t> start(previous.size() + 1, 0);
    for (auto* entry : vocabulary)
      for (auto d : entry->second.docs)
        ++start[d + 1];
    for (size_t r = 0; r < previous.size(); ++r)
      start[r + 1] += start[r];
    std::vector<std::pair<uint32_t, uint32_t>> forward(start.back());
    {
      std::vector<uint32_t> next(start.begin(), start.end() - 1);
      for (uint32_t t = 0; t < vocabulary.size(); ++t) {
        auto& pl = vocabulary[t]->second;
        for (size_t i = 0; i < pl.docs.size(); ++i)
          forward[next[pl.docs[i]]++] = {t, pl.tfs[i]};
      }
    }
    auto row_terms = [&](int64_t r) {
      return std::span{forward}.subspan(start[size_t(r)], start[size_t(r) + 1] - start[size_t(r)]);
    };
    // How many reused rows hold each previous term: its list's room.
    std::vector<uint32_t> reused_df(vocabulary.size(), 0);
    for (uint32_t d = 0; d < chunks.size(); ++d)
      if (auto r = reused(d); r >= 0)
        for (auto [t, n] : row_terms(r))
          ++reused_df[t];
    // Postings as from_counts builds them (terms entered in the order
    // they are first met, row by row), a previous term's list found
    // once.
    idx.params_ = p;
    std::vector<posting_list*> list_of(vocabulary.size(), nullptr);
    auto add = [](posting_list& pl, uint32_t d, uint32_t n) {
      pl.docs.push_back(d);
      pl.tfs.push_back(n);
    };
    for (uint32_t d = 0; d < chunks.size(); ++d) {
      if (auto r = reused(d); r >= 0) {
        for (auto [t, n] : row_terms(r)) {
          auto*& pl = list_of[t];
          if (!pl) {
            pl = &idx.postings_[vocabulary[t]->first];
            pl->docs.reserve(reused_df[t]);
            pl->tfs.reserve(reused_df[t]);
          }
          add(*pl, d, n);
        }
        lengths[d] = previous.doc_len_[size_t(r)];
      } else {
        uint64_t len = 0;
        for (auto& [term, n] : counts_of(chunks[d], len))
          add(idx.postings_[term], d, n);
        lengths[d] = static_cast<uint32_t>(len);
      }
    }
    idx.index_vocabulary();
  }
  idx.built_order_ = true;
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
      out.push_back({&i->second, w});
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

bm25_index::term_postings bm25_index::postings_of(std::string_view term) const {
  auto i = postings_.find(std::string{term});
  if (i == postings_.end())
    return {};
  return {i->second.docs, i->second.tfs};
}

uint32_t bm25_index::term_postings::frequency_in(uint32_t chunk) const {
  auto at = std::lower_bound(chunks.begin(), chunks.end(), chunk);
  return at != chunks.end() && *at == chunk ? frequencies[size_t(at - chunks.begin())] : 0;
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

// Term at a time: each term's postings add its score to an accumulator
// per chunk, in the terms' canonical order (so every score equals
// exhaustive scoring bit for bit), and the touched chunks compete for the
// top k. Every posting of every query term is read, once, in a loop
// without branches on other terms; MaxScore (document at a time,
// skipping what cannot reach the top k) read fewer postings but cost
// more per posting, and was slower on every query set measured
// (docs/performance.md, "Search on a real KB").
std::vector<bm25_index::hit> bm25_index::search_terms(const std::vector<query_term>& terms,
                                                      size_t k) const {
  if (terms.empty() || k == 0)
    return {};
  auto& scores = sparse_scores::for_thread(doc_len_.size());
  for (auto& t : terms) {
    auto& pl = *t.list;
    for (size_t i = 0; i < pl.docs.size(); ++i)
      scores.add(pl.docs[i], term_score(pl, i, t.weight));
  }
  top_k top{k};
  scores.drain([&](uint32_t d, double score) { top.offer(d, score); });
  return top.sorted();
}

namespace {
// "RTGBM252" (RTGBM251 also stored each term's score upper bound, which
// MaxScore used: such a snapshot is not read, and the index is rebuilt).
constexpr uint64_t bm25_magic = 0x3235324d42475452ull;
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
  std::vector<std::pair<std::string, posting_list>> read;
  read.reserve(std::min<uint64_t>(terms, data.size() / 32));
  for (uint64_t i = 0; i < terms; ++i) {
    std::string term;
    posting_list pl;
    if (!r.get_string(term) || !r.get(pl.idf) || !r.get_array(pl.docs) || !r.get_array(pl.tfs)
        || pl.docs.size() != pl.tfs.size() || pl.docs.empty())
      return std::nullopt;
    for (auto d : pl.docs)
      if (d >= idx.doc_len_.size())
        return std::nullopt;
    read.emplace_back(std::move(term), std::move(pl));
  }
  if (!r.at_end())
    return std::nullopt;
  // Entered as a build enters them, each term at its first row, a row's
  // terms in order, so that the map is laid out as the build's was.
  std::sort(read.begin(), read.end(), [](auto& a, auto& b) {
    return a.second.docs[0] != b.second.docs[0] ? a.second.docs[0] < b.second.docs[0]
                                                : a.first < b.first;
  });
  for (auto& [term, pl] : read)
    idx.postings_.emplace(std::move(term), std::move(pl));
  idx.built_order_ = true;
  idx.norms();
  idx.index_vocabulary();
  return idx;
}

}  // namespace ragtor
