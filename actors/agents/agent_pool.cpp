#include "actors/agents/agent_pool.hpp"
#include "actors/request_timeout.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"
#include "actors/admin/measured.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <atomic>
#include <chrono>
#include <unordered_map>
#include <variant>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/cluster/cluster.hpp"
#include "llm/openai_client.hpp"
#include "llm/rerank.hpp"
#include "llm/research_judge.hpp"
#include "protocol/elapsed.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

namespace {
const log::component lg{"agents"};
}  // namespace

namespace {

// Counters of one agent, shared by its router and workers so that `status`
// answers at once (a worker in the middle of a search could not).
struct agent_stats {
  std::atomic<uint64_t> served{0}, failed{0}, reranked{0}, rerank_fallbacks{0};
  // deep_research_agent with a model: verdicts used, and fallbacks to
  // pseudo-relevance feedback (model failed or its reply was unusable).
  std::atomic<uint64_t> research_verdicts{0}, research_fallbacks{0};
  std::atomic<uint64_t> total_us{0};  // search time, without reranking
};

// What a worker needs; the same for every worker of an agent.
struct worker_config {
  std::shared_ptr<kb_catalog> catalog;
  std::string kb;
  std::string agent_type;
  reranker rr;  // who reranks results of KBs with enable_rerank
  std::shared_ptr<agent_stats> stats;
};

struct retrieval_worker_state {
  static inline const char* name = "retrieval_worker";
  worker_config cfg;
  // Queries waiting for the embedding model, with the snapshot they search
  // (the one current when they arrived).
  struct pending_embedding {
    caf::typed_response_promise<retrieval_result> promise;
    std::shared_ptr<const kb_snapshot> snapshot;
    std::string query;
    retrieve_options opts;
    std::chrono::steady_clock::time_point started;
  };
  std::unordered_map<uint64_t, pending_embedding> embedding;
  // Calls to the rerank endpoint in flight.
  struct pending_rerank {
    caf::typed_response_promise<retrieval_result> promise;
    retrieval_result result;
    size_t keep = 0;
    std::chrono::steady_clock::time_point t0;
  };
  std::unordered_map<uint64_t, pending_rerank> reranking;
  uint64_t next_call = 0;
  uint64_t searched = 0;  // queries answered by this worker
};

// The agent `resolve` hands out: dispatches each query to its least busy
// worker and relays the answer.
struct retrieval_agent_state {
  static inline const char* name = "retrieval_agent";
  worker_config cfg;
  struct slot {
    retrieval_worker_actor worker;
    uint64_t in_flight = 0;
    uint64_t generation = 0;  // bumped when the worker is respawned
  };
  std::vector<slot> workers;
  size_t next = 0;  // where the search for the least busy worker starts
  uint64_t in_flight = 0;
  uint64_t restarts = 0;
};

// Another node's pool, serving these KBs (docs/cluster.md).
struct remote_pool {
  agent_pool_actor pool;
  std::string kbs;  // comma-separated; "*" = all
  uint64_t in_flight = 0;
  uint64_t served = 0;
  uint64_t failed = 0;
};

// A query handed to a replica: retried once elsewhere when that attempt
// fails or its node goes down; with no replica left, it may wait for its
// KB's lost node to come back (`waiting`).
struct pool_query {
  caf::typed_response_promise<retrieval_result> rp;
  std::string worker_name;
  std::string kb;
  std::string query;
  std::string thread_id;
  retrieve_options opts;
  std::string node;            // serving it now ("" = this node)
  uint64_t attempt = 0;        // answers of older attempts are ignored
  uint64_t sent = 0;           // attempts made (at most max_attempts)
  std::set<std::string> tried; // nodes tried ("" = this node)
  caf::error last_error;
  bool waiting = false;        // for a replica to come back
  caf::actor_addr sent_to;     // the remote pool of the attempt in flight
};

// A node whose pool was dropped (suspect, down, connection lost): queries
// of its KBs wait up to replica_wait after `at` for it to come back.
struct lost_replica {
  std::string kbs;
  std::chrono::steady_clock::time_point at;
};

struct agent_pool_state {
  static inline const char* name = "agent_pool";
  std::shared_ptr<kb_catalog> catalog;
  std::unordered_map<std::string, retrieval_agent_actor> agents;  // instance_key -> agent
  size_t workers = 1;                                             // per agent
  reranker rr;
  pool_cluster_settings cluster;
  std::map<std::string, remote_pool> remotes;  // by node name
  std::map<std::string, lost_replica> lost;    // by node name, until back
  std::unordered_map<uint64_t, pool_query> queries;  // in flight, by id
  uint64_t next_query = 0;
  uint64_t rotation = 0;  // round-robin among equally busy replicas
  uint64_t local_in_flight = 0;
  uint64_t resolved = 0;
  uint64_t served_locally = 0;
  uint64_t retried = 0;
  uint64_t attempts = 0;
  uint64_t waited = 0;  // queries that waited for a replica to come back
};

}  // namespace

