#include "memory/long_term.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <regex>
#include <set>

#include "retrieval/embedder.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

struct rule {
  std::regex pattern;
  const char* kind;
  int64_t ttl_days;
};

const std::vector<rule>& english_rules() {
  static const auto flags = std::regex::ECMAScript | std::regex::icase;
  static const std::vector<rule> rules = {
      {std::regex{R"(\bi\s+(?:do\s+not|don't|dont)\s+(?:like|enjoy|want)\b)", flags}, "dislike",
       180},
      {std::regex{R"(\bi\s+(?:hate|dislike|can't stand|cannot stand)\b)", flags}, "dislike", 180},
      {std::regex{R"(\bi(?:'m|\s+am)\s+allergic\s+to\b)", flags}, "constraint", 365},
      {std::regex{
           R"(\bi\s+(?:can't|cannot|can not|must not|mustn't|don't|do not)\s+(?:eat|drink|use|have)\b)",
           flags},
       "constraint", 365},
      {std::regex{R"(\b(?:please\s+)?(?:always|never)\s+(?:answer|reply|respond|use|give)\b)",
                  flags},
       "constraint", 180},
      {std::regex{R"(\bi\s+(?:really\s+)?(?:like|love|prefer|enjoy)\b)", flags}, "preference", 180},
      {std::regex{R"(\bmy\s+(?:name|job|role|profession)\s+is\b)", flags}, "identity", 365},
      {std::regex{R"(\bi\s+(?:work\s+as|work\s+at|live\s+in|am\s+from)\b)", flags}, "identity",
       365},
      {std::regex{R"(\bi(?:'m|\s+am)\s+an?\s+\w+)", flags}, "identity", 365},
  };
  return rules;
}

struct cjk_rule {
  std::string_view marker;
  const char* kind;
  int64_t ttl_days;
};

// Checked in order: more specific markers first (不喜欢 before 喜欢).
constexpr cjk_rule chinese_rules[] = {
    {"我不喜欢", "dislike", 180},  {"我讨厌", "dislike", 180},    {"我不想", "dislike", 180},
    {"过敏", "constraint", 365},   {"我不能", "constraint", 365}, {"我不吃", "constraint", 365},
    {"我不喝", "constraint", 365}, {"请不要", "constraint", 180}, {"我喜欢", "preference", 180},
    {"我爱", "preference", 180},   {"我偏好", "preference", 180}, {"我更喜欢", "preference", 180},
    {"我叫", "identity", 365},     {"我的名字", "identity", 365}, {"我住在", "identity", 365},
    {"我是", "identity", 365},
};

// Sentences of the message: split at . ! ? ; and their CJK forms and at
// line breaks.
std::vector<std::string> sentences(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    auto b = cur.find_first_not_of(" \t\r\n");
    auto e = cur.find_last_not_of(" \t\r\n");
    if (b != std::string::npos)
      out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (size_t i = 0; i < text.size();) {
    for (std::string_view p : {"。", "！", "？", "；"})
      if (text.substr(i).starts_with(p)) {
        flush();
        i += p.size();
        goto next;
      }
    if (text[i] == '.' || text[i] == '!' || text[i] == '?' || text[i] == ';' || text[i] == '\n') {
      flush();
      ++i;
      continue;
    }
    cur += text[i++];
  next:;
  }
  flush();
  return out;
}

bool is_question(std::string_view s) {
  static const std::regex q{
      R"(^\s*(?:do|does|did|can|could|would|will|what|which|who|how|why|is|are)\b)",
      std::regex::ECMAScript | std::regex::icase};
  return std::regex_search(std::string{s}, q) || s.find("吗") != std::string_view::npos;
}

}  // namespace

std::vector<extracted_memory> extract_memories(std::string_view user_message) {
  std::vector<extracted_memory> out;
  std::set<std::string> seen;
  for (auto& s : sentences(user_message)) {
    if (s.size() > 300 || is_question(s))
      continue;  // questions state no facts; long text is rarely about the user
    const char* kind = nullptr;
    int64_t ttl = 0;
    for (auto& r : chinese_rules)
      if (s.find(r.marker) != std::string::npos) {
        kind = r.kind;
        ttl = r.ttl_days;
        break;
      }
    if (!kind)
      for (auto& r : english_rules())
        if (std::regex_search(s, r.pattern)) {
          kind = r.kind;
          ttl = r.ttl_days;
          break;
        }
    if (kind && seen.insert(s).second)
      out.push_back({kind, s, ttl});
  }
  return out;
}

std::vector<std::string> recall_memories(
    std::string_view question, const std::vector<std::pair<std::string, int64_t>>& memories,
    size_t limit) {
  auto q = tokenize(question);
  std::set<std::string> terms{q.begin(), q.end()};
  std::vector<std::tuple<int, int64_t, const std::string*>> scored;
  for (auto& [content, created] : memories) {
    int overlap = 0;
    std::set<std::string> mine;
    for (auto& t : tokenize(content))
      if (terms.count(t) && mine.insert(t).second)
        ++overlap;
    scored.emplace_back(overlap, created, &content);
  }
  std::sort(scored.begin(), scored.end(), [](auto& a, auto& b) {
    if (std::get<0>(a) != std::get<0>(b))
      return std::get<0>(a) > std::get<0>(b);
    return std::get<1>(a) > std::get<1>(b);
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i)
    out.push_back(*std::get<2>(scored[i]));
  return out;
}

std::vector<std::string> recall_episodes(std::string_view question,
                                         const std::vector<episode_record>& episodes,
                                         const std::string& conversation_id,
                                         int64_t window_start_seq, size_t limit,
                                         double min_similarity) {
  static const auto embed = make_hashed_embedder(256);
  std::vector<std::string> texts{std::string{question}};
  std::vector<const episode_record*> candidates;
  for (auto& e : episodes) {
    if (e.conversation_id == conversation_id && e.seq >= window_start_seq)
      continue;  // still in the window: the prompt has it verbatim
    texts.push_back(e.text);
    candidates.push_back(&e);
  }
  if (candidates.empty())
    return {};
  auto vecs = std::get<embedding_batch>(embed->embed(texts));
  std::vector<std::pair<double, size_t>> scored;
  for (size_t i = 0; i < candidates.size(); ++i) {
    double dot = 0;
    for (size_t d = 0; d < vecs[0].size(); ++d)
      dot += static_cast<double>(vecs[0][d]) * vecs[i + 1][d];
    if (dot >= min_similarity)
      scored.emplace_back(dot, i);
  }
  std::sort(scored.begin(), scored.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i)
    out.push_back(candidates[scored[i].second]->text);
  return out;
}

std::string episode_text(std::string_view question, std::string_view answer) {
  return utf8_prefix("User: " + std::string{question} + "\nAssistant: " + std::string{answer},
                     2000);
}

}  // namespace ragtor
