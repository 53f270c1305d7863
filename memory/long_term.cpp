#include "memory/long_term.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
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

namespace {

constexpr size_t recall_dims = 256;

const std::shared_ptr<embedder>& recall_embedder() {
  static const auto embed = make_hashed_embedder(recall_dims);
  return embed;
}

}  // namespace

std::vector<float> episode_embedding(std::string_view text) {
  auto vecs = std::get<embedding_batch>(recall_embedder()->embed({std::string{text}}));
  return std::move(vecs.at(0));
}

std::vector<size_t> rank_episodes(std::string_view question,
                                  const std::vector<episode_record>& episodes,
                                  const std::string& conversation_id, int64_t window_start_seq,
                                  size_t limit, double min_similarity) {
  // Texts to embed now: the question, and episodes without a stored vector.
  std::vector<std::string> texts{std::string{question}};
  std::vector<size_t> candidates;
  std::vector<size_t> vec_of;  // per candidate: index into the embedded batch, or npos
  constexpr auto stored = static_cast<size_t>(-1);
  for (size_t i = 0; i < episodes.size(); ++i) {
    auto& e = episodes[i];
    if (e.conversation_id == conversation_id && e.seq >= window_start_seq)
      continue;  // still in the window: the prompt has it verbatim
    candidates.push_back(i);
    if (e.embedding.size() == recall_dims) {
      vec_of.push_back(stored);
    } else {
      vec_of.push_back(texts.size());
      texts.push_back(e.text);
    }
  }
  if (candidates.empty())
    return {};
  auto vecs = std::get<embedding_batch>(recall_embedder()->embed(texts));
  const auto& q = vecs[0];
  std::vector<std::pair<double, size_t>> scored;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const auto& v = vec_of[c] == stored ? episodes[candidates[c]].embedding : vecs[vec_of[c]];
    double dot = 0;
    for (size_t d = 0; d < q.size() && d < v.size(); ++d)
      dot += static_cast<double>(q[d]) * v[d];
    if (dot >= min_similarity)
      scored.emplace_back(dot, c);
  }
  std::sort(scored.begin(), scored.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<size_t> out;
  for (size_t i = 0; i < scored.size() && i < limit; ++i)
    out.push_back(candidates[scored[i].second]);
  return out;
}

std::vector<std::string> recall_episodes(std::string_view question,
                                         const std::vector<episode_record>& episodes,
                                         const std::string& conversation_id,
                                         int64_t window_start_seq, size_t limit,
                                         double min_similarity) {
  std::vector<std::string> out;
  for (auto i : rank_episodes(question, episodes, conversation_id, window_start_seq, limit,
                              min_similarity))
    out.push_back(episodes[i].text);
  return out;
}

namespace {

constexpr char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The value of each base64 character, 64 for anything else.
constexpr std::array<uint8_t, 256> b64_values = [] {
  std::array<uint8_t, 256> t{};
  t.fill(64);
  for (uint8_t i = 0; i < 64; ++i)
    t[static_cast<uint8_t>(b64[i])] = i;
  return t;
}();

// Stored embeddings are little-endian float32 (the byte order of every
// machine we build for; others swap).
void to_little_endian(std::string& bytes) {
  if constexpr (std::endian::native == std::endian::big)
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4)
      std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                   bytes.begin() + static_cast<std::ptrdiff_t>(i) + 4);
}

}  // namespace

std::string encode_embedding(const std::vector<float>& v) {
  std::string bytes(v.size() * 4, '\0');
  if (!v.empty())
    std::memcpy(bytes.data(), v.data(), bytes.size());
  to_little_endian(bytes);
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      n |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size())
      n |= static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(b64[(n >> 18) & 63]);
    out.push_back(b64[(n >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? b64[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? b64[n & 63] : '=');
  }
  return out;
}

std::vector<float> decode_embedding(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0)
    return {};
  size_t pad = text.back() == '=' ? (text[text.size() - 2] == '=' ? 2 : 1) : 0;
  size_t n_bytes = text.size() / 4 * 3 - pad;
  if (n_bytes % 4 != 0)
    return {};
  std::string bytes(n_bytes + pad, '\0');
  auto* out = reinterpret_cast<unsigned char*>(bytes.data());
  for (size_t i = 0, o = 0; i < text.size(); i += 4, o += 3) {
    bool last = i + 4 == text.size();
    uint32_t v[4];
    for (int k = 0; k < 4; ++k) {
      v[k] = b64_values[static_cast<uint8_t>(text[i + k])];
      if (v[k] == 64) {
        if (!(last && k >= 4 - static_cast<int>(pad)))
          return {};
        v[k] = 0;
      }
    }
    uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out[o] = static_cast<unsigned char>(n >> 16);
    out[o + 1] = static_cast<unsigned char>(n >> 8);
    out[o + 2] = static_cast<unsigned char>(n);
  }
  bytes.resize(n_bytes);
  to_little_endian(bytes);
  std::vector<float> floats(n_bytes / 4);
  std::memcpy(floats.data(), bytes.data(), n_bytes);
  return floats;
}

std::string episode_text(std::string_view question, std::string_view answer) {
  return utf8_prefix("User: " + std::string{question} + "\nAssistant: " + std::string{answer},
                     2000);
}

}  // namespace ragtor