namespace {

using worker_ptr = measured_pointer<retrieval_worker_actor, retrieval_worker_state>;
using agent_ptr = measured_pointer<retrieval_agent_actor, retrieval_agent_state>;
using result_promise = caf::typed_response_promise<retrieval_result>;
using steady = std::chrono::steady_clock;

constexpr auto rerank_timeout = std::chrono::seconds(30);

// How long deep research waits for the model's verdict on one round; at
// most research_max_rounds - 1 verdicts per query.
constexpr auto research_judge_timeout = std::chrono::seconds(20);

// How long the agent waits for a worker: only a backstop for an answer
// lost with a worker that died holding it (callers time out much sooner;
// the embedding and rerank clients have their own timeouts).
constexpr auto worker_timeout = std::chrono::minutes(10);

void add_trace(retrieval_result& r, std::string detail, steady::time_point t0) {
  r.trace.push_back({"rerank", std::move(detail),
                     std::chrono::duration<double, std::milli>(steady::now() - t0).count()});
}

// Reorders by `order` (indexes, best first; the others follow in fused
// order) and keeps `keep`; the trace names the reranker and what it kept.
retrieval_result reordered(worker_ptr self, retrieval_result r, std::vector<size_t> order,
                           size_t keep, const std::string& who, steady::time_point t0) {
  auto n = r.retrieval_results.size();
  std::vector<bool> seen(n, false);
  for (auto i : order)
    seen[i] = true;
  for (size_t i = 0; i < n; ++i)
    if (!seen[i])
      order.push_back(i);
  ++self->state.cfg.stats->reranked;
  std::string shown;
  for (size_t i = 0; i < order.size() && i < keep; ++i)
    shown += (i ? "," : "") + std::to_string(order[i] + 1);
  llm::apply_rerank(r, order, keep);
  add_trace(r, who + ": " + std::to_string(n) + " candidates, kept " + shown, t0);
  return r;
}

// Any rerank failure keeps the fused order (seed 004).
retrieval_result fused_order(worker_ptr self, retrieval_result r, size_t keep,
                             const std::string& why, steady::time_point t0) {
  ++self->state.cfg.stats->rerank_fallbacks;
  std::vector<size_t> fused(r.retrieval_results.size());
  for (size_t i = 0; i < fused.size(); ++i)
    fused[i] = i;
  llm::apply_rerank(r, fused, keep);
  add_trace(r, why + "; the fused order is kept", t0);
  return r;
}

// Listwise rerank by the model.
void rerank_by_model(worker_ptr self, result_promise rp, std::string query, retrieval_result result,
                     size_t keep) {
  auto t0 = steady::now();
  auto n = result.retrieval_results.size();
  tidy_request(self, self->state.cfg.rr.model, rerank_timeout, atom::complete_v,
                llm::rerank_request(query, result.retrieval_results))
      .then(
          [=](completion_result& reply) mutable {
            auto order = llm::parse_rerank_reply(reply.text, n);
            if (order)
              rp.deliver(
                  reordered(self, std::move(result), std::move(*order), keep, "llm listwise", t0));
            else
              rp.deliver(fused_order(self, std::move(result), keep,
                                     "the model's ranking was unusable", t0));
          },
          [=](caf::error& err) mutable {
            rp.deliver(fused_order(self, std::move(result), keep,
                                   "rerank failed: " + error_message(err), t0));
          });
}

// The rerank endpoint: the HTTP client answers on its own thread, the
// answer comes back as a message and the promise is delivered here.
void rerank_by_endpoint(worker_ptr self, result_promise rp, const std::string& query,
                        retrieval_result result, size_t keep) {
  auto& st = self->state;
  auto call = st.next_call++;
  std::vector<std::string> docs;
  for (auto& item : result.retrieval_results)
    docs.push_back(item.evidence);
  st.reranking.emplace(call, retrieval_worker_state::pending_rerank{
                                 std::move(rp), std::move(result), keep, steady::now()});
  auto me = retrieval_worker_actor{self};
  st.cfg.rr.endpoint->rerank(query, std::move(docs), [me, call](llm::rerank_result r) {
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
}

void on_rerank_reply(worker_ptr self, uint64_t call, rerank_reply& reply) {
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
                              "endpoint " + st.cfg.rr.endpoint->config().model, p.t0));
}

// A finished search: counted, then reranked if the KB wants it.
void searched(worker_ptr self, result_promise rp, const kb_snapshot& snapshot,
              const std::string& query, const retrieve_options& opts, retrieval_result result,
              steady::time_point started) {
  auto& cfg = self->state.cfg;
  ++self->state.searched;
  auto k = static_cast<size_t>(opts.top_k > 0 ? opts.top_k : 5);
  auto& settings = snapshot.settings;
  bool reranking = settings.enable_rerank && (cfg.rr.endpoint || cfg.rr.model);
  ++cfg.stats->served;
  auto took = steady::now() - started;
  cfg.stats->total_us += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(took).count());
  metrics::global().retrieval_duration.with(cfg.agent_type).observe(
      std::chrono::duration<double>(took).count());
  if (!reranking) {
    rp.deliver(std::move(result));
    return;
  }
  auto keep = settings.rerank_top_k > 0 ? static_cast<size_t>(settings.rerank_top_k) : k;
  if (result.retrieval_results.size() <= 3) {
    if (result.retrieval_results.size() > keep) {
      result.retrieval_results.resize(keep);
      fill_ids_and_context(result);
    }
    add_trace(result, "skipped: 3 or fewer results", steady::now());
    rp.deliver(std::move(result));
    return;
  }
  if (cfg.rr.endpoint)
    rerank_by_endpoint(self, std::move(rp), query, std::move(result), keep);
  else
    rerank_by_model(self, std::move(rp), query, std::move(result), keep);
}

