// What planners do from their own thread: blocking, bounded calls to the
// model gateway, the retrieval agents and the store, and the node logs of
// the turn (debug execution logs, with timings).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/pipeline/planner.hpp"

namespace ragtor {

struct model_policy {
  int32_t timeout_ms = 20000;  // per attempt
  int32_t retries = 2;         // after the first attempt
  int32_t backoff_ms = 200;    // doubled after each failed attempt
};

// True for failures worth another attempt: timeouts, an overloaded or
// failing upstream. "No model configured" or a bad request are final.
bool retryable(const caf::error& err);

class planner_calls {
public:
  using clock = std::chrono::steady_clock;

  planner_calls(caf::actor_system& sys, planner_deps deps, std::string request_id);

  // One completion, retried with backoff under `policy`; `attempts` (when
  // given) receives how many calls were made.
  caf::expected<completion_result> complete(const completion_request& req,
                                            const model_policy& policy, int* attempts = nullptr);

  // The top `top_k` results of worker `worker_name` for `query`.
  caf::expected<retrieval_result> search(const std::string& worker_name, const std::string& query,
                                         int32_t top_k, std::chrono::milliseconds timeout);

  // The guided workflow's state of a conversation ("" when none or unreadable).
  std::string load_flow_state(const std::string& conversation_id);
  // Stores it ("" deletes it); false when that failed (logged).
  bool save_flow_state(const std::string& conversation_id, const std::string& json);

  // Records a node of the turn: its name, time since `started`, input and
  // output JSON objects.
  void log(std::string node, clock::time_point started, std::string input_json,
           std::string output_json);

  std::vector<node_log> take_logs() { return std::move(logs_); }
  const std::string& request_id() const { return request_id_; }

private:
  caf::scoped_actor self_;
  planner_deps deps_;
  std::string request_id_;
  std::vector<node_log> logs_;
};

// A detached planner answering one `plan` request with
// `Turn{sys, deps, input}.run()`, then quitting. Its slot is given back
// before the answer leaves (so a finished turn never holds a place), or
// when the actor goes away unasked.
template <class Turn>
planner_actor spawn_turn_planner(caf::actor_system& sys, planner_deps deps,
                                 std::shared_ptr<planner_slot> slot) {
  return sys.spawn<caf::detached>(
      [](planner_actor::pointer self, planner_deps deps,
         std::shared_ptr<planner_slot> slot) -> planner_actor::behavior_type {
        return {
            [=](atom::plan, const plan_input& in) -> plan_outcome {
              Turn turn{self->system(), deps, in};
              auto out = turn.run();
              slot->release();
              self->quit();
              return out;
            },
        };
      },
      std::move(deps), std::move(slot));
}

}  // namespace ragtor
