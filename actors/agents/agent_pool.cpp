#include "actors/agents/agent_pool.hpp"

#include <chrono>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

namespace {

struct retrieval_agent_state {
  static inline const char* name = "retrieval_agent";
  std::shared_ptr<kb_catalog> catalog;
  std::string kb;
  std::string agent_type;
  uint64_t served = 0;
  double total_ms = 0;
};

struct agent_pool_state {
  static inline const char* name = "agent_pool";
  std::shared_ptr<kb_catalog> catalog;
  std::unordered_map<std::string, retrieval_agent_actor> agents;  // instance_key -> agent
  uint64_t resolved = 0;
};

}  // namespace

retrieval_agent_actor spawn_retrieval_agent(caf::actor_system& sys,
                                            std::shared_ptr<kb_catalog> catalog, std::string kb,
                                            std::string agent_type, bool detached) {
  auto fun = [catalog, kb,
              agent_type](retrieval_agent_actor::stateful_pointer<retrieval_agent_state> self)
      -> retrieval_agent_actor::behavior_type {
    self->state.catalog = catalog;
    self->state.kb = kb;
    self->state.agent_type = agent_type;
    return {
        [=](atom::retrieve, const std::string& query, const std::string& thread_id,
            const retrieve_options& opts) -> caf::result<retrieval_result> {
          auto started = std::chrono::steady_clock::now();
          auto snapshot = self->state.catalog->get(self->state.kb);
          if (!snapshot)
            return make_error(errc::not_found, "unknown knowledge base \"" + self->state.kb + "\"");
          auto k = static_cast<size_t>(opts.top_k > 0 ? opts.top_k : 5);
          auto result = run_agent(*snapshot, self->state.agent_type, query, k);
          auto ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count();
          ++self->state.served;
          self->state.total_ms += ms;
          return result;
        },
        [=](atom::status) -> std::string {
          json_writer w;
          w.begin_object()
              .field("kind", "retrieval_agent")
              .field("name", "retrieval_agent")
              .field("kb", self->state.kb)
              .field("agent_type", self->state.agent_type)
              .field("processed", self->state.served)
              .field("mean_latency_ms",
                     self->state.served ? self->state.total_ms / self->state.served : 0.0)
              .end_object();
          return w.take();
        },
    };
  };
  return detached ? sys.spawn<caf::detached>(fun) : sys.spawn(fun);
}

agent_pool_actor spawn_agent_pool(caf::actor_system& sys, std::shared_ptr<kb_catalog> catalog,
                                  bool detached_agents) {
  return sys.spawn([catalog,
                    detached_agents](agent_pool_actor::stateful_pointer<agent_pool_state> self)
                       -> agent_pool_actor::behavior_type {
    self->state.catalog = catalog;
    // Agents are linked to the pool so they stop with it; an agent's own
    // death only removes it (it is respawned on the next resolve).
    self->set_exit_handler([=](caf::exit_msg& msg) {
      auto& agents = self->state.agents;
      for (auto i = agents.begin(); i != agents.end(); ++i) {
        if (i->second.address() == msg.source) {
          spdlog::warn("agent_pool: agent {} stopped ({}); it will be respawned on demand",
                       i->first, self->system().render(msg.reason));
          agents.erase(i);
          return;
        }
      }
      self->quit(msg.reason);
    });
    return {
        [=](atom::resolve, const std::string& worker_name) -> caf::result<retrieval_agent_actor> {
          auto parsed = parse_worker_name(worker_name);
          if (!parsed)
            return std::move(parsed.error());
          if (parsed->agent_type.empty() || !is_agent_type(parsed->agent_type))
            return make_error(errc::invalid_request,
                              "unknown agent_type \"" + parsed->agent_type + "\"");
          auto kb = kb_of(*parsed);
          if (!self->state.catalog->get(kb))
            return make_error(errc::not_found,
                              "unknown knowledge base \"" + (kb.empty() ? "default" : kb) + "\"");
          ++self->state.resolved;
          // instance_key = the normalised worker_name (never a session id).
          auto key = format_worker_name(parsed->kb_prefix, parsed->agent_type);
          auto& agents = self->state.agents;
          if (auto i = agents.find(key); i != agents.end())
            return i->second;
          auto agent =
              spawn_retrieval_agent(self->system(), self->state.catalog, kb, parsed->agent_type,
                                    detached_agents);
          self->link_to(agent);
          agents.emplace(key, agent);
          return agent;
        },
        [=](atom::status) -> std::string {
          json_writer w;
          w.begin_object()
              .field("kind", "agent_pool")
              .field("name", "agent_pool")
              .field("resolved", self->state.resolved);
          w.key("agents").begin_array();
          for (auto& [key, agent] : self->state.agents)
            w.value(key);
          w.end_array().end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
