// Cosine-similarity search over chunk embeddings (DESIGN §6): exact
// (a brute-force dot-product scan) below `exact_below` vectors of 256
// dimensions (fewer of more: the scan reads rows × dimensions), an HNSW
// graph (hnswlib) above. Immutable once built; search() may run
// concurrently from many threads.
//
// The exact index keeps its vectors by dimension (column by column), so a
// query reads only the dimensions it is not zero in: a hashed embedder's
// query (a few dozen features in 256 dimensions) reads about a third of
// the index instead of all of it. Its scores are bit for bit those of a
// row-by-row scan: each row's products are summed in the same eight
// lanes (dimension d in lane d % 8), in the same order, and the lanes
// then pairwise, then the dimensions past the last multiple of eight.
//
// Where the processor converts half-precision floats (F16C, with AVX2
// and FMA), the exact index scans a half-precision copy of its columns
// instead, half the bytes, and then scores exactly, from its rows, every
// row whose approximate score could place it among the k best: those
// within twice a bound on the approximation's error of the k-th best
// approximate score. The results are the same rows with the same scores,
// bit for bit, as the full-precision scan's. An HNSW index keeps the same
// copy to answer a query for more rows than its ef exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ragtor {

// The dot product of two rows of n floats as the index computes it: eight
// lanes (element i in lane i % 8), summed pairwise, then the elements
// past the last multiple of eight. The exact search's scores equal it bit
// for bit.
float row_dot(const float* a, const float* b, size_t n);

struct vector_index_options {
  // Rows of 256 dimensions below which search is exact: an index of n
  // rows of D dimensions is exact while n·D/256 < exact_below. With the
  // hashed embedder the exact scan was faster than HNSW up to 100,000
  // rows (as fast there), and exact, where HNSW found 0.50-0.73 of the
  // exact 100 and took 5-82 s to build (bench_retrieval_eval --vector-scale; see
  // docs/performance.md, "Exact vectors up to 100,000 chunks").
  size_t exact_below = 100000;
  size_t hnsw_m = 16;
  size_t ef_construction = 200;
  size_t ef_search = 128;
  // From this many rows the exact index scans in half precision first
  // (above); below it, or without F16C, the columns are scanned in full
  // precision. Same results either way; below ~4,000 rows the exact
  // scoring of the candidates costs more than the bytes saved
  // (bench_retrieval_eval --vector-scale). SIZE_MAX: never.
  size_t half_precision_from = 4096;
};

class vector_index {
public:
  using hit = std::pair<uint32_t, float>;  // row, cosine similarity

  vector_index();
  ~vector_index();
  vector_index(vector_index&&) noexcept;
  vector_index& operator=(vector_index&&) noexcept;

  // `rows`: n vectors of `dims` floats, L2-normalised.
  static vector_index build(std::vector<float> rows, size_t dims, vector_index_options opts = {});
  // The same, reusing `saved_graph` (graph_bytes() of an index over the
  // same rows and options) instead of building the HNSW graph again; a
  // graph that does not fit is ignored and built anew.
  static vector_index build(std::vector<float> rows, size_t dims, vector_index_options opts,
                            std::string_view saved_graph);
  // The HNSW graph serialised ("" for an exact index).
  std::string graph_bytes() const;
  bool graph_loaded() const { return graph_loaded_; }

  // The k most similar rows, best first (ties: smaller row first).
  std::vector<hit> search(std::span<const float> query, size_t k) const;

  size_t size() const { return dims_ ? (rows_.size() + columns_.size()) / dims_ : 0; }
  // Whether n rows of `dims` dimensions get an HNSW graph under `opts`.
  static bool graph_for(size_t n, size_t dims, const vector_index_options& opts);
  // Whether the exact index scans in half precision first, and whether
  // this processor can.
  bool scans_half_precision() const { return !half_columns_.empty(); }
  static bool half_precision_available();
  // Row `i`'s vector (a copy), into `out` (dims() floats).
  std::vector<float> row(size_t i) const;
  void copy_row(size_t i, float* out) const;
  // Every row, row by row (the vectors build() was given).
  std::vector<float> rows() const;
  size_t dims() const { return dims_; }
  bool uses_hnsw() const { return hnsw_ != nullptr; }
  // Whether search(query, k) ranks every row exactly (ties by the smaller
  // row), so that its first n hits are search(query, n): not when an HNSW
  // graph answers (k at most its ef).
  bool ranks_exactly(size_t k) const;
  size_t memory_bytes() const;

private:
  struct hnsw;
  std::vector<hit> exact_search(std::span<const float> query, size_t k) const;
  std::vector<hit> half_precision_search(std::span<const float> query, size_t k) const;
  std::vector<hit> row_by_row(std::span<const float> query, size_t k) const;
  static bool half_precision_for(size_t n, const std::vector<float>& rows,
                                 const vector_index_options& opts);
  void add_half_precision();

  std::vector<float> rows_;     // row by row: with an HNSW graph or half_columns_
  std::vector<float> columns_;  // dimension by dimension, without either
  std::vector<uint16_t> half_columns_;  // rows_ by dimension, in half precision
  double max_row_norm_ = 0;             // the largest row's L2 norm (half_columns_)
  size_t dims_ = 0;
  std::unique_ptr<hnsw> hnsw_;
  bool graph_loaded_ = false;
};

}  // namespace ragtor
