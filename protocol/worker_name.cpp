#include "protocol/worker_name.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <vector>

#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"

namespace ragtor {

namespace {

// Like Python's raw.split(":") followed by strip() of every part: empty
// parts are kept, so "a::b" has three segments.
std::vector<std::string> split_segments(std::string_view raw) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    auto pos = raw.find(':', start);
    if (pos == std::string_view::npos) {
      parts.emplace_back(trim(raw.substr(start)));
      return parts;
    }
    parts.emplace_back(trim(raw.substr(start, pos - start)));
    start = pos + 1;
  }
}

}  // namespace

bool is_agent_type(std::string_view name) {
  return std::find(agent_types.begin(), agent_types.end(), name) != agent_types.end();
}

caf::expected<parsed_worker_name> parse_worker_name(std::string_view worker_name) {
  const std::string mode{retrieve_only_mode};
  auto raw = trim(worker_name);
  if (raw.empty())
    return parsed_worker_name{"", "", mode};
  auto parts = split_segments(raw);
  switch (parts.size()) {
    case 1:
      return parsed_worker_name{"", std::move(parts[0]), mode};
    case 2:
      return parsed_worker_name{std::move(parts[0]), std::move(parts[1]), mode};
    case 3: {
      if (parts[2].empty())
        parts[2] = mode;
      if (parts[2] != mode)
        return make_error(errc::invalid_request,
                          "unsupported agent_mode in worker_name: " + std::string{worker_name});
      return parsed_worker_name{std::move(parts[0]), std::move(parts[1]), std::move(parts[2])};
    }
    default:
      return make_error(errc::invalid_request,
                        "invalid worker_name format: " + std::string{worker_name});
  }
}

std::string format_worker_name(std::string_view kb_prefix, std::string_view agent_type) {
  auto kb = trim(kb_prefix);
  // "general" means "no retrieval": no worker at all.
  if (to_lower_ascii(kb) == "general")
    return {};
  std::string result{kb.empty() ? std::string_view{"default"} : kb};
  auto agent = trim(agent_type);
  result += ':';
  result += agent.empty() ? default_agent_type : agent;
  result += ':';
  result += retrieve_only_mode;
  return result;
}

std::string kb_of(const parsed_worker_name& parsed) {
  if (parsed.kb_prefix == "default")
    return {};
  return parsed.kb_prefix;
}

const char* const kb_name_rule = "knowledge base names are 1-128 characters of [A-Za-z0-9_.@-]";

bool is_valid_kb_name(std::string_view kb) {
  // ':' separates the parts of a worker_name, so it cannot be in a KB name.
  return is_valid_id(kb, 128) && kb.find(':') == std::string_view::npos && kb != "." && kb != "..";
}

}  // namespace ragtor
