#include "memory/summary.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <unordered_map>

#include "memory/long_term.hpp"
#include "protocol/text.hpp"
#include "protocol/token_count.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

constexpr size_t max_message_bytes = 4000;  // per message shown to the model
constexpr size_t max_sentence_bytes = 240;  // per extractive line
constexpr std::string_view stated_prefix = "User stated: ";

std::string speaker(const stored_message& m) {
  return m.role == "assistant" ? "Assistant" : "User";
}

// The transcript's lines, newest first: the newest messages that fit
// `budget` tokens (the newest always).
std::vector<std::string> transcript_lines(std::span<const stored_message> messages,
                                          size_t budget) {
  std::vector<std::string> lines;
  size_t used = 0;
  for (auto i = messages.rbegin(); i != messages.rend(); ++i) {
    auto line = speaker(*i) + ": " + utf8_prefix(i->content, max_message_bytes);
    auto cost = approx_tokens(line) + 1;
    if (!lines.empty() && used + cost > budget)
      break;
    used += cost;
    lines.push_back(std::move(line));
  }
  return lines;
}

// "User: ...\nAssistant: ..." for the newest messages that fit `budget`
// tokens (oldest first); `dropped` counts the ones left out.
std::string transcript(const std::vector<stored_message>& messages, size_t budget,
                       size_t& dropped) {
  auto lines = transcript_lines(messages, budget);
  dropped = messages.size() - lines.size();
  std::string out;
  for (auto i = lines.rbegin(); i != lines.rend(); ++i)
    out += *i + "\n";
  return out;
}

constexpr std::string_view summary_system =
    "You summarise conversations between a user and an assistant so that the assistant can "
    "continue them later. Keep: what the user wants and asked, their stated preferences, "
    "constraints and facts about themselves, decisions and key facts established, and open "
    "questions. Be concise (at most 6 sentences), factual, and never add anything that was not "
    "said. Write in the language of the conversation. Output only the summary.";

}  // namespace

std::string_view to_string(summary_action a) {
  switch (a) {
    case summary_action::full:
      return "full";
    case summary_action::merge:
      return "merge";
    default:
      return "none";
  }
}

summary_action plan_summary(const summary_record& s, const summary_policy& p) {
  auto outside = s.total_messages - p.window;
  if (outside <= 0)
    return summary_action::none;
  if (s.version == 0)
    return s.total_messages >= p.min_messages ? summary_action::full : summary_action::none;
  if (outside - s.covered_messages < p.update_delta)
    return summary_action::none;
  return s.incremental_updates + 1 >= p.regenerate_every ? summary_action::full
                                                         : summary_action::merge;
}

bool transcript_is_full(std::span<const stored_message> messages, size_t max_input_tokens) {
  return transcript_lines(messages, max_input_tokens).size() < messages.size();
}

int32_t summary_read_limit(const summary_record& loaded, summary_action action,
                           const summary_policy& p, size_t max_input_tokens) {
  int64_t window = std::max(0, p.window);
  int64_t n = action == summary_action::merge
                  ? loaded.total_messages - loaded.covered_seq
                  : std::min<int64_t>(loaded.total_messages,
                                      static_cast<int64_t>(max_input_tokens / 2) + 2 + window);
  return static_cast<int32_t>(std::clamp<int64_t>(n, 0, INT32_MAX));
}

int32_t summary_read_deeper(const summary_record& loaded, summary_action action,
                            std::span<const stored_message> read, int32_t limit) {
  if (action != summary_action::merge || read.empty()
      || read.size() < static_cast<size_t>(std::max(limit, 0)))
    return 0;  // not a merge, or the read reached the conversation's start
  auto missed = read.front().seq - loaded.covered_seq - 1;
  if (missed <= 0)
    return 0;
  return static_cast<int32_t>(std::min<int64_t>(int64_t{limit} + missed, INT32_MAX));
}

completion_request summary_request(summary_action action, std::string_view previous,
                                   const std::vector<stored_message>& messages,
                                   size_t max_input_tokens, int32_t max_tokens) {
  completion_request req;
  req.purpose = "summary";
  req.max_tokens = max_tokens;
  req.temperature = 0;
  req.messages.push_back({"system", std::string{summary_system}});
  size_t dropped = 0;
  auto text = transcript(messages, max_input_tokens, dropped);
  std::string user;
  if (action == summary_action::merge || (dropped > 0 && !previous.empty())) {
    user = "Previous summary:\n" + std::string{previous} + "\n\nNew messages:\n" + text
           + "\nWrite the updated summary, merging the new messages into the previous summary.";
  } else {
    user = "Conversation to summarise:\n" + text + "\nWrite the summary.";
  }
  req.messages.push_back({"user", std::move(user)});
  return req;
}

