#include "actors/router/router.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"

namespace ragtor {

namespace {

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct router_state {
  static inline const char* name = "router";
  router_settings settings;
  uint64_t routed = 0;
};

}  // namespace

route_decision decide_route(const chat_request& req, const router_settings& settings) {
  route_decision rd;
  rd.requested_kb_prefix = req.kb_prefix;
  // intent_detect: auto-routing from message content is the retrieval
  // issue's job; today the only intent is "answer from the named KB".
  rd.intent = "qa";
  // apply_override_policy
  if (!req.kb_prefix.empty()) {
    rd.kb_prefix = req.kb_prefix;
    rd.method = "requested";
    rd.confidence = 1.0;
    rd.reason = "the request named a knowledge base";
  } else if (!settings.default_kb.empty()) {
    rd.kb_prefix = settings.default_kb;
    rd.method = "default";
    rd.confidence = 1.0;
    rd.reason = "router.default_kb is configured";
  } else {
    rd.kb_prefix = "general";
    rd.method = "default";
    rd.confidence = 1.0;
    rd.reason = "no knowledge base requested and auto-routing is off";
  }
  if (lower_trimmed(rd.kb_prefix) == "general") {
    rd.kb_prefix = "general";
    rd.intent = "general";
  }
  rd.routed_kb_prefix = rd.kb_prefix;
  // worker_select
  rd.agent_type = req.agent_type.empty() ? settings.default_agent_type : req.agent_type;
  rd.worker_name = format_worker_name(rd.kb_prefix, rd.agent_type);
  if (rd.worker_name.empty())
    rd.agent_type.clear();
  return rd;
}

router_actor spawn_router(caf::actor_system& sys, router_settings settings) {
  return sys.spawn(
      [settings](router_actor::stateful_pointer<router_state> self) -> router_actor::behavior_type {
        self->state.settings = settings;
        return {
            [=](atom::route, const chat_request& req) -> route_decision {
              ++self->state.routed;
              return decide_route(req, self->state.settings);
            },
            [=](atom::status) -> std::string {
              json_writer w;
              w.begin_object()
                  .field("kind", "router")
                  .field("name", "router")
                  .field("routed", self->state.routed)
                  .field("default_kb", self->state.settings.default_kb)
                  .end_object();
              return w.take();
            },
        };
      });
}

}  // namespace ragtor
