// The router's "llm" mode (DESIGN §4.2): the prompt asking a model which
// knowledge base a message belongs to, and the robust parser of its JSON
// answer. Unusable answers are reported (ok = false) so the router can
// fall back to its heuristic.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/chat_message.hpp"

namespace ragtor::llm {

struct kb_profile {
  std::string name;
  std::string description;
  std::vector<std::string> keywords;
};

// A system message describing the task, the KBs and the exact JSON reply
// {"kb_prefix","confidence","reason","intent","agent_type"}, then the user
// message (truncated to 2000 bytes at a UTF-8 boundary).
std::vector<chat_message> build_router_messages(std::string_view message,
                                                const std::vector<kb_profile>& kbs);

struct routed {
  std::string kb_prefix;  // a KB name (exact spelling) or "general"
  double confidence = 0;  // clamped to [0, 1]
  std::string reason;
  std::string intent;      // kb_query | chitchat | other
  std::string agent_type;  // a known agent type or ""
  bool ok = false;
  std::string error;
};

routed parse_router_reply(std::string_view reply, const std::vector<kb_profile>& kbs);

}  // namespace ragtor::llm
