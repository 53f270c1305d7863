// The process's Prometheus metrics (DESIGN §12, docs/admin.md "Metrics"):
// counters, gauges and histograms updated with relaxed atomics from any
// thread, rendered in the Prometheus text exposition format at /metrics.
// Names follow vLLM's conventions with a `ragtor_` prefix and base units
// (seconds, bytes). One ragtor process is one node.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ragtor::metrics {

class counter {
public:
  void inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

private:
  std::atomic<uint64_t> v_{0};
};

class gauge {
public:
  void add(int64_t n) { v_.fetch_add(n, std::memory_order_relaxed); }
  void set(int64_t n) { v_.store(n, std::memory_order_relaxed); }
  int64_t value() const { return v_.load(std::memory_order_relaxed); }

private:
  std::atomic<int64_t> v_{0};
};

// Cumulative buckets with upper bounds `bounds` (ascending) and +Inf.
class histogram {
public:
  explicit histogram(std::vector<double> bounds);
  void observe(double x);
  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket counts (not cumulative), the +Inf bucket last.
  std::vector<uint64_t> counts() const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// A metric per value of one label (created on first use, kept forever:
// label values must come from a small fixed set — agent types, route
// names, status codes).
template <class T>
class family {
public:
  template <class... Args>
  explicit family(Args... args) : make_([=] { return std::make_unique<T>(args...); }) {}
  T& with(std::string_view label_value) {
    std::lock_guard lock{mx_};
    auto i = members_.find(label_value);
    if (i == members_.end())
      i = members_.emplace(std::string{label_value}, make_()).first;
    return *i->second;
  }
  template <class F>
  void each(F f) const {
    std::lock_guard lock{mx_};
    for (auto& [label, m] : members_)
      f(label, *m);
  }

private:
  std::function<std::unique_ptr<T>()> make_;
  mutable std::mutex mx_;
  std::map<std::string, std::unique_ptr<T>, std::less<>> members_;
};

// How a turn ended (ragtor_turns_total{outcome}).
enum class turn_outcome { completed, cancelled, failed, overloaded, client_gone };
inline constexpr std::array<const char*, 5> turn_outcome_names{
    "completed", "cancelled", "failed", "overloaded", "client_gone"};

// How a model request ended (ragtor_llm_requests_total{outcome}).
enum class llm_outcome { ok, error, cancelled, overloaded };
inline constexpr std::array<const char*, 4> llm_outcome_names{"ok", "error", "cancelled",
                                                              "overloaded"};

// Where a turn's time goes before its first token
// (ragtor_turn_phase_seconds{phase}): each measured from the turn's start
// in its stream actor to the moment the phase was over.
enum class turn_phase { routed, context, evidence, model_called, first_token };
inline constexpr std::array<const char*, 5> turn_phase_names{"routed", "context", "evidence",
                                                             "model_called", "first_token"};

// The buckets of one phase: from half a millisecond (a turn's own cost) to
// ten seconds (a slow search or a queued model call).
inline histogram phase_histogram() {
  return histogram{
      {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0}};
}

struct registry {
  std::array<counter, 5> turns;  // by turn_outcome
  histogram time_to_first_token{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}};
  histogram inter_token_latency{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2,
                                 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}};
  // By turn_phase. Routing and the context read run at once; the search
  // may start as soon as the route is known; the model is called once all
  // three have answered.
  std::array<histogram, 5> turn_phases{phase_histogram(), phase_histogram(), phase_histogram(),
                                       phase_histogram(), phase_histogram()};
  histogram turn_duration{{0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0,
                           120.0, 300.0}};
  family<histogram> retrieval_duration{
      std::vector<double>{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                          2.5, 5.0}};
  counter tokens_streamed;
  std::array<counter, 4> llm_requests;  // by llm_outcome
  gauge llm_queue_depth;
  // Model connects that found no free file descriptor and waited for one.
  counter llm_descriptor_waits;
  // Event batches a turn's thread wrote to its waiting connection itself.
  counter sse_direct_writes;
  histogram store_commit_duration{
      {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5}};
  histogram store_batch_size{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}};
  // "<route> <code>" (route names of http/routes.cpp, plus "not_found").
  family<counter> http_requests;

  void turn(turn_outcome o) { turns[static_cast<size_t>(o)].inc(); }
  void phase(turn_phase p, double seconds) { turn_phases[static_cast<size_t>(p)].observe(seconds); }
  void llm_request(llm_outcome o) { llm_requests[static_cast<size_t>(o)].inc(); }
};

// The process's metrics.
registry& global();

// The exposition text of `r`, plus `extra` (already formatted samples of
// metrics computed at scrape time, with their HELP and TYPE lines).
std::string render(const registry& r, std::string_view extra = {});

// Appends "# HELP name help\n# TYPE name type\n".
void append_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help);
// Appends one sample line: name{labels} value.
void append_sample(std::string& out, std::string_view name, std::string_view labels, double value);

}  // namespace ragtor::metrics
