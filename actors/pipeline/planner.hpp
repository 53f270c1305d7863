// Turn planners: how a KB whose answer_mode is not "pipeline" answers.
//
//   "workflow"   -- the guided workflow (seed 003, pipeline/workflow.hpp):
//                   intent, slot filling, asking, a retrieval loop with
//                   evaluation, verification, escalation to a human.
//   "tool_agent" -- the tool-calling agent (seed 001): the model drives a
//                   bounded loop over retrieval tools, then answers.
//
// A planner is spawned per turn by the stream actor, answers one `plan`
// request and quits. It runs detached (its own thread) and makes its model,
// search and tool calls one after the other, each bounded by a timeout, so
// its flow reads top to bottom. Without a model it answers "pipeline": the
// KB is served by the plain rewrite -> search -> generate pipeline.
#pragma once

#include <atomic>
#include <memory>
#include <string_view>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

struct planner_deps {
  llm_actor llm;
  agent_pool_actor pool;
  store_actor store;
};

// One of the `max_planner_turns` places for a planner in this process,
// given back once (release() or destruction, whichever comes first).
class planner_slot {
public:
  // nullptr when `max` planners are running.
  static std::shared_ptr<planner_slot> acquire(int32_t max);
  ~planner_slot() { release(); }
  void release();

private:
  planner_slot() = default;
  std::atomic<bool> held_{true};
};

// A planner for `mode`, or `overloaded` when `max_planners` are running.
caf::expected<planner_actor> spawn_planner(caf::actor_system& sys, std::string_view mode,
                                           planner_deps deps, int32_t max_planners);

// The planners (actors/pipeline/workflow_turn.cpp, tool_agent.cpp); each
// holds `slot` while it runs.
planner_actor spawn_workflow_planner(caf::actor_system& sys, planner_deps deps,
                                     std::shared_ptr<planner_slot> slot);
planner_actor spawn_tool_agent_planner(caf::actor_system& sys, planner_deps deps,
                                       std::shared_ptr<planner_slot> slot);

}  // namespace ragtor
