// The tool-calling agent (seed 001). Placeholder until the model gateway
// speaks the OpenAI tools protocol: the KB is served by the plain pipeline.
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/pipeline/planner.hpp"

namespace ragtor {

planner_actor spawn_tool_agent_planner(caf::actor_system& sys, planner_deps) {
  return sys.spawn([](planner_actor::pointer self) -> planner_actor::behavior_type {
    return {
        [=](atom::plan, const plan_input&) -> plan_outcome {
          plan_outcome out;
          out.action = "pipeline";
          self->quit();
          return out;
        },
    };
  });
}

}  // namespace ragtor
