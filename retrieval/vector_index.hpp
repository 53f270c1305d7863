// Cosine-similarity search over chunk embeddings (DESIGN §6): exact
// (a brute-force dot-product scan, which is fastest and exact for small
// KBs) below `exact_below` vectors, an HNSW graph (hnswlib) above. Immutable
// once built; search() may run concurrently from many threads.
//
// The exact index keeps its vectors by dimension (column by column), so a
// query reads only the dimensions it is not zero in: a hashed embedder's
// query (a few dozen features in 256 dimensions) reads about a third of
// the index instead of all of it. Its scores are bit for bit those of a
// row-by-row scan: each row's products are summed in the same eight
// lanes (dimension d in lane d % 8), in the same order, and the lanes
// then pairwise, then the dimensions past the last multiple of eight.
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
  size_t exact_below = 20000;
  size_t hnsw_m = 16;
  size_t ef_construction = 200;
  size_t ef_search = 128;
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
  // Row `i`'s vector (a copy).
  std::vector<float> row(size_t i) const;
  size_t dims() const { return dims_; }
  bool uses_hnsw() const { return hnsw_ != nullptr; }
  size_t memory_bytes() const;

private:
  struct hnsw;
  std::vector<hit> exact_search(std::span<const float> query, size_t k) const;

  std::vector<float> rows_;     // row by row, with an HNSW graph
  std::vector<float> columns_;  // dimension by dimension, without one
  size_t dims_ = 0;
  std::unique_ptr<hnsw> hnsw_;
  bool graph_loaded_ = false;
};

}  // namespace ragtor