// Deep research with a model (DESIGN §6): after each round the model says
// whether the evidence answers the question and, if not, what to search
// next; a failed call or an unusable reply hands the remaining rounds to
// pseudo-relevance feedback (RM3), as without a model. The rounds search
// on this worker between verdicts; the worker serves other queries while
// a verdict is awaited.
struct research_job {
  result_promise rp;
  std::shared_ptr<const kb_snapshot> snapshot;
  std::string query;
  retrieve_options opts;
  steady::time_point started;
  research_state st;
  std::vector<std::string> queries;  // searched so far, the question first
};

void research_done(worker_ptr self, std::shared_ptr<research_job> job) {
  auto r = research_result(*job->snapshot, std::move(job->st));
  finish_result(*job->snapshot, r);
  searched(self, std::move(job->rp), *job->snapshot, job->query, job->opts, std::move(r),
           job->started);
}

void research_judge(worker_ptr self, std::shared_ptr<research_job> job) {
  if (job->st.round >= research_max_rounds) {
    research_done(self, std::move(job));
    return;
  }
  auto t0 = steady::now();
  auto req = llm::research_judge_request(
      job->query, job->queries,
      research_evidence(*job->snapshot, job->st, research_feedback_chunks));
  tidy_request(self, self->state.cfg.rr.model, research_judge_timeout, atom::complete_v, std::move(req))
      .then(
          [=](completion_result& reply) {
            auto& stats = *self->state.cfg.stats;
            switch (llm::apply_research_verdict(*job->snapshot, job->st, job->queries, reply.text,
                                                ms_since(t0))) {
              case llm::research_next::ask_again:
                ++stats.research_verdicts;
                research_judge(self, job);
                return;
              case llm::research_next::done:
                ++stats.research_verdicts;
                break;
              case llm::research_next::fell_back:
                ++stats.research_fallbacks;
                break;
            }
            research_done(self, job);
          },
          [=](caf::error& err) {
            ++self->state.cfg.stats->research_fallbacks;
            llm::research_fall_back(*job->snapshot, job->st, "model failed: " + error_message(err),
                                    ms_since(t0));
            research_done(self, job);
          });
}

