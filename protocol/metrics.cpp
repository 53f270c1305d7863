#include "protocol/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ragtor::metrics {

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double x) {
  // Bucket i counts bounds_[i-1] < x <= bounds_[i] ("le" is inclusive).
  auto i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), x)
                               - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(x, std::memory_order_relaxed);
}

std::vector<uint64_t> histogram::counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

registry& global() {
  static registry r;
  return r;
}

namespace {

std::string number(double v) {
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v))
    return "NaN";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// `labels` (may be empty) plus le="bound".
std::string with_le(std::string_view labels, double bound) {
  std::string out{labels};
  if (!out.empty())
    out += ',';
  out += "le=\"" + number(bound) + "\"";
  return out;
}

void append_histogram(std::string& out, std::string_view name, std::string_view labels,
                      const histogram& h) {
  auto counts = h.counts();
  uint64_t cumulative = 0;
  std::string bucket = std::string{name} + "_bucket";
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    double bound = i < h.bounds().size() ? h.bounds()[i] : INFINITY;
    append_sample(out, bucket, with_le(labels, bound), static_cast<double>(cumulative));
  }
  // The sum and count as of the buckets read (a concurrent observe may land
  // between the reads; the count is taken from the buckets so that
  // +Inf == _count always holds).
  append_sample(out, std::string{name} + "_sum", labels, h.sum());
  append_sample(out, std::string{name} + "_count", labels, static_cast<double>(cumulative));
}

std::string label(std::string_view key, std::string_view value) {
  std::string out{key};
  out += "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

void append_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void append_sample(std::string& out, std::string_view name, std::string_view labels,
                   double value) {
  out.append(name);
  if (!labels.empty())
    out.append("{").append(labels).append("}");
  out.append(" ").append(number(value)).append("\n");
}

std::string render(const registry& r, std::string_view extra) {
  std::string out;
  out.reserve(8192);
  append_header(out, "ragtor_turns_total", "counter", "Chat turns by how they ended.");
  for (size_t i = 0; i < r.turns.size(); ++i)
    append_sample(out, "ragtor_turns_total", label("outcome", turn_outcome_names[i]),
                  static_cast<double>(r.turns[i].value()));
  append_header(out, "ragtor_time_to_first_token_seconds", "histogram",
                "Time from the request to the first answer token.");
  append_histogram(out, "ragtor_time_to_first_token_seconds", "", r.time_to_first_token);
  append_header(out, "ragtor_inter_token_latency_seconds", "histogram",
                "Time between consecutive answer tokens of a turn.");
  append_histogram(out, "ragtor_inter_token_latency_seconds", "", r.inter_token_latency);
  append_header(out, "ragtor_turn_phase_seconds", "histogram",
                "Time from the start of a turn to the end of each phase before its first token: "
                "routed, context (window, summary, memories read), evidence (search answered), "
                "model_called (the prompt handed to the model gateway), first_token (published).");
  for (size_t i = 0; i < r.turn_phases.size(); ++i)
    append_histogram(out, "ragtor_turn_phase_seconds", label("phase", turn_phase_names[i]),
                     r.turn_phases[i]);
  append_header(out, "ragtor_turn_duration_seconds", "histogram",
                "Time from the request to the end of the turn.");
  append_histogram(out, "ragtor_turn_duration_seconds", "", r.turn_duration);
  append_header(out, "ragtor_retrieval_duration_seconds", "histogram",
                "Time a retrieval agent took to answer a query, by agent type.");
  r.retrieval_duration.each([&](const std::string& agent, const histogram& h) {
    append_histogram(out, "ragtor_retrieval_duration_seconds", label("agent", agent), h);
  });
  append_header(out, "ragtor_tokens_streamed_total", "counter",
                "Answer tokens sent to clients.");
  append_sample(out, "ragtor_tokens_streamed_total", "",
                static_cast<double>(r.tokens_streamed.value()));
  append_header(out, "ragtor_llm_requests_total", "counter",
                "Requests to the language model gateways by outcome.");
  for (size_t i = 0; i < r.llm_requests.size(); ++i)
    append_sample(out, "ragtor_llm_requests_total", label("outcome", llm_outcome_names[i]),
                  static_cast<double>(r.llm_requests[i].value()));
  append_header(out, "ragtor_llm_queue_depth", "gauge",
                "Model calls waiting for a free slot of their gateway.");
  append_sample(out, "ragtor_llm_queue_depth", "",
                static_cast<double>(r.llm_queue_depth.value()));
  append_header(out, "ragtor_llm_descriptor_waits_total", "counter",
                "Waits of model connects for a free file descriptor (the open-file limit reached).");
  append_sample(out, "ragtor_llm_descriptor_waits_total", "",
                static_cast<double>(r.llm_descriptor_waits.value()));
  append_header(out, "ragtor_sse_direct_writes_total", "counter",
                "Event batches written to a waiting connection's socket by the turn's own thread "
                "([sse] direct_writes).");
  append_sample(out, "ragtor_sse_direct_writes_total", "",
                static_cast<double>(r.sse_direct_writes.value()));
  append_header(out, "ragtor_store_commit_duration_seconds", "histogram",
                "Time one store transaction (a group-commit batch) took.");
  append_histogram(out, "ragtor_store_commit_duration_seconds", "", r.store_commit_duration);
  append_header(out, "ragtor_store_batch_size", "histogram",
                "Store operations committed per transaction.");
  append_histogram(out, "ragtor_store_batch_size", "", r.store_batch_size);
  append_header(out, "ragtor_http_requests_total", "counter",
                "HTTP requests by route and status code.");
  r.http_requests.each([&](const std::string& key, const counter& c) {
    auto space = key.find(' ');
    auto labels = label("route", key.substr(0, space)) + ","
                  + label("code", space == std::string::npos ? "" : key.substr(space + 1));
    append_sample(out, "ragtor_http_requests_total", labels, static_cast<double>(c.value()));
  });
  out += extra;
  return out;
}

}  // namespace ragtor::metrics
