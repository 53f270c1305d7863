// The five retrieval strategies (DESIGN §4.1, §6) as plain functions over a
// KB snapshot, so actors, the /search API and the evaluation bench share
// them. Each returns a RetrievalResult with a trace of what it did. When
// the embedding model fails at query time, agents with a BM25 leg go on
// without vectors and say so in the trace ("vector failed: ...").
//   naive_rag_agent      vector leg only (fails if the embedding model does)
//   hybrid_agent         BM25 + vectors, thresholded per leg, weighted RRF
//   graph_agent          entity graph: query entities -> neighbours ->
//                        chunks; topics when no entity matches; hybrid last
//   deep_research_agent  hybrid, then up to 2 more rounds of RM3 query
//                        expansion while the evidence covers < 80% of the
//                        query's (idf-weighted) terms; rounds fused by RRF
//   fusion_agent         naive + hybrid + graph + research, run in parallel
//                        threads, fused by RRF
// Agents never generate answers, hold state or cache results.
//
// The query's embedding is computed before the search (query_vector), so a
// caller on an actor thread can get it asynchronously from a remote
// embedding model and then run the pure, CPU-only search; the snapshot is
// immutable, so any number of searches may run on it at once.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/messages.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

// chunk_ids and context from retrieval_results (in their order).
void fill_ids_and_context(retrieval_result& r);

// A search that cannot run: the vector-only agent when the embedding model
// fails. Agents with another leg degrade to it instead (noted in the trace).
struct search_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The query's embedding for the vector leg, or why the embedding model
// failed; both empty when no vector leg runs.
struct query_vector {
  std::vector<float> values;
  std::string error;
};

// Whether `agent_type` on `snap` may search vectors (the KB has a vector
// index and its search_mode does not exclude it); false = pass {}.
bool needs_query_vector(const kb_snapshot& snap, std::string_view agent_type);

// An embedder's answer for the query alone as a query_vector.
query_vector to_query_vector(std::variant<embedding_batch, std::string> embedded);

// Embeds `query` with the snapshot's embedder, blocking (the hashed
// embedder, the CLI and benches; actors use embedder::embed_async when
// the embedder is remote()).
query_vector embed_query(const kb_snapshot& snap, std::string_view query);

// The search with the query's vector given (from embed_query, or {} when
// !needs_query_vector). Throws search_error (above).
retrieval_result run_agent(const kb_snapshot& snap, std::string_view agent_type,
                           std::string_view query, const query_vector& qv, size_t top_k);

// The same, embedding the query first (blocking).
retrieval_result run_agent(const kb_snapshot& snap, std::string_view agent_type,
                           std::string_view query, size_t top_k);

}  // namespace ragtor
