// The router actor: decides which KB (if any) and which retrieval agent a
// turn uses (DESIGN §4.2). The decision logic is the plain function
// decide_route so it is unit-testable without actors.
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

struct router_settings {
  std::string default_kb;  // "" = general when the request names no KB
  std::string default_agent_type = "hybrid_agent";
  double min_confidence = 0.75;
};

// intent_detect -> apply_override_policy -> worker_select.
route_decision decide_route(const chat_request& req, const router_settings& settings);

router_actor spawn_router(caf::actor_system& sys, router_settings settings);

}  // namespace ragtor
