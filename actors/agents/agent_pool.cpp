#include "actors/agents/agent_pool.hpp"

#include <chrono>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "llm/rerank.hpp"
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
  llm_actor llm;  // reranks when the KB enables it; null = no model
  uint64_t served = 0, reranked = 0, rerank_fallbacks = 0;
  double total_ms = 0;
};

struct agent_pool_state {
  static inline const char* name = "agent_pool";
  std::shared_ptr<kb_catalog> catalog;
  std::unordered_map<std::string, retrieval_agent_actor> agents;  // instance_key -> agent
  llm_actor llm;
  uint64_t resolved = 0;
};

}  // namespace

namespace {

using agent_ptr = retrieval_agent_actor::stateful_pointer<retrieval_agent_state>;

constexpr auto rerank_timeout = std::chrono::seconds(30);

void add_trace(retrieval_result& r, std::string detail, std::chrono::steady_clock::time_point t0) {
  r.trace.push_back(
      {"rerank", std::move(detail),
       std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()});
}

// Listwise rerank by the model; any failure keeps the fused order.
caf::result<retrieval_result> rerank(agent_ptr self, std::string query, retrieval_result result,
                                     size_t keep) {
  auto t0 = std::chrono::steady_clock::now();
  auto n = result.retrieval_results.size();
  auto rp = self->make_response_promise<retrieval_result>();
  auto fallback = [=](retrieval_result r, std::string why) mutable {
    ++self->state.rerank_fallbacks;
    std::vector<size_t> fused(n);
    for (size_t i = 0; i < n; ++i)
      fused[i] = i;
    llm::apply_rerank(r, fused, keep);
    add_trace(r, why + "; the fused order is kept", t0);
    rp.deliver(std::move(r));
  };
  self->request(self->state.llm, rerank_timeout, atom::complete_v,
                llm::rerank_request(query, result.retrieval_results))
      .then(
          [=](completion_result& reply) mutable {
            auto order = llm::parse_rerank_reply(reply.text, n);
            if (!order)
              return fallback(std::move(result), "the model's ranking was unusable");
            ++self->state.reranked;
            std::string shown;
            for (size_t i = 0; i < order->size() && i < keep; ++i)
              shown += (i ? "," : "") + std::to_string((*order)[i] + 1);
            llm::apply_rerank(result, *order, keep);
            add_trace(result, "llm listwise: " + std::to_string(n) + " candidates, kept " + shown,
                      t0);
            rp.deliver(std::move(result));
          },
          [=](caf::error& err) mutable {
            fallback(std::move(result), "rerank failed: " + error_message(err));
          });
  return rp;
}

}  // namespace

retrieval_agent_actor spawn_retrieval_agent(caf::actor_system& sys,
                                            std::shared_ptr<kb_catalog> catalog, std::string kb,
                                            std::string agent_type, bool detached, llm_actor llm) {
  auto fun = [catalog, kb, agent_type,
              llm](agent_ptr self) -> retrieval_agent_actor::behavior_type {
    self->state.catalog = catalog;
    self->state.kb = kb;
    self->state.agent_type = agent_type;
    self->state.llm = llm;
    return {
        [=](atom::retrieve, const std::string& query, const std::string& thread_id,
            const retrieve_options& opts) -> caf::result<retrieval_result> {
          auto started = std::chrono::steady_clock::now();
          auto snapshot = self->state.catalog->get(self->state.kb);
          if (!snapshot)
            return make_error(errc::not_found, "unknown knowledge base \"" + self->state.kb + "\"");
          auto k = static_cast<size_t>(opts.top_k > 0 ? opts.top_k : 5);
          auto& settings = snapshot->settings;
          bool reranking = settings.enable_rerank && self->state.llm;
          // The reranker chooses among more candidates than it keeps.
          auto depth = reranking ? std::max<size_t>(2 * k, 10) : k;
          auto result = run_agent(*snapshot, self->state.agent_type, query, depth);
          auto ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count();
          ++self->state.served;
          self->state.total_ms += ms;
          if (!reranking)
            return result;
          auto keep = settings.rerank_top_k > 0 ? static_cast<size_t>(settings.rerank_top_k) : k;
          if (result.retrieval_results.size() <= 3) {
            if (result.retrieval_results.size() > keep) {
              result.retrieval_results.resize(keep);
              fill_ids_and_context(result);
            }
            add_trace(result, "skipped: 3 or fewer results", std::chrono::steady_clock::now());
            return result;
          }
          return rerank(self, query, std::move(result), keep);
        },
        [=](atom::status) -> std::string {
          json_writer w;
          w.begin_object()
              .field("kind", "retrieval_agent")
              .field("name", "retrieval_agent")
              .field("kb", self->state.kb)
              .field("agent_type", self->state.agent_type)
              .field("processed", self->state.served)
              .field("reranked", self->state.reranked)
              .field("rerank_fallbacks", self->state.rerank_fallbacks)
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
                                  bool detached_agents, llm_actor llm) {
  return sys.spawn([catalog, detached_agents,
                    llm](agent_pool_actor::stateful_pointer<agent_pool_state> self)
                       -> agent_pool_actor::behavior_type {
    self->state.catalog = catalog;
    self->state.llm = llm;
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
          auto agent = spawn_retrieval_agent(self->system(), self->state.catalog, kb,
                                             parsed->agent_type, detached_agents, self->state.llm);
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
