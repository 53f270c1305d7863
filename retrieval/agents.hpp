// The five retrieval strategies (DESIGN §4.1, §6) as plain functions over a
// KB snapshot, so actors, the /search API and the evaluation bench share
// them. Each returns a RetrievalResult with a trace of what it did. When
// the embedding model fails at query time, agents with a BM25 leg go on
// without vectors and say so in the trace ("vector failed: ...").
//   naive_rag_agent      vector leg only (fails if the embedding model does)
//   hybrid_agent         BM25 (typo-tolerant) + vectors, thresholded per
//                        leg, fused by the KB's fusion policy
//                        (fusion_policy.hpp: BM25-led convex fusion with
//                        the lexical embedder, weighted RRF with a
//                        semantic one)
//   graph_agent          entity graph: query entities -> neighbours ->
//                        chunks; topics when no entity matches; hybrid last
//   deep_research_agent  hybrid, then up to 2 more rounds of RM3 query
//                        expansion while the evidence covers < 80% of the
//                        query's (idf-weighted) terms (with a model: the
//                        model's verdicts, see research_state below);
//                        rounds fused by the same policy
//   fusion_agent         naive + hybrid + graph + research, fused
//                        threads, fused by the same policy (the vector-only
//                        and graph agents at the vector/keyword ratio)
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
#include "retrieval/fusion.hpp"
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

// Deep research one round at a time (DESIGN §6), so that an actor can ask
// a model between rounds whether the evidence answers the question and for
// a better query; run_agent's deep_research_agent runs it without a model:
// round 1 is the hybrid search, then RM3 rounds while the evidence covers
// less than research_sufficient_coverage of the query's (idf-weighted)
// terms and still gains, at most research_max_rounds in all. Every round's
// leg is fused with the earlier ones by the KB's fusion rule and weighs
// research_expansion_weight x the keyword weight, RM3 expansion and a
// model's rewrite alike: a later round can add what the question's own
// BM25 leg missed but never outweigh it (a rewrite that drops the
// question's words cost SciFact 0.05 nDCG@10 at full weight).
constexpr int research_max_rounds = 3;
constexpr double research_sufficient_coverage = 0.8;
constexpr double research_expansion_weight = 0.5;
// The best chunks RM3 expands the query from and a model judges.
constexpr size_t research_feedback_chunks = 5;

struct research_state {
  std::string query;
  size_t k = 0;
  int round = 0;        // rounds run so far
  double coverage = 0;  // of the query's terms by the top k
  fusion_rule rule = fusion_rule::rrf;
  double keyword_weight = 1;
  std::vector<ranked_list> legs;  // round 1's two legs, then one per round
  // The current ranking's first max(k, research_feedback_chunks): the
  // first k answer, the first research_feedback_chunks feed RM3 and a
  // model's judgement.
  std::vector<fused_item> fused;
  std::vector<trace_step> trace;
};

research_state research_first_round(const kb_snapshot& snap, std::string_view query,
                                    const query_vector& qv, size_t k);
// The best `n` chunks so far as "title\ntext", for a model to judge (at
// most max(k, research_feedback_chunks): research_state::fused).
std::vector<std::string> research_evidence(const kb_snapshot& snap, const research_state& st,
                                           size_t n);
// One more round with the query expanded by RM3 from the current top 5;
// true when coverage grew.
bool research_rm3_round(const kb_snapshot& snap, research_state& st);
// RM3 rounds (above) from wherever `st` is, up to `max_rounds` in all.
void research_rm3_rounds(const kb_snapshot& snap, research_state& st,
                         int max_rounds = research_max_rounds);
// One more round searching `rewritten` (a model's rewrite); `why` goes to
// the trace. True when coverage grew.
bool research_rewrite_round(const kb_snapshot& snap, research_state& st, std::string_view rewritten,
                            std::string_view why);
// The top k of the rounds fused (not finished: see finish_result).
retrieval_result research_result(const kb_snapshot& snap, research_state st);

// What run_agent does to every agent's result at the end: the KB's
// min_confidence_score, then chunk ids and context.
void finish_result(const kb_snapshot& snap, retrieval_result& r);

// The same, embedding the query first (blocking).
retrieval_result run_agent(const kb_snapshot& snap, std::string_view agent_type,
                           std::string_view query, size_t top_k);

}  // namespace ragtor
