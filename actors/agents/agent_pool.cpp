#include "actors/agents/agent_pool.hpp"

#include <chrono>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "llm/openai_client.hpp"
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
  reranker rr;  // who reranks results of KBs with enable_rerank
  // Calls to the rerank endpoint in flight.
  struct pending_rerank {
    caf::typed_response_promise<retrieval_result> promise;
    retrieval_result result;
    size_t keep = 0;
    std::chrono::steady_clock::time_point t0;
  };
  std::unordered_map<uint64_t, pending_rerank> reranking;
  uint64_t next_call = 0;
  uint64_t served = 0, failed = 0, reranked = 0, rerank_fallbacks = 0;
  double total_ms = 0;
};

struct agent_pool_state {
  static inline const char* name = "agent_pool";
  std::shared_ptr<kb_catalog> catalog;
  std::unordered_map<std::string, retrieval_agent_actor> agents;  // instance_key -> agent
  reranker rr;
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

// Reorders by `order` (indexes, best first; the others follow in fused
// order) and keeps `keep`; the trace names the reranker and what it kept.
retrieval_result reordered(agent_ptr self, retrieval_result r, std::vector<size_t> order,
                           size_t keep, const std::string& who,
                           std::chrono::steady_clock::time_point t0) {
  auto n = r.retrieval_results.size();
  std::vector<bool> seen(n, false);
  for (auto i : order)
    seen[i] = true;
  for (size_t i = 0; i < n; ++i)
    if (!seen[i])
      order.push_back(i);
  ++self->state.reranked;
  std::string shown;
  for (size_t i = 0; i < order.size() && i < keep; ++i)
    shown += (i ? "," : "") + std::to_string(order[i] + 1);
  llm::apply_rerank(r, order, keep);
  add_trace(r, who + ": " + std::to_string(n) + " candidates, kept " + shown, t0);
  return r;
}

// Any rerank failure keeps the fused order (seed 004).
retrieval_result fused_order(agent_ptr self, retrieval_result r, size_t keep,
                             const std::string& why, std::chrono::steady_clock::time_point t0) {
  ++self->state.rerank_fallbacks;
  std::vector<size_t> fused(r.retrieval_results.size());
  for (size_t i = 0; i < fused.size(); ++i)
    fused[i] = i;
  llm::apply_rerank(r, fused, keep);
  add_trace(r, why + "; the fused order is kept", t0);
  return r;
}

// Listwise rerank by the model.
caf::result<retrieval_result> rerank_by_model(agent_ptr self, std::string query,
                                              retrieval_result result, size_t keep) {
  auto t0 = std::chrono::steady_clock::now();
  auto n = result.retrieval_results.size();
  auto rp = self->make_response_promise<retrieval_result>();
  self->request(self->state.rr.model, rerank_timeout, atom::complete_v,
                llm::rerank_request(query, result.retrieval_results))
      .then(
          [=](completion_result& reply) mutable {
            auto order = llm::parse_rerank_reply(reply.text, n);
            if (order)
              rp.deliver(reordered(self, std::move(result), std::move(*order), keep,
                                   "llm listwise", t0));
            else
              rp.deliver(fused_order(self, std::move(result), keep,
                                     "the model's ranking was unusable", t0));
          },
          [=](caf::error& err) mutable {
            rp.deliver(fused_order(self, std::move(result), keep,
                                   "rerank failed: " + error_message(err), t0));
          });
  return rp;
}

// The rerank endpoint: the HTTP client answers on its own thread, the
// answer comes back as a message and the promise is delivered here.
caf::result<retrieval_result> rerank_by_endpoint(agent_ptr self, const std::string& query,
                                                 retrieval_result result, size_t keep) {
  auto& st = self->state;
  auto call = st.next_call++;
  std::vector<std::string> docs;
  for (auto& item : result.retrieval_results)
    docs.push_back(item.evidence);
  auto rp = self->make_response_promise<retrieval_result>();
  st.reranking.emplace(call, retrieval_agent_state::pending_rerank{
                                 rp, std::move(result), keep, std::chrono::steady_clock::now()});
  auto me = retrieval_agent_actor{self};
  st.rr.endpoint->rerank(query, std::move(docs), [me, call](llm::rerank_result r) {
    rerank_reply reply;
    if (auto* e = std::get_if<llm::llm_error>(&r)) {
      reply.error = e->message;
    } else {
      for (auto& hit : std::get<std::vector<llm::rerank_hit>>(r)) {
        reply.order.push_back(static_cast<int32_t>(hit.index));
        reply.scores.push_back(hit.score);
      }
    }
    caf::anon_send(me, atom::rerank_v, call, std::move(reply));
  });
  return rp;
}

void on_rerank_reply(agent_ptr self, uint64_t call, rerank_reply& reply) {
  auto& st = self->state;
  auto i = st.reranking.find(call);
  if (i == st.reranking.end())
    return;
  auto p = std::move(i->second);
  st.reranking.erase(i);
  if (!reply.error.empty()) {
    p.promise.deliver(fused_order(self, std::move(p.result), p.keep,
                                  "rerank endpoint failed: " + reply.error, p.t0));
    return;
  }
  // The client checked the indexes (llm::parse_rerank); the items take
  // the reranker's scores.
  std::vector<size_t> order;
  for (size_t i = 0; i < reply.order.size(); ++i) {
    auto x = static_cast<size_t>(reply.order[i]);
    order.push_back(x);
    p.result.retrieval_results[x].score = reply.scores[i];
  }
  p.promise.deliver(reordered(self, std::move(p.result), std::move(order), p.keep,
                              "endpoint " + st.rr.endpoint->config().model, p.t0));
}

}  // namespace