// The search proper, once the query's vector is known: CPU only, over the
// snapshot the query arrived at; then reranking, if the KB wants it.
void search(worker_ptr self, result_promise rp, std::shared_ptr<const kb_snapshot> snapshot,
            const std::string& query, const retrieve_options& opts, const query_vector& qv,
            steady::time_point started) {
  auto& cfg = self->state.cfg;
  auto k = static_cast<size_t>(opts.top_k > 0 ? opts.top_k : 5);
  auto& settings = snapshot->settings;
  bool reranking = settings.enable_rerank && (cfg.rr.endpoint || cfg.rr.model);
  // The reranker chooses among more candidates than it keeps.
  auto depth = reranking ? std::max<size_t>(2 * k, 10) : k;
  if (cfg.agent_type == "deep_research_agent" && cfg.rr.model) {
    auto job = std::make_shared<research_job>();
    job->st = research_first_round(*snapshot, query, qv, depth);
    job->rp = std::move(rp);
    job->snapshot = std::move(snapshot);
    job->query = query;
    job->opts = opts;
    job->started = started;
    job->queries.push_back(query);
    research_judge(self, std::move(job));
    return;
  }
  retrieval_result result;
  try {
    result = run_agent(*snapshot, cfg.agent_type, query, qv, depth);
  } catch (const search_error& e) {
    ++cfg.stats->failed;
    rp.deliver(make_error(errc::retrieval_failed, e.what()));
    return;
  }
  searched(self, std::move(rp), *snapshot, query, opts, std::move(result), started);
}

// A remote embedding model answers on the HTTP client's thread; the vector
// comes back as a message and the search continues on this worker.
void embed_then_search(worker_ptr self, result_promise rp,
                       std::shared_ptr<const kb_snapshot> snapshot, const std::string& query,
                       const retrieve_options& opts, steady::time_point started) {
  auto& st = self->state;
  auto call = st.next_call++;
  auto embed = snapshot->embed;
  st.embedding.emplace(call, retrieval_worker_state::pending_embedding{
                                 std::move(rp), std::move(snapshot), query, opts, started});
  auto me = retrieval_worker_actor{self};
  embed->embed_async({query}, [me, call](std::variant<embedding_batch, std::string> r) {
    auto qv = to_query_vector(std::move(r));
    caf::anon_send(me, atom::embedded_v, call, std::move(qv.values), std::move(qv.error));
  });
}

retrieval_worker_actor::behavior_type retrieval_worker(worker_ptr self, worker_config cfg) {
  self->state.cfg = std::move(cfg);
  self->track("agent_worker", self->state.cfg.kb + "/" + self->state.cfg.agent_type);
  return {
      [=](atom::retrieve, const std::string& query, const std::string&,
          const retrieve_options& opts) -> caf::result<retrieval_result> {
        auto started = steady::now();
        auto& st = self->state;
        auto snapshot = st.cfg.catalog->get(st.cfg.kb);
        if (!snapshot)
          return make_error(errc::not_found, "unknown knowledge base \"" + st.cfg.kb + "\"");
        auto rp = self->make_response_promise<retrieval_result>();
        if (!needs_query_vector(*snapshot, st.cfg.agent_type)) {
          search(self, rp, std::move(snapshot), query, opts, {}, started);
        } else if (!snapshot->embed->remote()) {
          auto qv = embed_query(*snapshot, query);
          search(self, rp, std::move(snapshot), query, opts, qv, started);
        } else {
          embed_then_search(self, rp, std::move(snapshot), query, opts, started);
        }
        return rp;
      },
      [=](atom::rerank, uint64_t call, rerank_reply& reply) { on_rerank_reply(self, call, reply); },
      [=](atom::embedded, uint64_t call, std::vector<float>& values, std::string& error) {
        auto& st = self->state;
        auto i = st.embedding.find(call);
        if (i == st.embedding.end())
          return;
        auto p = std::move(i->second);
        st.embedding.erase(i);
        search(self, std::move(p.promise), std::move(p.snapshot), p.query, p.opts,
               query_vector{std::move(values), std::move(error)}, p.started);
      },
      [=](atom::status) -> std::string {
        auto& st = self->state;
        json_writer w;
        self->status_head(w);
        w.field("kb", st.cfg.kb)
            .field("agent_type", st.cfg.agent_type)
            .field("searched", st.searched)
            .field("awaiting_embedding", static_cast<uint64_t>(st.embedding.size()))
            .field("awaiting_rerank", static_cast<uint64_t>(st.reranking.size()))
            .end_object();
        return w.take();
      },
  };
}

// The least busy worker; ties go round-robin so idle workers share the load.
size_t pick_worker(retrieval_agent_state& st) {
  auto n = st.workers.size();
  auto best = st.next % n;
  for (size_t j = 1; j < n; ++j) {
    auto i = (st.next + j) % n;
    if (st.workers[i].in_flight < st.workers[best].in_flight)
      best = i;
  }
  st.next = best + 1;
  return best;
}

