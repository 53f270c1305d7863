// Listwise reranking with the language model (seed 004's rerank node,
// DESIGN §6): the model sees the question and the numbered passages and
// answers {"ranking": [passage numbers, best first]}. An unusable reply is
// reported as such; the caller then keeps the fused order.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::llm {

completion_request rerank_request(std::string_view question,
                                  const std::vector<retrieval_item>& items,
                                  size_t max_chars_per_passage = 600);

// The new order as indexes into the n passages, best first: the model's
// valid, distinct numbers (1-based in the prompt), then the passages it
// left out in their fused order. nullopt when the reply names none.
std::optional<std::vector<size_t>> parse_rerank_reply(std::string_view reply, size_t n);

// Reorders `r` (items, chunk ids, context) by `order` and keeps `keep`.
void apply_rerank(retrieval_result& r, const std::vector<size_t>& order, size_t keep);

}  // namespace ragtor::llm
