// Per-knowledge-base settings as a value: the KB's profile (description,
// keywords — what the router matches messages against), its retrieval
// defaults (agent, top_k, fusion weights, per-leg thresholds) and its
// answer pipeline (seed 004 switches, answer mode, workflow). JSON is the
// API's and kb.json's format; retrieval/kb_settings.hpp stores it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

namespace ragtor {

struct kb_settings {
  std::string name;
  std::string description;
  std::vector<std::string> keywords;
  // Agent used when a request names none; "" = router.default_agent_type.
  std::string default_agent_type;
  int32_t top_k = 0;  // 0 = retrieval.top_k
  // Fusion weights of the vector and BM25 legs; -1 = chosen by the kind of
  // embedder (retrieval/fusion_policy.hpp: lexical -> BM25-led, semantic ->
  // vector 0.7 / keyword 0.3). Given ones win over every default; when only
  // one is given the other is 1 - it (at least 0).
  double vector_weight = -1;
  double keyword_weight = -1;
  // How the legs are fused: "auto" (by embedder kind), "rrf" (weighted
  // reciprocal rank fusion, k = 60) or "convex" (a weighted sum of the
  // legs' max-normalised scores).
  std::string fusion = "auto";
  // Query terms that are not in the BM25 vocabulary (typos like
  // "lightouse") also search the indexed terms within a small edit
  // distance (retrieval/typo_expansion.hpp).
  bool typo_tolerance = true;
  double bm25_threshold = 0;    // BM25 scores below are dropped before fusion (0 = keep all)
  double vector_threshold = 0;  // cosine similarities below are dropped before fusion
  // Rerank the fused results with the language model (listwise), when one
  // is configured and there are more than 3 results; failure keeps the
  // fused order. rerank_top_k: results kept after reranking (0 = top_k).
  bool enable_rerank = false;
  int32_t rerank_top_k = 0;
  // -- the answer pipeline (seed 004; docs/pipelines.md) --
  // How a turn on this KB is answered: "pipeline" (load history -> rewrite
  // -> search -> rerank -> generate), "workflow" (the guided workflow of
  // `workflow_json`, seed 003) or "tool_agent" (the model calls retrieval
  // tools in a bounded loop, seed 001; the plain pipeline without a model).
  std::string answer_mode = "pipeline";
  // Rewrite the question with the model, using the conversation window,
  // before searching (skipped without a model).
  bool enable_query_rewrite = false;
  // Which legs hybrid retrieval runs: "hybrid" (both), "vector" or "bm25".
  std::string search_mode = "hybrid";
  // Results scoring below this fraction of the best result's score are
  // dropped before generation (0 = keep all, 1 = only ties with the best).
  double min_confidence_score = 0;
  // Ask the model to cite its sources (<cite>); off: no citations.
  bool enable_source_citation = true;
  // Generation overrides; < 0 / 0 = the [llm] defaults.
  double temperature = -1;
  int32_t max_tokens = 0;
  // tool_agent: the most tool calls the model may make in one turn.
  int32_t max_tool_calls = 4;
  // workflow: intents, slots, sources (a JSON object; see docs/pipelines.md).
  std::string workflow_json;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kb_settings& x) {
  return f(caf::meta::type_name("kb_settings"), x.name, x.description, x.keywords,
           x.default_agent_type, x.top_k, x.vector_weight, x.keyword_weight, x.fusion,
           x.typo_tolerance, x.bm25_threshold, x.vector_threshold, x.enable_rerank, x.rerank_top_k,
           x.answer_mode, x.enable_query_rewrite, x.search_mode, x.min_confidence_score,
           x.enable_source_citation, x.temperature, x.max_tokens, x.max_tool_calls,
           x.workflow_json);
}

// Checks ranges and names; returns an error message naming the field, or
// nullopt when the settings are usable.
std::optional<std::string> validate(const kb_settings& s);

// The settings as a JSON object (the API's and kb.json's format).
std::string to_json(const kb_settings& s);
// Parses kb.json / an API body: unknown fields rejected, missing ones default.
caf::expected<kb_settings> kb_settings_from_json(std::string_view json);

}  // namespace ragtor