void spawn_worker(agent_ptr self, size_t i) {
  auto& slot = self->state.workers[i];
  slot.worker = self->spawn<caf::linked>(retrieval_worker, self->state.cfg);
  slot.in_flight = 0;
  ++slot.generation;
}

retrieval_agent_actor::behavior_type retrieval_agent(agent_ptr self, worker_config cfg,
                                                     size_t workers) {
  self->state.cfg = std::move(cfg);
  self->track("agent", self->state.cfg.kb + "/" + self->state.cfg.agent_type);
  self->state.workers.resize(std::max<size_t>(workers, 1));
  for (size_t i = 0; i < self->state.workers.size(); ++i)
    spawn_worker(self, i);
  // Workers are linked: a worker that dies is replaced (the queries it held
  // fail; queued ones fail at once); any other exit (the pool's) stops the
  // agent and with it the workers.
  self->set_exit_handler([=](caf::exit_msg& msg) {
    auto& st = self->state;
    for (size_t i = 0; i < st.workers.size(); ++i) {
      if (st.workers[i].worker.address() == msg.source) {
        lg->warn("retrieval_agent {}/{}: worker {} stopped ({}); respawned", st.cfg.kb,
                     st.cfg.agent_type, i, self->system().render(msg.reason));
        ++st.restarts;
        spawn_worker(self, i);
        return;
      }
    }
    self->quit(msg.reason);
  });
  return {
      [=](atom::retrieve, const std::string& query, const std::string& thread_id,
          const retrieve_options& opts) -> caf::result<retrieval_result> {
        auto& st = self->state;
        auto i = pick_worker(st);
        auto generation = st.workers[i].generation;
        ++st.workers[i].in_flight;
        ++st.in_flight;
        auto done = [=] {
          auto& st = self->state;
          --st.in_flight;
          if (st.workers[i].generation == generation)
            --st.workers[i].in_flight;
        };
        auto rp = self->make_response_promise<retrieval_result>();
        tidy_request(self, st.workers[i].worker, worker_timeout, atom::retrieve_v, query,
                     thread_id, opts)
            .then(
            [=](retrieval_result& r) mutable {
              done();
              rp.deliver(std::move(r));
            },
            [=](caf::error& err) mutable {
              done();
              rp.deliver(std::move(err));
            });
        return rp;
      },
      [=](atom::status) -> std::string {
        auto& st = self->state;
        auto& stats = *st.cfg.stats;
        uint64_t served = stats.served;
        json_writer w;
        self->status_head(w);
        w            .field("kb", st.cfg.kb)
            .field("agent_type", st.cfg.agent_type)
            .field("index_chunks", [&] {
              // The snapshot the next query will search.
              auto snap = st.cfg.catalog ? st.cfg.catalog->get(st.cfg.kb) : nullptr;
              return static_cast<uint64_t>(snap ? snap->chunks.size() : 0);
            }())
            .field("workers", static_cast<uint64_t>(st.workers.size()))
            .field("in_flight", st.in_flight)
            .field("worker_restarts", st.restarts)
            .field("processed", served)
            .field("failed", static_cast<uint64_t>(stats.failed))
            .field("reranked", static_cast<uint64_t>(stats.reranked))
            .field("rerank_fallbacks", static_cast<uint64_t>(stats.rerank_fallbacks))
            .field("research_verdicts", static_cast<uint64_t>(stats.research_verdicts))
            .field("research_fallbacks", static_cast<uint64_t>(stats.research_fallbacks))
            .field("mean_latency_ms",
                   served ? static_cast<double>(stats.total_us) / 1000.0 / served : 0.0);
        w.key("worker_in_flight").begin_array();
        for (auto& slot : st.workers)
          w.value(slot.in_flight);
        w.end_array().end_object();
        return w.take();
      },
  };
}

}  // namespace

retrieval_agent_actor spawn_retrieval_agent(caf::actor_system& sys,
                                            std::shared_ptr<kb_catalog> catalog, std::string kb,
                                            std::string agent_type, size_t workers, reranker rr) {
  worker_config cfg{std::move(catalog), std::move(kb), std::move(agent_type), std::move(rr),
                    std::make_shared<agent_stats>()};
  return sys.spawn(retrieval_agent, std::move(cfg), workers);
}

