// The stream actor: one per request. It runs the turn's state machine —
// route -> history -> retrieve -> generate -> persist — and publishes the
// turn's events to one subscriber with credit-based flow control (tokens
// are coalesced while the subscriber is behind, never dropped). `start` is
// always first and `done` always last, also after errors, cancels and
// timeouts. The assistant message is committed before `done` is published.
#pragma once

#include <chrono>
#include <memory>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

class http_json_client;
class planner_gate;

struct stream_deps {
  router_actor router;
  agent_pool_actor pool;
  llm_actor llm;
  store_actor store;
  summarizer_actor summarizer;  // optional: told after a completed turn
  session_actor session;  // told `turn_done` when the turn ended
  // Planning turns (workflow, tool agent): how many may plan at once, and
  // the HTTP client of the workflow's tools. Without a gate such KBs are
  // answered with `overloaded`.
  std::shared_ptr<planner_gate> planners;
  std::shared_ptr<http_json_client> tools_http;
};

struct stream_settings {
  int32_t top_k = 5;
  int32_t window = 6;  // recent messages handed to the generator
  caf::timespan step_timeout = std::chrono::seconds(30);
  caf::timespan turn_timeout = std::chrono::seconds(300);
  // How long a finished or unobserved turn waits for its subscriber.
  caf::timespan subscriber_timeout = std::chrono::seconds(30);
  size_t max_pending_bytes = 1 << 20;  // buffered for a slow subscriber
};

stream_actor spawn_stream(caf::actor_system& sys, chat_request req, turn_opened opened,
                          stream_deps deps, stream_settings settings);

}  // namespace ragtor
