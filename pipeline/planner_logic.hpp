// The decisions of a turn planner (the guided workflow, the tool-calling
// agent) as a pure state machine: given the result of the last step, what
// is the next one. No I/O and no actors here: the planner driver
// (actors/pipeline/planner_driver) executes each step — a model call with
// retries and backoff, a search, an HTTP tool call, a read or write of the
// workflow state — and feeds its result back, until a step says `finish`.
//
//   driver                     logic
//   ------                     -----
//   start()           ───────► first step
//   execute step, then
//   next(result)      ───────► next step ... finish(outcome)
//
// Because the logic never waits, a turn holds no thread while the model
// thinks, and cancelling it is the driver closing the step in flight.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "protocol/messages.hpp"

namespace ragtor::plan {

enum class step_kind : uint8_t {
  complete,    // one model completion (retried under the step's policy)
  search,      // a retrieval agent's top results
  post_tool,   // POST a JSON body to an HTTP JSON tool
  load_state,  // the workflow state of the conversation
  save_state,  // store it ("" deletes it)
  finish,      // the turn's decision: `outcome`
};

std::string_view to_string(step_kind k);

struct step {
  step_kind kind = step_kind::finish;
  // complete
  completion_request completion;
  int32_t retries = 0;        // attempts after the first, for retryable failures
  int32_t backoff_ms = 200;   // before the second attempt; doubled after each
  // complete, search, post_tool: each attempt's deadline
  int32_t timeout_ms = 20000;
  // search
  std::string worker_name;
  std::string query;
  int32_t top_k = 5;
  // post_tool
  std::string url;
  std::string body;
  // load_state, save_state
  std::string conversation_id;
  std::string state_json;
  // finish
  plan_outcome outcome;
};

// What a step produced. `ok == false`: `error` says why (after the last
// attempt for model calls); the logic decides what that means.
struct result {
  bool ok = true;
  caf::error error;
  int32_t attempts = 1;         // model calls made for a `complete` step
  completion_result completion;  // complete
  retrieval_result found;        // search
  std::string text;              // post_tool: the response body; load_state: the state
};

class planner_logic {
public:
  using clock = std::chrono::steady_clock;

  virtual ~planner_logic() = default;

  // The first step of the turn.
  virtual step start() = 0;
  // The step after `last` finished (successfully or not).
  virtual step next(result last) = 0;
  // What the planner is doing, for status and logs ("intent", "retrieval", ...).
  virtual std::string_view stage() const = 0;

protected:
  // Records a node of the turn (debug execution logs): its name, time
  // since `started`, input and output JSON objects.
  void log(std::string node, clock::time_point started, std::string input_json,
           std::string output_json);
  // The finish step carrying `out` and every node logged so far.
  step finish(plan_outcome out);

private:
  std::vector<node_log> logs_;
};

// The guided workflow (seed 003) for one turn on a KB with answer_mode
// "workflow"; its definition is the KB's `workflow` setting.
std::unique_ptr<planner_logic> make_workflow_planner(plan_input in);

// The tool-calling agent (seed 001) for one turn on a KB with answer_mode
// "tool_agent".
std::unique_ptr<planner_logic> make_tool_agent_planner(plan_input in);

// A planner for `answer_mode` ("workflow" or "tool_agent").
std::unique_ptr<planner_logic> make_planner(std::string_view answer_mode, plan_input in);

}  // namespace ragtor::plan