namespace {

using pool_ptr = measured_pointer<agent_pool_actor, agent_pool_state>;

// The local agent of `worker_name`, spawned on first use.
caf::expected<retrieval_agent_actor> local_agent(pool_ptr self, const std::string& worker_name) {
  auto parsed = parse_worker_name(worker_name);
  if (!parsed)
    return std::move(parsed.error());
  if (parsed->agent_type.empty() || !is_agent_type(parsed->agent_type))
    return make_error(errc::invalid_request, "unknown agent_type \"" + parsed->agent_type + "\"");
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
  auto agent = spawn_retrieval_agent(self->system(), self->state.catalog, kb, parsed->agent_type,
                                     self->state.workers, self->state.rr);
  self->link_to(agent);
  agents.emplace(key, agent);
  return agent;
}

// Whether this node's agents serve `kb` ([cluster] roles and kbs).
bool hosts_here(pool_ptr self, const std::string& kb) {
  auto& c = self->state.cluster;
  return c.retrieval && list_has(c.kbs, kb.empty() ? "default" : kb);
}

void dispatch(pool_ptr self, uint64_t id);

// Ends query `id` with `answer` (a result or an error). Taken by value:
// the answer is often the query's own last_error, which erasing the query
// destroys.
template <class T>
void finish(pool_ptr self, uint64_t id, T answer) {
  auto i = self->state.queries.find(id);
  if (i == self->state.queries.end())
    return;
  auto rp = std::move(i->second.rp);
  self->state.queries.erase(i);
  rp.deliver(std::move(answer));
}

// Errors that another replica would give as well.
bool final_error(const caf::error& err) {
  return err.category() == caf::atom("ragtor")
         && (err.code() == static_cast<uint8_t>(errc::invalid_request)
             || err.code() == static_cast<uint8_t>(errc::cancelled));
}

// At most this many attempts per query: the first, one on another replica,
// one on a node that came back.
constexpr uint64_t max_attempts = 3;

std::string kb_name(const pool_query& q) {
  return q.kb.empty() ? std::string{"default"} : q.kb;
}

caf::error unserved(const pool_query& q, const std::string& why) {
  return make_error(errc::unavailable, "no node serving knowledge base \"" + kb_name(q) + "\" " + why);
}

// The ids of the queries `pick` selects, collected before any is acted on
// (dispatching or finishing one changes the map).
template <class Pick>
std::vector<uint64_t> queries_where(const agent_pool_state& st, Pick pick) {
  std::vector<uint64_t> ids;
  for (auto& [id, q] : st.queries)
    if (pick(q))
      ids.push_back(id);
  return ids;
}

// Attempt `attempt` of query `id` answered.
void on_answer(pool_ptr self, uint64_t id, uint64_t attempt, caf::expected<retrieval_result> r) {
  auto& st = self->state;
  auto i = st.queries.find(id);
  if (i == st.queries.end() || i->second.attempt != attempt)
    return;  // retried elsewhere meanwhile (its node went down)
  auto& q = i->second;
  auto node = q.node;
  if (node.empty()) {
    --st.local_in_flight;
  } else if (auto p = st.remotes.find(node); p != st.remotes.end()) {
    auto& remote = p->second;
    remote.in_flight -= remote.in_flight > 0;  // 0: its handles were replaced
    ++(r ? remote.served : remote.failed);
    // Its proxy is dead: the connection was lost. Either the node is back
    // already (new handles), and may be tried again, or the cluster's
    // peer_down is on its way, and its KBs' queries may wait for it.
    if (!r && r.error() == caf::sec::request_receiver_down) {
      if (remote.pool.address() != q.sent_to)
        q.tried.erase(node);
      else
        st.lost[node] = lost_replica{remote.kbs, steady::now()};
    }
  }
  if (r) {
    if (node.empty()) {
      ++st.served_locally;
      r->trace.push_back(trace_step{"served_by", st.cluster.node, 0});
    }
    return finish(self, id, std::move(*r));
  }
  bool again = !final_error(r.error()) && !q.opts.local_only && q.tried.size() < 2
               && q.sent < max_attempts;
  if (!node.empty() || !final_error(r.error()))
    lg->warn("agent_pool: {} on {} failed ({}){}", q.worker_name,
                 node.empty() ? st.cluster.node : node, self->system().render(r.error()),
                 again ? "; trying again" : "");
  q.last_error = std::move(r.error());
  if (!again)
    return finish(self, id, std::move(q.last_error));
  ++st.retried;
  dispatch(self, id);
}

// Query `id` has no replica left: when a node hosting its KB was lost less
// than replica_wait ago, the query waits for that node to come back
// (peer_up) until replica_wait after the loss, and true is returned.
bool wait_for_replica(pool_ptr self, uint64_t id) {
  auto& st = self->state;
  auto& q = st.queries.at(id);
  if (q.opts.local_only || q.sent >= max_attempts)
    return false;
  auto kb = kb_name(q);
  auto now = steady::now();
  auto until = now;
  for (auto& [node, l] : st.lost)
    if (list_has(l.kbs, kb))
      until = std::max(until, l.at + st.cluster.replica_wait);
  if (until <= now)
    return false;
  if (!q.waiting)
    ++st.waited;
  q.waiting = true;
  q.node.clear();
  self->delayed_send(self, until - now, atom::tick_v, id);
  return true;
}

// Hands query `id` to the least busy replica of its KB not tried yet:
// this node's agent or another node's pool (ties: this node).
void dispatch(pool_ptr self, uint64_t id) {
  auto& st = self->state;
  auto& q = st.queries.at(id);
  bool local = !q.tried.count("") && (q.opts.local_only || hosts_here(self, q.kb));
  // The least busy remote replicas; ties take turns.
  std::vector<std::string> idlest;
  uint64_t remote_load = UINT64_MAX;
  if (!q.opts.local_only) {
    for (auto& [node, r] : st.remotes) {
      if (q.tried.count(node) || !list_has(r.kbs, kb_name(q)))
        continue;
      if (r.in_flight < remote_load) {
        idlest.clear();
        remote_load = r.in_flight;
      }
      if (r.in_flight == remote_load)
        idlest.push_back(node);
    }
  }
  std::string best;  // "" = this node
  if (!idlest.empty() && (!local || remote_load < st.local_in_flight))
    best = idlest[st.rotation++ % idlest.size()];
  if (best.empty() && !local) {
    if (wait_for_replica(self, id))
      return;
    if (q.last_error)
      return finish(self, id, std::move(q.last_error));
    if (!hosts_here(self, q.kb) && !q.tried.count(""))
      return finish(self, id, unserved(q, "is reachable"));
    return finish(self, id, make_error(errc::unavailable, "no replica left to try"));
  }
  auto attempt = ++q.attempt;
  ++q.sent;
  q.waiting = false;
  q.node = best;
  q.tried.insert(best);
  ++st.attempts;
  auto answer = [=](retrieval_result& r) { on_answer(self, id, attempt, std::move(r)); };
  auto fail = [=](caf::error& err) { on_answer(self, id, attempt, std::move(err)); };
  if (best.empty()) {
    auto agent = local_agent(self, q.worker_name);
    ++st.local_in_flight;
    if (!agent)
      return on_answer(self, id, attempt, std::move(agent.error()));
    tidy_request(self, *agent, st.cluster.attempt_timeout, atom::retrieve_v, q.query, q.thread_id,
                  q.opts)
        .then(answer, fail);
    return;
  }
  auto& r = st.remotes[best];
  ++r.in_flight;
  q.sent_to = r.pool.address();
  auto opts = q.opts;
  opts.local_only = true;
  tidy_request(self, r.pool, st.cluster.attempt_timeout, atom::retrieve_v, q.worker_name, q.query,
                q.thread_id, opts)
      .then(answer, fail);
}

std::string pool_status(pool_ptr self) {
  auto& st = self->state;
  json_writer w;
  self->status_head(w);
  w      .field("hosts", st.cluster.retrieval ? st.cluster.kbs : std::string{})
      .field("resolved", st.resolved)
      .field("workers_per_agent", static_cast<uint64_t>(st.workers))
      .field("in_flight", static_cast<uint64_t>(st.queries.size()))
      .field("attempts", st.attempts)
      .field("retried", st.retried)
      .field("waited_for_replica", st.waited)
      .field("waiting", static_cast<uint64_t>(
                            queries_where(st, [](const pool_query& q) { return q.waiting; }).size()))
      .field("served_locally", st.served_locally);
  w.key("agents").begin_array();
  for (auto& [key, agent] : st.agents)
    w.value(key);
  w.end_array();
  w.key("replicas").begin_array();
  for (auto& [node, r] : st.remotes) {
    w.begin_object()
        .field("node", node)
        .field("kbs", r.kbs)
        .field("in_flight", r.in_flight)
        .field("served", r.served)
        .field("failed", r.failed)
        .end_object();
  }
  w.end_array().end_object();
  return w.take();
}

}  // namespace

