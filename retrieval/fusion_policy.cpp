#include "retrieval/fusion_policy.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace ragtor {

fusion_policy default_fusion(embedder_kind kind) {
  fusion_policy p;
  if (kind == embedder_kind::lexical) {
    p.rule = fusion_rule::convex;
    p.vector_weight = 0.1;
    p.keyword_weight = 0.9;
  } else {
    p.rule = fusion_rule::rrf;
    p.vector_weight = 0.7;
    p.keyword_weight = 0.3;
  }
  return p;
}

fusion_policy choose_fusion(const kb_settings& settings, const embedder* embed) {
  auto kind = embed ? embed->kind() : embedder_kind::lexical;
  auto p = default_fusion(kind);
  bool vector_given = settings.vector_weight >= 0;
  bool keyword_given = settings.keyword_weight >= 0;
  // One weight given: the other is its complement, so "vector_weight 0.3"
  // means what it says.
  if (vector_given)
    p.vector_weight = settings.vector_weight;
  if (keyword_given)
    p.keyword_weight = settings.keyword_weight;
  if (vector_given && !keyword_given)
    p.keyword_weight = std::max(0.0, 1 - settings.vector_weight);
  if (keyword_given && !vector_given)
    p.vector_weight = std::max(0.0, 1 - settings.keyword_weight);
  if (settings.fusion == "rrf")
    p.rule = fusion_rule::rrf;
  else if (settings.fusion == "convex")
    p.rule = fusion_rule::convex;
  std::string who =
      !embed ? std::string{"no embedder"}
             : fmt::format("{} embedder {}",
                           kind == embedder_kind::lexical ? "lexical" : "semantic", embed->name());
  std::string what = p.keyword_weight >= p.vector_weight ? "BM25-led" : "vector-led";
  std::string source;
  if (vector_given || keyword_given)
    source = "KB weights";
  if (settings.fusion != "auto")
    source += std::string{source.empty() ? "" : " and "} + "KB fusion rule";
  p.reason = fmt::format("{}: {} {} vector={:.2f} keyword={:.2f} ({})", who, what,
                         to_string(p.rule), p.vector_weight, p.keyword_weight,
                         source.empty() ? "defaults for this embedder kind" : source);
  return p;
}

}  // namespace ragtor
