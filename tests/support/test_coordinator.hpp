// Deterministic actor tests: an actor_system on CAF's test coordinator (no
// threads; the test steps the scheduler and advances a manual clock) with
// every ragtor type registered.
#pragma once

#include <caf/actor_system_config.hpp>

#include "protocol/type_ids.hpp"

namespace ragtor::test {

inline caf::actor_system_config& testing_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  register_types(cfg);
  return cfg;
}

}  // namespace ragtor::test
