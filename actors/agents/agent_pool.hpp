// The agent pool (RAGAgentManager, seed 000): resolves a worker_name to a
// resident retrieval agent, keyed by instance_key = worker_name, spawned
// lazily and never keyed by session. Agents that die are dropped and
// respawned on the next resolve.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

class kb_catalog;

namespace llm {
class openai_client;
}

// Who reranks the results of KBs with enable_rerank: an OpenAI-compatible
// /rerank endpoint when configured (retrieval.rerank_base_url), else the
// model, listwise; neither = results stay in fused order.
struct reranker {
  std::shared_ptr<llm::openai_client> endpoint;
  llm_actor model;
};

// `detached_agents`: agents get their own threads because their work blocks
// (query embedding over the network with a remote embedder).
agent_pool_actor spawn_agent_pool(caf::actor_system& sys, std::shared_ptr<kb_catalog> catalog,
                                  bool detached_agents = false, reranker rr = {});

// A retrieval agent of `agent_type` (retrieval/agents.hpp) over the latest
// snapshot of `kb`: each request uses the snapshot current at that moment,
// so an ingest swaps indexes under it without a restart.
retrieval_agent_actor spawn_retrieval_agent(caf::actor_system& sys,
                                            std::shared_ptr<kb_catalog> catalog, std::string kb,
                                            std::string agent_type, bool detached = false,
                                            reranker rr = {});

}  // namespace ragtor
