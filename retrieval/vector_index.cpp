#include "retrieval/vector_index.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <unistd.h>

#include <hnswlib/hnswlib.h>

namespace ragtor {

namespace {

// Eight independent partial sums: without -ffast-math the compiler may
// not reorder one float sum, but it vectorises eight.
float dot(const float* a, const float* b, size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j)
      acc[j] += a[i + j] * b[i + j];
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

}  // namespace

struct vector_index::hnsw {
  hnswlib::InnerProductSpace space;
  hnswlib::HierarchicalNSW<float> graph;
  size_t ef;
  hnsw(size_t dims, size_t n, const vector_index_options& o)
      : space(dims), graph(&space, n, o.hnsw_m, o.ef_construction, 42), ef(o.ef_search) {}
  // A graph saved with saveIndex(). Loaded in the constructor: when that
  // throws (a corrupt file) no half-loaded graph is ever destroyed.
  hnsw(size_t dims, const std::string& file, const vector_index_options& o)
      : space(dims), graph(&space, file), ef(o.ef_search) {}
};

namespace {

// hnswlib saves and loads through files only: a private scratch file.
std::filesystem::path scratch_file() {
  static std::atomic<uint64_t> counter{0};
  return std::filesystem::temp_directory_path()
         / ("ragtor-hnsw-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

}  // namespace

vector_index::vector_index() = default;
vector_index::~vector_index() = default;
vector_index::vector_index(vector_index&&) noexcept = default;
vector_index& vector_index::operator=(vector_index&&) noexcept = default;

vector_index vector_index::build(std::vector<float> rows, size_t dims, vector_index_options opts) {
  vector_index idx;
  idx.dims_ = dims;
  idx.rows_ = std::move(rows);
  auto n = idx.size();
  if (n >= opts.exact_below && n > 0) {
    idx.hnsw_ = std::make_unique<hnsw>(dims, n, opts);
    idx.hnsw_->graph.setEf(opts.ef_search);
    for (size_t i = 0; i < n; ++i)
      idx.hnsw_->graph.addPoint(idx.rows_.data() + i * dims, i);
  }
  return idx;
}

vector_index vector_index::build(std::vector<float> rows, size_t dims, vector_index_options opts,
                                 std::string_view saved_graph) {
  auto n = dims ? rows.size() / dims : 0;
  if (saved_graph.empty() || n < opts.exact_below || n == 0)
    return build(std::move(rows), dims, opts);
  vector_index idx;
  idx.dims_ = dims;
  idx.rows_ = std::move(rows);
  auto file = scratch_file();
  try {
    {
      std::ofstream out{file, std::ios::binary};
      out.write(saved_graph.data(), static_cast<std::streamsize>(saved_graph.size()));
      if (!out)
        throw std::runtime_error("cannot write " + file.string());
    }
    auto h = std::make_unique<hnsw>(dims, file.string(), opts);
    if (h->graph.cur_element_count != n)
      throw std::runtime_error("the saved graph has another size");
    h->graph.setEf(opts.ef_search);
    idx.hnsw_ = std::move(h);
    idx.graph_loaded_ = true;
  } catch (const std::exception&) {
    idx.hnsw_.reset();
  }
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  if (!idx.hnsw_)
    return build(std::move(idx.rows_), dims, opts);
  return idx;
}

std::string vector_index::graph_bytes() const {
  if (!hnsw_)
    return {};
  auto file = scratch_file();
  std::string bytes;
  try {
    hnsw_->graph.saveIndex(file.string());
    std::ifstream in{file, std::ios::binary};
    bytes.assign(std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{});
  } catch (const std::exception&) {
    bytes.clear();
  }
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  return bytes;
}

std::vector<vector_index::hit> vector_index::search(std::span<const float> query, size_t k) const {
  std::vector<hit> out;
  auto n = size();
  if (k == 0 || n == 0 || query.size() != dims_)
    return out;
  if (hnsw_ && k <= hnsw_->ef) {
    auto pq = hnsw_->graph.searchKnn(query.data(), k);
    while (!pq.empty()) {
      auto [dist, label] = pq.top();
      pq.pop();
      out.emplace_back(static_cast<uint32_t>(label), 1.f - dist);
    }
    std::sort(out.begin(), out.end(), [](const hit& a, const hit& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return out;
  }
  out.reserve(n);
  const float* row = rows_.data();
  for (size_t i = 0; i < n; ++i, row += dims_)
    out.emplace_back(static_cast<uint32_t>(i), dot(row, query.data(), dims_));
  auto better = [](const hit& a, const hit& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  if (out.size() > k) {
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(), better);
    out.resize(k);
  } else {
    std::sort(out.begin(), out.end(), better);
  }
  return out;
}

size_t vector_index::memory_bytes() const {
  size_t bytes = rows_.capacity() * sizeof(float);
  if (hnsw_)
    bytes += hnsw_->graph.max_elements_ * hnsw_->graph.size_data_per_element_
             + hnsw_->graph.max_elements_ * hnsw_->graph.size_links_per_element_ / 2;
  return bytes;
}

}  // namespace ragtor
