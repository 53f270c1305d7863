#include "retrieval/vector_index.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>

#include <unistd.h>

#include <hnswlib/hnswlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ragtor {

// Eight independent partial sums: without -ffast-math the compiler may
// not reorder one float sum, but it vectorises eight.
float row_dot(const float* a, const float* b, size_t n) {
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

namespace {

// a[j] += col[j] * q for j < m, a multiply and then an add (no fused
// multiply-add: row_dot() rounds both). Eight at a time, so that the
// compiler's straight-line vectoriser (on at -O2) makes vector
// instructions of each group; a plain loop stays scalar at -O2. Built
// twice, for SSE2 and for AVX2 (eight floats an instruction), and the
// processor picks (pick_add_scaled).
[[gnu::always_inline]] inline void add_scaled_body(float* __restrict a,
                                                   const float* __restrict col, float q,
                                                   size_t m) {
  size_t j = 0;
  for (; j + 8 <= m; j += 8)
    for (size_t t = 0; t < 8; ++t)
      a[j + t] += col[j + t] * q;
  for (; j < m; ++j)
    a[j] += col[j] * q;
}

void add_scaled_sse2(float* a, const float* col, float q, size_t m) {
  add_scaled_body(a, col, q, m);
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] void add_scaled_avx2(float* a, const float* col, float q, size_t m) {
  add_scaled_body(a, col, q, m);
}
#endif

using add_scaled_fn = void (*)(float*, const float*, float, size_t);

add_scaled_fn pick_add_scaled() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2"))
    return add_scaled_avx2;
#endif
  return add_scaled_sse2;
}

// The k best of `hits`, best first (ties: smaller row first); `hits` is
// reordered.
std::vector<vector_index::hit> best_of(std::vector<vector_index::hit>& hits, size_t k) {
  auto better = [](const vector_index::hit& a, const vector_index::hit& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  auto keep = static_cast<std::ptrdiff_t>(std::min(k, hits.size()));
  std::partial_sort(hits.begin(), hits.begin() + keep, hits.end(), better);
  return {hits.begin(), hits.begin() + keep};
}

#if defined(__x86_64__)
// Rows (n × dims, row by row) as half-precision columns (dims × n),
// rounded to nearest. Every value must be finite and at most 65,504 in
// magnitude (half precision's largest).
[[gnu::target("avx2,f16c")]] std::vector<uint16_t> half_columns(const std::vector<float>& rows,
                                                                size_t n, size_t dims) {
  std::vector<uint16_t> out(n * dims);
  // Eight rows at a time (8 × dims floats, in the first-level cache): each
  // dimension's eight values gathered, converted and stored together, so
  // the rows are read once instead of once per dimension.
  alignas(32) float eight[8];
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float* block = rows.data() + i * dims;
    for (size_t d = 0; d < dims; ++d) {
      for (size_t r = 0; r < 8; ++r)
        eight[r] = block[r * dims + d];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + d * n + i),
                       _mm256_cvtps_ph(_mm256_load_ps(eight), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  for (; i < n; ++i)
    for (size_t d = 0; d < dims; ++d)
      out[d * n + i] = _cvtss_sh(rows[i * dims + d], _MM_FROUND_TO_NEAREST_INT);
  return out;
}

[[gnu::target("avx2,f16c")]] inline __m256 load_half8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// approx[i] = Σ query[d] · half(column d)[i] over `used`, for i < n, in
// blocks of rows whose sums stay in the first-level cache, two columns a
// pass.
[[gnu::target("avx2,f16c,fma")]] void half_scan(const uint16_t* columns, size_t n,
                                                const std::vector<uint32_t>& used,
                                                const float* query, float* approx) {
  constexpr size_t block = 1024;
  alignas(32) float acc[block];
  for (size_t first = 0; first < n; first += block) {
    auto m = std::min(block, n - first);
    auto m8 = m - m % 8;
    std::fill_n(acc, m, 0.f);
    size_t u = 0;
    for (; u + 2 <= used.size(); u += 2) {
      const auto* a = columns + used[u] * n + first;
      const auto* b = columns + used[u + 1] * n + first;
      auto qa = _mm256_set1_ps(query[used[u]]), qb = _mm256_set1_ps(query[used[u + 1]]);
      for (size_t j = 0; j < m8; j += 8)
        _mm256_store_ps(acc + j, _mm256_fmadd_ps(load_half8(b + j), qb,
                                                 _mm256_fmadd_ps(load_half8(a + j), qa,
                                                                 _mm256_load_ps(acc + j))));
      for (size_t j = m8; j < m; ++j)
        acc[j] += _cvtsh_ss(a[j]) * query[used[u]] + _cvtsh_ss(b[j]) * query[used[u + 1]];
    }
    if (u < used.size()) {
      const auto* a = columns + used[u] * n + first;
      auto qa = _mm256_set1_ps(query[used[u]]);
      for (size_t j = 0; j < m8; j += 8)
        _mm256_store_ps(acc + j, _mm256_fmadd_ps(load_half8(a + j), qa, _mm256_load_ps(acc + j)));
      for (size_t j = m8; j < m; ++j)
        acc[j] += _cvtsh_ss(a[j]) * query[used[u]];
    }
    std::copy_n(acc, m, approx + first);
  }
}
#endif

// The query's non-zero dimensions, ascending: the only ones a scan by
// dimension reads.
std::vector<uint32_t> nonzero_dimensions(std::span<const float> query) {
  std::vector<uint32_t> used;
  for (uint32_t d = 0; d < query.size(); ++d)
    if (query[d] != 0.f)
      used.push_back(d);
  return used;
}

// Whether rows fit half precision: finite, and no larger than its largest
// value.
bool fits_half(const std::vector<float>& rows) {
  return std::all_of(rows.begin(), rows.end(),
                     [](float x) { return std::isfinite(x) && std::fabs(x) <= 65504.f; });
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

// The half-precision scan: its conversions need F16C, its loop AVX2 and
// FMA (an approximation may fuse; the exact scores are computed apart).
bool vector_index::half_precision_available() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")
         && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool vector_index::graph_for(size_t n, size_t dims, const vector_index_options& opts) {
  return n > 0 && n * dims / 256 >= opts.exact_below;
}

vector_index::vector_index() = default;
vector_index::~vector_index() = default;
vector_index::vector_index(vector_index&&) noexcept = default;
vector_index& vector_index::operator=(vector_index&&) noexcept = default;

vector_index vector_index::build(std::vector<float> rows, size_t dims, vector_index_options opts) {
  vector_index idx;
  idx.dims_ = dims;
  auto n = dims ? rows.size() / dims : 0;
  if (graph_for(n, dims, opts)) {
    idx.rows_ = std::move(rows);
    idx.hnsw_ = std::make_unique<hnsw>(dims, n, opts);
    idx.hnsw_->graph.setEf(opts.ef_search);
    for (size_t i = 0; i < n; ++i)
      idx.hnsw_->graph.addPoint(idx.rows_.data() + i * dims, i);
    if (half_precision_for(n, idx.rows_, opts))
      idx.add_half_precision();
    return idx;
  }
  if (half_precision_for(n, rows, opts)) {
    idx.rows_ = std::move(rows);
    idx.add_half_precision();
    return idx;
  }
  idx.columns_.resize(n * dims);
  for (size_t i = 0; i < n; ++i)
    for (size_t d = 0; d < dims; ++d)
      idx.columns_[d * n + i] = rows[i * dims + d];
  return idx;
}

std::vector<float> vector_index::row(size_t i) const {
  std::vector<float> out(dims_);
  copy_row(i, out.data());
  return out;
}

void vector_index::copy_row(size_t i, float* out) const {
  if (!columns_.empty()) {
    auto n = size();
    for (size_t d = 0; d < dims_; ++d)
      out[d] = columns_[d * n + i];
    return;
  }
  std::copy_n(rows_.begin() + static_cast<std::ptrdiff_t>(i * dims_), dims_, out);
}

std::vector<float> vector_index::rows() const {
  if (columns_.empty())
    return rows_;
  auto n = size();
  std::vector<float> out(n * dims_);
  for (size_t d = 0; d < dims_; ++d)
    for (size_t i = 0; i < n; ++i)
      out[i * dims_ + d] = columns_[d * n + i];
  return out;
}

vector_index vector_index::build(std::vector<float> rows, size_t dims, vector_index_options opts,
                                 std::string_view saved_graph) {
  auto n = dims ? rows.size() / dims : 0;
  if (saved_graph.empty() || !graph_for(n, dims, opts))
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
  if (half_precision_for(n, idx.rows_, opts))
    idx.add_half_precision();
  return idx;
}

// Whether n rows get half-precision columns: enough of them, a processor
// that converts, and values half precision holds.
bool vector_index::half_precision_for(size_t n, const std::vector<float>& rows,
                                      const vector_index_options& opts) {
  return n > 0 && n >= opts.half_precision_from && half_precision_available() && fits_half(rows);
}

// The half-precision columns of rows_ (kept): the exact scan's first
// pass, and with a graph the search for more than its ef.
void vector_index::add_half_precision() {
#if defined(__x86_64__)
  auto n = size();
  half_columns_ = half_columns(rows_, n, dims_);
  for (size_t i = 0; i < n; ++i) {
    double norm = 0;
    for (size_t d = 0; d < dims_; ++d)
      norm += static_cast<double>(rows_[i * dims_ + d]) * rows_[i * dims_ + d];
    max_row_norm_ = std::max(max_row_norm_, std::sqrt(norm));
  }
#endif
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

bool vector_index::ranks_exactly(size_t k) const {
  return !hnsw_ || k > hnsw_->ef;
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
    return best_of(out, k);
  }
  if (!columns_.empty())
    return exact_search(query, k);
  // Exact, or an HNSW index asked for more than its ef: every row.
  if (!half_columns_.empty())
    return half_precision_search(query, k);
  return row_by_row(query, k);
}

std::vector<vector_index::hit> vector_index::row_by_row(std::span<const float> query,
                                                        size_t k) const {
  auto n = size();
  std::vector<hit> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    out.emplace_back(static_cast<uint32_t>(i),
                     row_dot(rows_.data() + i * dims_, query.data(), dims_));
  return best_of(out, k);
}

// Why the candidates hold the k best. Let s be a row's exact score (as
// row_dot() computes it), a its approximate score (half_scan()), and B a
// bound on |s − a| for every row. At least k rows have a ≥ t, the k-th
// best approximate score, so at least k have s ≥ t − B: the k-th best
// exact score is ≥ t − B, and any row among the k best (ties included)
// has s ≥ t − B and so a ≥ t − 2B. Those rows are scored exactly and
// ranked as the full scan ranks them.
//
// B: with u = 2⁻²⁴ and m summed terms, a float sum's rounding error is at
// most γ(m)·Σ|q·x|, γ(m) = m·u / (1 − m·u), for s and a alike; rounding
// to half precision changes a value by at most 2⁻¹¹ of it, or 2⁻²⁵ below
// half precision's normal range; and Σ|q·x| ≤ ‖q‖₂·‖x‖₂ (Cauchy–Schwarz).
// So |s − a| ≤ (2⁻¹¹ + 2.01·γ(dims))·‖q‖₂·max‖x‖₂ + 2⁻²⁵·‖q‖₁, here
// doubled against the rounding of the bound's own arithmetic.
std::vector<vector_index::hit> vector_index::half_precision_search(std::span<const float> query,
                                                                   size_t k) const {
  auto n = size();
  if (k >= n || !std::all_of(query.begin(), query.end(), [](float x) { return std::isfinite(x); }))
    return row_by_row(query, k);
  auto used = nonzero_dimensions(query);
  double norm2 = 0, norm1 = 0;
  for (auto d : used) {
    norm2 += static_cast<double>(query[d]) * query[d];
    norm1 += std::fabs(query[d]);
  }
  thread_local std::vector<float> approx;
  approx.resize(n);
#if defined(__x86_64__)
  half_scan(half_columns_.data(), n, used, query.data(), approx.data());
#endif
  // The k-th best approximate score: a min-heap of the k best.
  thread_local std::vector<float> heap;
  heap.assign(approx.begin(), approx.begin() + static_cast<std::ptrdiff_t>(k));
  std::make_heap(heap.begin(), heap.end(), std::greater<>{});
  for (size_t i = k; i < n; ++i)
    if (approx[i] > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
      heap.back() = approx[i];
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  constexpr double u = 0x1p-24;
  auto gamma = static_cast<double>(dims_) * u / (1 - static_cast<double>(dims_) * u);
  auto bound = 2 * ((0x1p-11 + 2.01 * gamma) * std::sqrt(norm2) * max_row_norm_ + 0x1p-25 * norm1);
  auto cut = static_cast<double>(heap.front()) - 2 * bound;
  std::vector<hit> hits;
  for (size_t i = 0; i < n; ++i)
    if (static_cast<double>(approx[i]) >= cut)
      hits.emplace_back(static_cast<uint32_t>(i),
                        row_dot(rows_.data() + i * dims_, query.data(), dims_));
  return best_of(hits, k);
}

// Column by column, in blocks of rows whose eight lane sums stay in the
// first-level cache: for each dimension the query is not zero in, its
// product with the block's values is added to the lane row_dot() adds it to
// (d % 8), in ascending d as row_dot() does; the dimensions past the
// last multiple of eight are added after the lanes, as row_dot() adds them. A
// product with a zero is a zero, which leaves a sum as it was.
std::vector<vector_index::hit> vector_index::exact_search(std::span<const float> query,
                                                          size_t k) const {
  auto n = size();
  auto lanes_end = dims_ - dims_ % 8;
  auto used = nonzero_dimensions(query);
  auto tail = std::lower_bound(used.begin(), used.end(), static_cast<uint32_t>(lanes_end));
  // Every row's score, in a buffer kept per thread: at 20,000 rows it is
  // 160 KB, which glibc would map and unmap for each query (serve.cpp's
  // mmap threshold, 128 KiB).
  thread_local std::vector<hit> out;
  out.resize(n);
  static const add_scaled_fn add_scaled = pick_add_scaled();
  constexpr size_t block = 512;
  float acc[8][block];
  for (size_t first = 0; first < n; first += block) {
    auto m = std::min(block, n - first);
    for (auto& lane : acc)
      std::fill_n(lane, m, 0.f);
    for (auto d = used.begin(); d != tail; ++d)
      add_scaled(acc[*d % 8], columns_.data() + *d * n + first, query[*d], m);
    for (size_t j = 0; j < m; ++j) {
      float sum = ((acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]))
                  + ((acc[4][j] + acc[5][j]) + (acc[6][j] + acc[7][j]));
      for (auto d = tail; d != used.end(); ++d)
        sum += columns_[*d * n + first + j] * query[*d];
      out[first + j] = {static_cast<uint32_t>(first + j), sum};
    }
  }
  return best_of(out, k);
}

size_t vector_index::memory_bytes() const {
  size_t bytes = (rows_.capacity() + columns_.capacity()) * sizeof(float)
                 + half_columns_.capacity() * sizeof(uint16_t);
  if (hnsw_)
    bytes += hnsw_->graph.max_elements_ * hnsw_->graph.size_data_per_element_
             + hnsw_->graph.max_elements_ * hnsw_->graph.size_links_per_element_ / 2;
  return bytes;
}

}  // namespace ragtor
