// The planner base: node logs, the finish step, and the choice of planner.
#include "pipeline/planner_logic.hpp"

#include "protocol/json_writer.hpp"

namespace ragtor::plan {

std::unique_ptr<planner_logic> make_planner(std::string_view answer_mode, plan_input in) {
  if (answer_mode == "tool_agent")
    return make_tool_agent_planner(std::move(in));
  return make_workflow_planner(std::move(in));
}

std::string_view to_string(step_kind k) {
  switch (k) {
    case step_kind::complete:
      return "complete";
    case step_kind::search:
      return "search";
    case step_kind::post_tool:
      return "post_tool";
    case step_kind::load_state:
      return "load_state";
    case step_kind::save_state:
      return "save_state";
    case step_kind::finish:
      return "finish";
  }
  return "?";
}

void planner_logic::log(std::string node, clock::time_point started, std::string input_json,
                        std::string output_json) {
  node_log l;
  l.node = std::move(node);
  l.duration_ms = std::chrono::duration<double, std::milli>(clock::now() - started).count();
  l.input_json = std::move(input_json);
  l.output_json = std::move(output_json);
  logs_.push_back(std::move(l));
}

step planner_logic::finish(plan_outcome out) {
  out.logs = std::move(logs_);
  logs_.clear();
  step s;
  s.kind = step_kind::finish;
  s.outcome = std::move(out);
  return s;
}

}  // namespace ragtor::plan