agent_pool_actor spawn_agent_pool(caf::actor_system& sys, std::shared_ptr<kb_catalog> catalog,
                                  size_t workers, reranker rr, pool_cluster_settings cluster) {
  return sys.spawn([catalog, workers, rr, cluster](pool_ptr self) -> agent_pool_actor::behavior_type {
    self->state.catalog = catalog;
    self->state.workers = std::max<size_t>(workers, 1);
    self->state.rr = rr;
    self->state.cluster = cluster;
    self->track("agent_pool", "agent_pool");
    // Agents are linked to the pool so they stop with it; an agent's own
    // death only removes it (it is respawned on the next resolve).
    self->set_exit_handler([=](caf::exit_msg& msg) {
      auto& agents = self->state.agents;
      for (auto i = agents.begin(); i != agents.end(); ++i) {
        if (i->second.address() == msg.source) {
          lg->warn("agent_pool: agent {} stopped ({}); it will be respawned on demand",
                       i->first, self->system().render(msg.reason));
          agents.erase(i);
          return;
        }
      }
      self->quit(msg.reason);
    });
    return {
        [=](atom::resolve, const std::string& worker_name) -> caf::result<retrieval_agent_actor> {
          auto agent = local_agent(self, worker_name);
          if (!agent)
            return std::move(agent.error());
          return std::move(*agent);
        },
        [=](atom::retrieve, const std::string& worker_name, const std::string& query,
            const std::string& thread_id,
            const retrieve_options& opts) -> caf::result<retrieval_result> {
          auto parsed = parse_worker_name(worker_name);
          if (!parsed)
            return std::move(parsed.error());
          if (parsed->agent_type.empty() || !is_agent_type(parsed->agent_type))
            return make_error(errc::invalid_request,
                              "unknown agent_type \"" + parsed->agent_type + "\"");
          auto& st = self->state;
          auto id = ++st.next_query;
          auto& q = st.queries[id];
          q.rp = self->make_response_promise<retrieval_result>();
          q.worker_name = worker_name;
          q.kb = kb_of(*parsed);
          q.query = query;
          q.thread_id = thread_id;
          q.opts = opts;
          auto rp = q.rp;
          dispatch(self, id);
          return rp;
        },
        [=](atom::peer_up, const std::string& node, caf::actor& pool, const std::string& kbs) {
          auto& st = self->state;
          auto& r = st.remotes[node];
          r.pool = caf::actor_cast<agent_pool_actor>(pool);
          r.kbs = kbs;
          st.lost.erase(node);
          // Queries waiting for a replica of these KBs: this node, back
          // (new handles), may be tried again.
          auto woken = queries_where(
              st, [&](const pool_query& q) { return q.waiting && list_has(kbs, kb_name(q)); });
          for (auto id : woken) {
            st.queries.at(id).tried.erase(node);
            dispatch(self, id);
          }
        },
        [=](atom::peer_down, const std::string& node) {
          auto& st = self->state;
          auto r = st.remotes.find(node);
          if (r == st.remotes.end())
            return;
          st.lost[node] = lost_replica{r->second.kbs, steady::now()};
          st.remotes.erase(r);
          // Queries in flight there: retried elsewhere now, not after
          // their timeout (a dead node's requests are never answered).
          auto orphans = queries_where(st, [&](const pool_query& q) { return q.node == node; });
          for (auto id : orphans) {
            auto& q = st.queries.at(id);
            q.last_error = make_error(errc::unavailable, "node " + node + " went down");
            ++q.attempt;  // its answer, if any, no longer counts
            q.node.clear();
            if (q.opts.local_only || q.tried.size() >= 2) {
              finish(self, id, std::move(q.last_error));
              continue;
            }
            ++st.retried;
            dispatch(self, id);
          }
        },
        [=](atom::tick, uint64_t id) {
          // The wait is over (a later wait has its own tick).
          auto i = self->state.queries.find(id);
          if (i == self->state.queries.end() || !i->second.waiting
              || wait_for_replica(self, id))
            return;
          auto& q = i->second;
          if (q.last_error)
            return finish(self, id, std::move(q.last_error));
          auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
              self->state.cluster.replica_wait);
          finish(self, id, unserved(q, "came back within " + std::to_string(wait.count()) + " ms"));
        },
        [=](atom::status) -> std::string { return pool_status(self); },
    };
  });
}

}  // namespace ragtor
