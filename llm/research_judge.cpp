#include "llm/research_judge.hpp"

#include <algorithm>
#include <cctype>

#include "llm/structured_output.hpp"
#include "protocol/text.hpp"

namespace ragtor::llm {

namespace {

constexpr size_t max_query_bytes = 300;

std::string normalised(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

completion_request research_judge_request(std::string_view question,
                                          const std::vector<std::string>& queries,
                                          const std::vector<std::string>& evidence,
                                          size_t max_chars_per_passage) {
  completion_request req;
  req.purpose = "research";
  req.max_tokens = 120;
  req.temperature = 0;
  req.messages.push_back(
      {"system",
       "You judge search results for a research assistant. Decide whether the passages contain "
       "what is needed to answer the question. If they do not, write one short keyword search "
       "query (different from the ones already searched) that would find the missing "
       "information. Reply with JSON only: {\"sufficient\": true} or {\"sufficient\": false, "
       "\"query\": \"...\"}."});
  std::string user = "Question: " + std::string{question} + "\n\nSearched so far:\n";
  for (auto& q : queries)
    user += "- " + q + "\n";
  user += "\nPassages:\n";
  for (size_t i = 0; i < evidence.size(); ++i)
    user +=
        "[" + std::to_string(i + 1) + "] " + utf8_prefix(evidence[i], max_chars_per_passage) + "\n";
  req.messages.push_back({"user", std::move(user)});
  return req;
}

std::optional<research_verdict> parse_research_verdict(std::string_view reply,
                                                       const std::vector<std::string>& queries) {
  auto parsed = parse_structured(
      reply, {{"sufficient", field_type::boolean, true}, {"query", field_type::string, false}});
  auto* fields = std::get_if<parsed_fields>(&parsed);
  if (!fields)
    return std::nullopt;
  research_verdict v;
  v.sufficient = fields->bools.at("sufficient");
  if (v.sufficient)
    return v;
  auto query = fields->string_or("query");
  auto key = normalised(query);
  if (key.empty() || query.size() > max_query_bytes)
    return std::nullopt;
  for (auto& q : queries)
    if (normalised(q) == key)
      return std::nullopt;
  v.query = std::move(query);
  return v;
}

void research_fall_back(const kb_snapshot& snap, research_state& st, const std::string& why,
                        double judge_ms) {
  st.trace.push_back({"judge", why + "; pseudo-relevance feedback from here", judge_ms});
  research_rm3_rounds(snap, st);
}

research_next apply_research_verdict(const kb_snapshot& snap, research_state& st,
                                     std::vector<std::string>& queries, std::string_view reply,
                                     double judge_ms) {
  auto verdict = parse_research_verdict(reply, queries);
  if (!verdict) {
    research_fall_back(snap, st, "the model's verdict was unusable", judge_ms);
    return research_next::fell_back;
  }
  if (verdict->sufficient) {
    st.trace.push_back({"judge", "model: the evidence answers the question", judge_ms});
    return research_next::done;
  }
  st.trace.push_back({"judge", "model: not yet", judge_ms});
  queries.push_back(verdict->query);
  research_rewrite_round(snap, st, verdict->query, "model");
  return st.round < research_max_rounds ? research_next::ask_again : research_next::done;
}

}  // namespace ragtor::llm
