// The stream actor: one per request. It runs the turn's state machine —
// route -> history -> retrieve -> generate -> persist — and publishes the
// turn's events to its subscribers with credit-based flow control (tokens
// are coalesced while a subscriber is behind, never dropped). `start` is
// always first and `done` always last, also after errors, cancels and
// timeouts. The assistant message is committed before `done` is published.
// Every event has a seq; the turn keeps its events (tokens coalesced) so a
// client that went away can re-attach and be replayed what came after the
// last seq it saw, within server.detach_grace_ms.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include "memory/summary.hpp"
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
  // How long a turn whose client went away keeps running, detached, for a
  // client to re-attach ([server] detach_grace_ms); 0 = cancel at once.
  // A turn that completes while detached is kept for the rest of it.
  caf::timespan detach_grace = std::chrono::milliseconds(15000);
  size_t max_pending_bytes = 1 << 20;  // buffered for a slow subscriber
  // The summarizer's policy: a completed turn asks the summarizer only when
  // its conversation's summary is due by it (checked against the state the
  // context read brought). Unset: every completed turn asks, and the
  // summarizer reads the state itself.
  std::optional<summary_policy> summary;
  // Set when the model is an OpenAI-compatible one ([llm]): the stream
  // builds its call's prompt and request body itself before handing the
  // turn to the gateway, so the bodies of many turns are built at once on
  // all workers, not one after another in the gateway actor. Unset: the
  // gateway takes the context and uses what it needs.
  struct model_call {
    std::string model;
    double temperature = 0.2;
    int32_t max_tokens = 1024;
    size_t prompt_budget_tokens = 6000;
    std::string system_instructions;  // "" = the built-in ones (as the gateway's)
  };
  std::optional<model_call> model;
};

// `durable` false: `opened` is the session's guess (the conversation, no
// message id yet) while the store commits the user message; the turn runs
// but publishes nothing and stores nothing until the session sends the
// store's answer (atom::opened).
stream_actor spawn_stream(caf::actor_system& sys, chat_request req, turn_opened opened,
                          stream_deps deps, stream_settings settings, bool durable = true);

}  // namespace ragtor
