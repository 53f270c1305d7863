// An immutable in-memory BM25 index over chunks (title + text). Top-k is
// scored term at a time into an accumulator per chunk (search_terms in
// bm25_index.cpp says why not MaxScore); it returns exactly what
// exhaustive scoring returns (ties: smaller chunk index first).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/document.hpp"

namespace ragtor {

// The set of letters a term holds, one bit per letter a-z and six more
// for every other byte (by value modulo six). One edit (insert, delete,
// substitute, swap two neighbours) changes at most two bits of it, so two
// terms whose sets differ in more than 2d bits are more than d edits apart.
uint32_t letter_set(std::string_view term);

struct bm25_params {
  double k1 = 0.9;
  double b = 0.4;
};

class bm25_index {
public:
  using params = bm25_params;

  using hit = std::pair<uint32_t, double>;  // chunk index, score

  // Indexes tokenize(title + "\n" + text) of every chunk; the title is
  // repeated in each chunk of a document so a title match finds them all.
  // idf = ln(1 + (N - df + 0.5) / (df + 0.5)), never negative.
  static bm25_index build(const std::vector<chunk>& chunks, params p = {});
  // Incremental: chunk i with previous_row[i] >= 0 has the same text as
  // that row of `previous` and takes its terms from there; only the others
  // are tokenized. Equal to build(chunks, p), term for term in the same
  // order. When the chunks are `previous`'s rows in order then new ones
  // (an ingest of new documents), its postings are copied and the new
  // rows added to them.
  static bm25_index build(const std::vector<chunk>& chunks, params p, const bm25_index& previous,
                          const std::vector<int64_t>& previous_row);

  // The k best chunks for `query` (chunk index, score), best first, ties
  // by smaller index; only chunks sharing a term with the query.
  std::vector<hit> search(std::string_view query, size_t k) const;
  // The same result by scoring every posting: the reference for tests.
  std::vector<hit> search_exhaustive(std::string_view query, size_t k) const;

  // The same for already-tokenized index terms with weights (e.g. an RM3
  // expanded query); still exact.
  std::vector<hit> search_terms(const std::vector<std::pair<std::string, double>>& weighted_terms,
                                size_t k) const;

  // idf of an index term (0 when unknown) and the approximate heap size.
  double idf(std::string_view term) const;
  // Whether `term` (an index term) occurs in some chunk, and in how many.
  bool has_term(std::string_view term) const { return document_frequency(term) > 0; }
  size_t document_frequency(std::string_view term) const;
  // The chunks `term` occurs in (ascending) and how often in each (title
  // and text); empty when no chunk holds it.
  struct term_postings {
    std::span<const uint32_t> chunks, frequencies;
    // How often the term occurs in `chunk` (0 when it does not): a
    // binary search.
    uint32_t frequency_in(uint32_t chunk) const;
  };
  term_postings postings_of(std::string_view term) const;
  uint32_t term_frequency(std::string_view term, uint32_t chunk) const {
    return postings_of(term).frequency_in(chunk);
  }
  // Calls visit(term, document frequency) for every index term, in no
  // particular order.
  template <class Visitor>
  void visit_vocabulary(Visitor&& visit) const {
    for (auto& [term, pl] : postings_)
      visit(std::string_view{term}, pl.docs.size());
  }

  // Calls visit(term, chunks, term frequencies) for every index term's
  // postings (chunks ascending, one frequency each), in no particular
  // order.
  template <class Visitor>
  void visit_postings(Visitor&& visit) const {
    for (auto& [term, pl] : postings_)
      visit(std::string_view{term}, pl.docs, pl.tfs);
  }

  // The index terms of one length (in bytes), with each one's letters
  // (letter_set) and document frequency: what typo expansion scans
  // (typo_expansion.hpp). Term i is terms.substr(i * length, length).
  struct terms_of_length {
    std::string terms;
    std::vector<uint32_t> letters;
    std::vector<uint32_t> df;
    size_t size() const { return df.size(); }
  };
  // Null when no index term has that length.
  const terms_of_length* terms_with_length(size_t length) const {
    return length < by_length_.size() && by_length_[length].size() ? &by_length_[length]
                                                                     : nullptr;
  }
  size_t memory_bytes() const;

  // A binary snapshot (see binary_io.hpp) and back; nullopt for a
  // truncated, corrupt or foreign snapshot.
  std::string serialize() const;
  static std::optional<bm25_index> deserialize(std::string_view data);

  // Number of indexed chunks.
  size_t size() const { return doc_len_.size(); }

private:
  struct posting_list {
    std::vector<uint32_t> docs;  // ascending
    std::vector<uint32_t> tfs;
    double idf = 0;
  };
  struct query_term {
    const posting_list* list;
    double weight;     // query term multiplicity
  };

  std::vector<query_term> query_terms(std::string_view query) const;
  std::vector<query_term> weighted_query_terms(const std::map<std::string, double>& counts) const;
  std::vector<hit> search_terms(const std::vector<query_term>& terms, size_t k) const;
  double term_score(const posting_list& pl, size_t pos, double weight) const;
  using term_counts = std::vector<std::pair<std::string, uint32_t>>;  // sorted by term
  static bm25_index from_counts(std::vector<term_counts> rows, params p);
  void index_vocabulary();  // fills by_length_ from postings_

  params params_;
  std::unordered_map<std::string, posting_list> postings_;
  // Whether postings_ is laid out as a build from nothing leaves it (the
  // same terms entered in the same order: the same iteration order), so
  // that a copy of it with new rows' terms entered after is too. A
  // snapshot read enters its terms in a build's order.
  bool built_order_ = false;
  std::vector<terms_of_length> by_length_;  // indexed by length
  std::vector<uint32_t> doc_len_;
  double avg_len_ = 0;
  // Per chunk, k1 * (1 - b + b * length / average length): the part of
  // every term's score that depends on the chunk alone (norms()).
  std::vector<double> norm_;
  void norms();
};

}  // namespace ragtor
