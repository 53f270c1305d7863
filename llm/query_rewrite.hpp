// The rewrite node of the answer pipeline (seed 004 §4.2): the model turns
// the user's question and the recent conversation into one standalone
// search query ("and its price?" -> "Lumenlatch L2 price").
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::llm {

// `window`: (role, content) of the recent messages, oldest first.
completion_request rewrite_request(std::string_view question,
                                   const std::vector<std::pair<std::string, std::string>>& window);

// The query in the model's reply: first non-empty line, without a
// "Query:" label, quotes or fences; "" when unusable (empty, or longer
// than 500 bytes: a model that answered instead of rewriting).
std::string parse_rewrite_reply(std::string_view reply);

}  // namespace ragtor::llm
