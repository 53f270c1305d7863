// Sessions. `session_manager` (one per node) maps (user_id, session_id) to a
// `session` actor; a session runs its conversation's turns one at a time in
// arrival order: it commits the user message (store begin_turn), spawns the
// turn's stream actor and answers open_turn with the ticket, and starts the
// next queued turn once the stream reports turn_done (or dies). Idle
// sessions stop themselves after session.idle_timeout_s.
#pragma once

#include <caf/fwd.hpp>

#include "actors/stream/stream.hpp"
#include "protocol/actors.hpp"

namespace ragtor {

struct session_settings {
  std::string node = "local";  // this node's name (conversation ownership)
  size_t max_queued_turns = 8;
  // Start a turn of a known conversation while its user message commits
  // (docs/performance.md, "The commit beside the turn").
  bool early_start = true;
  caf::timespan idle_timeout = std::chrono::seconds(600);
  stream_settings stream;
};

// What every session needs to run turns (the session fills in itself).
struct session_deps {
  router_actor router;
  agent_pool_actor pool;
  llm_actor llm;
  store_actor store;
  summarizer_actor summarizer;  // optional: told about completed turns
  std::shared_ptr<planner_gate> planners;        // see stream_deps
  std::shared_ptr<http_json_client> tools_http;  // see stream_deps
};

session_manager_actor spawn_session_manager(caf::actor_system& sys, session_deps deps,
                                            session_settings settings);

}  // namespace ragtor
