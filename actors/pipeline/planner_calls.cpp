#include "actors/pipeline/planner_calls.hpp"

#include <thread>

#include <caf/sec.hpp>
#include <spdlog/spdlog.h>

#include "protocol/errc.hpp"

namespace ragtor {

bool retryable(const caf::error& err) {
  if (err == caf::sec::request_timeout)
    return true;
  auto c = code_of(err);
  return c == errc::timeout || c == errc::llm_failed || c == errc::overloaded;
}

planner_calls::planner_calls(caf::actor_system& sys, planner_deps deps, std::string request_id)
    : self_(sys), deps_(std::move(deps)), request_id_(std::move(request_id)) {
}

caf::expected<completion_result> planner_calls::complete(const completion_request& req,
                                                         const model_policy& policy,
                                                         int* attempts) {
  auto backoff = std::chrono::milliseconds{policy.backoff_ms};
  caf::error last;
  for (int attempt = 0; attempt <= policy.retries; ++attempt) {
    if (attempts)
      *attempts = attempt + 1;
    if (attempt > 0) {
      // Backoff between attempts: this thread is the planner's own.
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
    caf::expected<completion_result> out{caf::error{}};
    self_->request(deps_.llm, std::chrono::milliseconds{policy.timeout_ms}, atom::complete_v, req)
        .receive([&](completion_result& r) { out = std::move(r); },
                 [&](caf::error& err) { out = err; });
    if (out)
      return out;
    last = out.error();
    if (!retryable(last))
      break;
    spdlog::warn("planner {}: {} attempt {} failed: {}", request_id_, req.purpose, attempt + 1,
                 error_message(last));
  }
  return last;
}

caf::expected<retrieval_result> planner_calls::search(const std::string& worker_name,
                                                      const std::string& query, int32_t top_k,
                                                      std::chrono::milliseconds timeout) {
  caf::expected<retrieval_result> out{caf::error{}};
  retrieval_agent_actor agent;
  self_->request(deps_.pool, timeout, atom::resolve_v, worker_name)
      .receive([&](retrieval_agent_actor& a) { agent = std::move(a); },
               [&](caf::error& err) { out = err; });
  if (!agent)
    return out.error() ? out.error() : make_error(errc::retrieval_failed, "no agent");
  retrieve_options opts;
  opts.top_k = top_k;
  opts.request_id = request_id_;
  self_->request(agent, timeout, atom::retrieve_v, query, std::string{}, opts)
      .receive([&](retrieval_result& r) { out = std::move(r); },
               [&](caf::error& err) { out = err; });
  return out;
}

std::string planner_calls::load_flow_state(const std::string& conversation_id) {
  std::string out;
  self_->request(deps_.store, std::chrono::seconds{10}, atom::flow_state_v, conversation_id)
      .receive([&](std::string& s) { out = std::move(s); },
               [&](caf::error& err) {
                 spdlog::warn("planner {}: flow state unreadable ({}); starting afresh",
                              request_id_, error_message(err));
               });
  return out;
}

bool planner_calls::save_flow_state(const std::string& conversation_id, const std::string& json) {
  bool ok = false;
  self_->request(deps_.store, std::chrono::seconds{10}, atom::flow_state_v, conversation_id, json)
      .receive([&](bool stored) { ok = stored; },
               [&](caf::error& err) {
                 spdlog::warn("planner {}: flow state not stored: {}", request_id_,
                              error_message(err));
               });
  return ok;
}

void planner_calls::log(std::string node, clock::time_point started, std::string input_json,
                        std::string output_json) {
  node_log l;
  l.node = std::move(node);
  l.duration_ms = std::chrono::duration<double, std::milli>(clock::now() - started).count();
  l.input_json = std::move(input_json);
  l.output_json = std::move(output_json);
  logs_.push_back(std::move(l));
}

namespace {

std::atomic<int32_t> planners_running{0};

}  // namespace

std::shared_ptr<planner_slot> planner_slot::acquire(int32_t max) {
  auto n = planners_running.load();
  do {
    if (n >= max)
      return nullptr;
  } while (!planners_running.compare_exchange_weak(n, n + 1));
  return std::shared_ptr<planner_slot>{new planner_slot};
}

void planner_slot::release() {
  if (held_.exchange(false))
    --planners_running;
}

caf::expected<planner_actor> spawn_planner(caf::actor_system& sys, std::string_view mode,
                                           planner_deps deps, int32_t max_planners) {
  auto slot = planner_slot::acquire(max_planners);
  if (!slot)
    return make_error(errc::overloaded,
                      std::to_string(max_planners)
                          + " workflow or tool-agent turns are planning already "
                            "(server.max_planner_turns); retry later");
  if (mode == "tool_agent")
    return spawn_tool_agent_planner(sys, std::move(deps), std::move(slot));
  return spawn_workflow_planner(sys, std::move(deps), std::move(slot));
}

}  // namespace ragtor
