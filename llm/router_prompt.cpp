#include "llm/router_prompt.hpp"

#include <algorithm>
#include <cctype>

#include "llm/structured_output.hpp"
#include "protocol/text.hpp"
#include "protocol/worker_name.hpp"

namespace ragtor::llm {

namespace {

constexpr size_t max_message_bytes = 2000;

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<chat_message> build_router_messages(std::string_view message,
                                                const std::vector<kb_profile>& kbs) {
  std::string sys =
      "You route a user's message to the knowledge base that can answer it.\n"
      "Knowledge bases:\n";
  for (auto& kb : kbs) {
    sys += "- " + kb.name;
    if (!kb.description.empty())
      sys += ": " + kb.description;
    if (!kb.keywords.empty()) {
      sys += " (keywords: ";
      for (size_t i = 0; i < kb.keywords.size(); ++i)
        sys += (i ? ", " : "") + kb.keywords[i];
      sys += ")";
    }
    sys += "\n";
  }
  sys +=
      "- general: small talk, greetings, or questions no knowledge base covers.\n"
      "Retrieval agents: naive_rag_agent (simple lookups), hybrid_agent (default), graph_agent "
      "(relations between named things), deep_research_agent (multi-step questions), "
      "fusion_agent (broad questions).\n"
      "Answer with exactly one JSON object and nothing else:\n"
      "{\"kb_prefix\": \"<a knowledge base name or general>\", \"confidence\": <0..1>, "
      "\"reason\": \"<one short sentence>\", \"intent\": \"kb_query|chitchat|other\", "
      "\"agent_type\": \"<one of the agents or empty>\"}";
  return {{"system", std::move(sys)},
          {"user", std::string{utf8_prefix(message, max_message_bytes)}}};
}

routed parse_router_reply(std::string_view reply, const std::vector<kb_profile>& kbs) {
  routed r;
  auto parsed = parse_structured(reply, {{"kb_prefix", field_type::string, true},
                                         {"confidence", field_type::number, false},
                                         {"reason", field_type::string, false},
                                         {"intent", field_type::string, false},
                                         {"agent_type", field_type::string, false}});
  if (auto* err = std::get_if<std::string>(&parsed)) {
    r.error = *err;
    return r;
  }
  auto& f = std::get<parsed_fields>(parsed);
  auto kb = lower(f.string_or("kb_prefix"));
  while (!kb.empty() && kb.back() == ' ')
    kb.pop_back();
  while (!kb.empty() && kb.front() == ' ')
    kb.erase(0, 1);
  if (kb == "general" || kb == "none" || kb.empty()) {
    r.kb_prefix = "general";
  } else {
    auto i = std::find_if(kbs.begin(), kbs.end(),
                          [&](const kb_profile& p) { return lower(p.name) == kb; });
    if (i == kbs.end()) {
      r.error = "unknown knowledge base \"" + f.string_or("kb_prefix") + "\"";
      return r;
    }
    r.kb_prefix = i->name;
  }
  r.confidence = std::clamp(f.number_or("confidence", 0.5), 0.0, 1.0);
  r.reason = f.string_or("reason");
  r.intent = lower(f.string_or("intent", r.kb_prefix == "general" ? "chitchat" : "kb_query"));
  if (r.intent != "kb_query" && r.intent != "chitchat" && r.intent != "other")
    r.intent = "other";
  auto agent = f.string_or("agent_type");
  r.agent_type = is_agent_type(agent) ? agent : "";
  r.ok = true;
  return r;
}

}  // namespace ragtor::llm
