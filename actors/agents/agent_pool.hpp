// The agent pool (RAGAgentManager, seed 000): resolves a worker_name to a
// resident retrieval agent, keyed by instance_key = worker_name, spawned
// lazily and never keyed by session. Agents that die are dropped and
// respawned on the next resolve.
//
// An agent serves many queries at once: it hands each to the least busy of
// its workers (actors of their own, linked to it and respawned when they
// die), which search the KB's immutable snapshot side by side. A worker
// never blocks: a remote embedding model and the rerank endpoint answer on
// the HTTP client's thread, the answer comes back as a message, and the
// worker searches other queries meanwhile.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

class kb_catalog;

namespace llm {
class openai_client;
}

// Who reranks the results of KBs with enable_rerank: an OpenAI-compatible
// /rerank endpoint when configured (retrieval.rerank_base_url), else the
// model, listwise; neither = results stay in fused order. `model` (set when
// answers come from a model) also judges deep_research_agent's rounds
// (llm/research_judge.hpp); without it deep research uses RM3 alone.
struct reranker {
  std::shared_ptr<llm::openai_client> endpoint;
  llm_actor model;
};

// The pool's place in a cluster (docs/cluster.md); the defaults are a
// single node that hosts every KB.
struct pool_cluster_settings {
  std::string node = "local";  // this node's name, for `served_by`
  bool retrieval = true;       // [cluster] roles has "retrieval"
  std::string kbs = "*";       // [cluster] kbs: KBs whose agents run here
  // How long one attempt on a replica may take before it is retried
  // elsewhere (a node that goes down is retried at once).
  caf::timespan attempt_timeout = std::chrono::seconds(30);
  // A query whose KB has no replica left waits this long for one to come
  // back, when a node hosting the KB was lost less than this ago (a lost
  // connection is dialled again a heartbeat later); 0 = fail at once.
  caf::timespan replica_wait = std::chrono::seconds(2);
};

// `workers`: workers per agent, i.e. how many queries of one (KB, agent
// type) are searched at the same time ([retrieval] agent_workers).
agent_pool_actor spawn_agent_pool(caf::actor_system& sys, std::shared_ptr<kb_catalog> catalog,
                                  size_t workers = 1, reranker rr = {},
                                  pool_cluster_settings cluster = {});

// A retrieval agent of `agent_type` (retrieval/agents.hpp) over the latest
// snapshot of `kb` with `workers` workers: each request searches the
// snapshot current when it arrived, whole, so an ingest swaps indexes under
// it without a restart and a search never sees a half-built index.
retrieval_agent_actor spawn_retrieval_agent(caf::actor_system& sys,
                                            std::shared_ptr<kb_catalog> catalog, std::string kb,
                                            std::string agent_type, size_t workers = 1,
                                            reranker rr = {});

}  // namespace ragtor
