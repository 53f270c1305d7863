// Turn planners: how a KB whose answer_mode is not "pipeline" answers.
//
//   "workflow"   -- the guided workflow (seed 003, pipeline/workflow.hpp):
//                   intent, slot filling, asking, a retrieval loop with
//                   evaluation, verification, escalation to a human.
//   "tool_agent" -- the tool-calling agent (seed 001): the model drives a
//                   bounded loop over retrieval tools, then answers.
//
// A planner is an ordinary event-based actor spawned per turn by the stream
// actor. It answers one `plan` request and quits. Its decisions are the
// pure state machines of pipeline/planner_logic.hpp; the actor only
// executes their steps: every model, search, store and tool call is a
// request (or an HTTP call whose answer comes back as a message), backoff
// between model attempts is a delayed message to itself. A waiting planner
// holds no thread, and `cancel` closes the call in flight at once. Without
// a model it answers "pipeline": the KB is served by the plain
// rewrite -> search -> generate pipeline.
#pragma once

#include <atomic>
#include <memory>
#include <string_view>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

class http_json_client;

// A plain count of turns planning at once (`[server] max_planner_turns`):
// planners hold no threads, so the bound only guards memory; the model
// gateway's queue is what admits or refuses their model calls.
class planner_gate {
public:
  explicit planner_gate(int32_t max) : max_(max) {
  }
  // A place, given back when the last copy is dropped (also after the gate
  // itself is gone); nullptr when `max` planners are running.
  std::shared_ptr<void> enter();
  int32_t running() const { return running_->load(); }
  int32_t max() const { return max_; }

private:
  int32_t max_;
  std::shared_ptr<std::atomic<int32_t>> running_ = std::make_shared<std::atomic<int32_t>>(0);
};

struct planner_deps {
  llm_actor llm;
  agent_pool_actor pool;
  flow_store_actor store;
  std::shared_ptr<http_json_client> tools_http;  // the workflow's HTTP JSON tools
};

// A planner for `mode` ("workflow" | "tool_agent"), or `overloaded` when
// `gate` is full. The planner holds its place until it quits.
caf::expected<planner_actor> spawn_planner(caf::actor_system& sys, std::string_view mode,
                                           planner_deps deps, planner_gate& gate);

}  // namespace ragtor