std::string extractive_summary(std::string_view previous,
                               const std::vector<stored_message>& messages, size_t max_sentences) {
  struct candidate {
    std::string text;
    std::set<std::string> terms;
    double weight = 1;
    size_t order = 0;
  };
  std::vector<candidate> candidates;
  std::vector<std::string> stated;
  auto add_stated = [&](std::string fact) {
    if (std::find(stated.begin(), stated.end(), fact) == stated.end())
      stated.push_back(std::move(fact));
  };
  // Document frequency of terms over the units (previous summary, each
  // message): a sentence is central when its terms recur elsewhere.
  std::unordered_map<std::string, int> df;
  auto count_unit = [&](std::string_view text) {
    auto terms = tokenize(text);
    std::set<std::string> unique(terms.begin(), terms.end());
    for (auto& t : unique)
      ++df[t];
  };
  auto add_candidate = [&](std::string text, double weight) {
    auto terms = tokenize(text);
    if (terms.size() < 2)
      return;  // "Thanks!", "OK." carry nothing
    candidate c;
    c.terms = {terms.begin(), terms.end()};
    c.text = utf8_prefix(text, max_sentence_bytes);
    c.weight = weight;
    c.order = candidates.size();
    candidates.push_back(std::move(c));
  };

  // The previous summary: its lines stay candidates (already judged
  // important once), its stated facts carry over.
  size_t start = 0;
  while (start < previous.size()) {
    auto end = previous.find('\n', start);
    if (end == std::string_view::npos)
      end = previous.size();
    auto line = previous.substr(start, end - start);
    start = end + 1;
    if (line.starts_with(stated_prefix)) {
      auto facts = line.substr(stated_prefix.size());
      size_t p = 0;
      while (p < facts.size()) {
        auto q = facts.find("; ", p);
        if (q == std::string_view::npos)
          q = facts.size();
        if (q > p)
          add_stated(std::string{facts.substr(p, q - p)});
        p = q + 2;
      }
    } else if (!line.empty()) {
      add_candidate(std::string{line}, 1.5);
    }
  }
  if (!previous.empty())
    count_unit(previous);
  for (auto& m : messages) {
    count_unit(m.content);
    bool user = m.role != "assistant";
    if (user)
      for (auto& f : extract_memories(m.content))
        add_stated(f.content);
    auto who = speaker(m) + ": ";
    for (auto s : split_sentences(m.content)) {
      // A user's question or statement says what the conversation is about.
      double w = user ? (s.ends_with("?") || s.ends_with("？") ? 1.4 : 1.2) : 1.0;
      add_candidate(who + std::string{s}, w);
    }
  }
  for (auto& c : candidates) {
    double score = 0;
    for (auto& t : c.terms)
      if (auto i = df.find(t); i != df.end())
        score += std::log1p(static_cast<double>(i->second));
    c.weight *= score / std::sqrt(static_cast<double>(c.terms.size()));
  }
  std::vector<const candidate*> ranked;
  for (auto& c : candidates)
    ranked.push_back(&c);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](auto* a, auto* b) { return a->weight > b->weight; });
  if (ranked.size() > max_sentences)
    ranked.resize(max_sentences);
  std::sort(ranked.begin(), ranked.end(), [](auto* a, auto* b) { return a->order < b->order; });
  std::string out;
  for (auto* c : ranked) {
    // A previous line may repeat a new sentence word for word.
    if (out.find(c->text) != std::string::npos)
      continue;
    out += c->text + "\n";
  }
  if (stated.size() > 5)
    stated.erase(stated.begin(), stated.end() - 5);  // the latest count
  if (!stated.empty()) {
    out += stated_prefix;
    for (size_t i = 0; i < stated.size(); ++i)
      out += (i ? "; " : "") + stated[i];
    out += "\n";
  }
  if (!out.empty())
    out.pop_back();
  return out;
}

}  // namespace ragtor
