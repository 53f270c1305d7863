// worker_name: "{kb_prefix}:{agent_type}:{agent_mode}" (DESIGN §4.1, seed 000
// §2.1). It names a resident retrieval agent instance; it is the agent
// pool's instance_key and never contains a session id.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace ragtor {

inline constexpr std::string_view retrieve_only_mode = "retrieve_only";
inline constexpr std::string_view default_agent_type = "hybrid_agent";

// Every agent type ragtor knows (DESIGN §4.1).
inline constexpr std::array<std::string_view, 5> agent_types = {
    "naive_rag_agent", "hybrid_agent", "graph_agent", "deep_research_agent", "fusion_agent"};

bool is_agent_type(std::string_view name);

struct parsed_worker_name {
  std::string kb_prefix;
  std::string agent_type;
  std::string agent_mode;
  friend bool operator==(const parsed_worker_name&, const parsed_worker_name&) = default;
};

// Parses 0, 1, 2 or 3 colon-separated segments exactly as the seed's
// parse_worker_name: surrounding whitespace is trimmed, "" yields an empty
// kb/agent with mode retrieve_only, an empty third segment means
// retrieve_only, any other mode or more than 3 segments is
// errc::invalid_request.
caf::expected<parsed_worker_name> parse_worker_name(std::string_view worker_name);

// The router's worker_select: "general" (case-insensitive, trimmed) -> "";
// an empty kb becomes "default"; an empty agent_type becomes hybrid_agent.
std::string format_worker_name(std::string_view kb_prefix, std::string_view agent_type);

// The KB a parsed kb_prefix refers to: "default" maps to the empty KB.
std::string kb_of(const parsed_worker_name& parsed);

// [A-Za-z0-9_.@-]{1,128}, and not "." or ".." (the name is a directory).
bool is_valid_kb_name(std::string_view kb);
// The rule above as an error message.
extern const char* const kb_name_rule;

}  // namespace ragtor
