#include "llm/rerank.hpp"

#include <simdjson.h>

#include "llm/structured_output.hpp"
#include "protocol/json_document.hpp"
#include "protocol/text.hpp"
#include "retrieval/agents.hpp"

namespace ragtor::llm {

completion_request rerank_request(std::string_view question,
                                  const std::vector<retrieval_item>& items,
                                  size_t max_chars_per_passage) {
  completion_request req;
  req.purpose = "rerank";
  req.max_tokens = 200;
  req.temperature = 0;
  req.messages.push_back(
      {"system",
       "You rank passages by how well they help answer the question. Reply with JSON only: "
       "{\"ranking\": [passage numbers, most useful first]}."});
  std::string user = "Question: " + std::string{question} + "\n\nPassages:\n";
  for (size_t i = 0; i < items.size(); ++i)
    user += "[" + std::to_string(i + 1) + "] "
            + utf8_prefix(items[i].evidence, max_chars_per_passage) + "\n";
  req.messages.push_back({"user", std::move(user)});
  return req;
}

std::optional<std::vector<size_t>> parse_rerank_reply(std::string_view reply, size_t n) {
  auto json = extract_json_object(reply);
  if (!json)
    return std::nullopt;
  json_document parsed{*json};
  simdjson::dom::element root;
  if (parsed.get(root) != simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::array ranking;
  if (root["ranking"].get_array().get(ranking) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<size_t> order;
  std::vector<bool> seen(n, false);
  for (auto v : ranking) {
    int64_t num = 0;
    std::string_view s;
    if (v.get_int64().get(num) != simdjson::SUCCESS) {
      if (v.get_string().get(s) != simdjson::SUCCESS)
        continue;
      try {
        num = std::stoll(std::string{s});
      } catch (...) {
        continue;
      }
    }
    if (num < 1 || static_cast<size_t>(num) > n || seen[static_cast<size_t>(num - 1)])
      continue;
    seen[static_cast<size_t>(num - 1)] = true;
    order.push_back(static_cast<size_t>(num - 1));
  }
  if (order.empty())
    return std::nullopt;
  for (size_t i = 0; i < n; ++i)
    if (!seen[i])
      order.push_back(i);
  return order;
}

void apply_rerank(retrieval_result& r, const std::vector<size_t>& order, size_t keep) {
  std::vector<retrieval_item> items;
  for (auto i : order)
    if (i < r.retrieval_results.size() && items.size() < keep)
      items.push_back(std::move(r.retrieval_results[i]));
  r.retrieval_results = std::move(items);
  fill_ids_and_context(r);
}

}  // namespace ragtor::llm
