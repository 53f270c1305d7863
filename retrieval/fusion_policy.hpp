// Which fusion rule and weights a KB's searches use (DESIGN §6), chosen
// from the kind of its embedder unless the KB's settings say otherwise:
//   lexical embedder (the offline hashed one)  convex, keyword 0.8 / vector
//       0.2: BM25 leads and the vector leg breaks near-ties; it finds what
//       BM25 finds, only worse, so a larger share (or RRF, which is blind
//       to margins) pulls the result below BM25 (docs/retrieval_eval.md);
//   semantic embedder (/v1/embeddings)  weighted RRF, vector 0.7 / keyword
//       0.3, DESIGN's starting point;
//   no embedder  BM25 alone, whatever the weights.
// A KB's vector_weight / keyword_weight / fusion settings, when given, win
// over these defaults. The policy carries a one-line reason for the trace.
#pragma once

#include <string>

#include "protocol/kb_settings.hpp"
#include "retrieval/embedder.hpp"
#include "retrieval/fusion.hpp"

namespace ragtor {

struct fusion_policy {
  fusion_rule rule = fusion_rule::rrf;
  double vector_weight = 0.7;
  double keyword_weight = 0.3;
  // e.g. "lexical embedder hashed-ngram-v1/256: BM25-led (defaults)"
  std::string reason;
};

// The defaults per embedder kind (above), without any KB setting.
fusion_policy default_fusion(embedder_kind kind);

// `settings` over the defaults of `embed`'s kind (null = no vector leg).
fusion_policy choose_fusion(const kb_settings& settings, const embedder* embed);

}  // namespace ragtor