retrieval_agent_actor spawn_retrieval_agent(caf::actor_system& sys,
                                            std::shared_ptr<kb_catalog> catalog, std::string kb,
                                            std::string agent_type, bool detached, reranker rr) {
  auto fun = [catalog, kb, agent_type,
              rr](agent_ptr self) -> retrieval_agent_actor::behavior_type {
    self->state.catalog = catalog;
    self->state.kb = kb;
    self->state.agent_type = agent_type;
    self->state.rr = rr;
    return {
        [=](atom::retrieve, const std::string& query, const std::string& thread_id,
            const retrieve_options& opts) -> caf::result<retrieval_result> {
          auto started = std::chrono::steady_clock::now();
          auto snapshot = self->state.catalog->get(self->state.kb);
          if (!snapshot)
            return make_error(errc::not_found, "unknown knowledge base \"" + self->state.kb + "\"");
          auto k = static_cast<size_t>(opts.top_k > 0 ? opts.top_k : 5);
          auto& settings = snapshot->settings;
          auto& rr = self->state.rr;
          bool reranking = settings.enable_rerank && (rr.endpoint || rr.model);
          // The reranker chooses among more candidates than it keeps.
          auto depth = reranking ? std::max<size_t>(2 * k, 10) : k;
          retrieval_result result;
          try {
            result = run_agent(*snapshot, self->state.agent_type, query, depth);
          } catch (const search_error& e) {
            ++self->state.failed;
            return make_error(errc::retrieval_failed, e.what());
          }
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
          if (rr.endpoint)
            return rerank_by_endpoint(self, query, std::move(result), keep);
          return rerank_by_model(self, query, std::move(result), keep);
        },
        [=](atom::rerank, uint64_t call, rerank_reply& reply) {
          on_rerank_reply(self, call, reply);
        },
        [=](atom::status) -> std::string {
          json_writer w;
          w.begin_object()
              .field("kind", "retrieval_agent")
              .field("name", "retrieval_agent")
              .field("kb", self->state.kb)
              .field("agent_type", self->state.agent_type)
              .field("processed", self->state.served)
              .field("failed", self->state.failed)
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
                                  bool detached_agents, reranker rr) {
  return sys.spawn([catalog, detached_agents,
                    rr](agent_pool_actor::stateful_pointer<agent_pool_state> self)
                       -> agent_pool_actor::behavior_type {
    self->state.catalog = catalog;
    self->state.rr = rr;
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
                                             parsed->agent_type, detached_agents, self->state.rr);
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
