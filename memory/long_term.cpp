#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <immintrin.h>
#endif

#include "retrieval/embedder.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

// The English rules, matched without std::regex: its matcher cost 50–110
// µs per statement message, on the stream's thread every turn and for
// every message a summary covers; these take a few microseconds. Each
// rule is the ECMAScript regex it was written as (case-insensitive; the
// regexes are the oracle of tests/unit/memory_long_term_test.cpp), spelt
// as steps tried from every position of the sentence, lower-cased in
// ASCII as std::regex's icase does in the C locale.
struct step {
  enum kind_t { literal, spaces, boundary, word_char, either, maybe } kind;
  std::string_view text;                // literal
  std::vector<std::vector<step>> alts;  // either: one of them; maybe: alts[0] or nothing
};
using steps = std::vector<step>;

step lit(std::string_view t) { return {step::literal, t, {}}; }
const step ws{step::spaces, {}, {}};                // \s+
const step wb{step::boundary, {}, {}};              // \b
const step wc{step::word_char, {}, {}};             // \w (a \w+ that ends the rule)
step one_of(std::vector<steps> alts) { return {step::either, {}, std::move(alts)}; }
step words(std::initializer_list<std::string_view> list) {
  std::vector<steps> alts;
  for (auto w : list)
    alts.push_back({lit(w)});
  return one_of(std::move(alts));
}
step maybe(steps s) { return {step::maybe, {}, {std::move(s)}}; }

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool at_boundary(std::string_view s, size_t i) {
  return (i > 0 && is_word_char(s[i - 1])) != (i < s.size() && is_word_char(s[i]));
}

// What is left to match: the steps of `seq` from `k`, then `next`.
struct pending {
  const steps* seq;
  size_t k;
  const pending* next;
};

bool match_at(std::string_view s, size_t i, const pending* p) {
  if (!p)
    return true;
  if (p->k == p->seq->size())
    return match_at(s, i, p->next);
  const step& st = (*p->seq)[p->k];
  const pending rest{p->seq, p->k + 1, p->next};
  switch (st.kind) {
    case step::literal:  // the first byte compared inline: most tries end there
      return i + st.text.size() <= s.size() && s[i] == st.text[0]
             && s.compare(i, st.text.size(), st.text) == 0
             && match_at(s, i + st.text.size(), &rest);
    case step::spaces: {
      // Greedy is exact here: no rule has a step after \s+ that matches a
      // space.
      auto j = i;
      while (j < s.size() && is_ascii_space(s[j]))
        ++j;
      return j > i && match_at(s, j, &rest);
    }
    case step::boundary:
      return at_boundary(s, i) && match_at(s, i, &rest);
    case step::word_char:
      return i < s.size() && is_word_char(s[i]) && match_at(s, i + 1, &rest);
    case step::either:
      for (auto& alt : st.alts) {
        const pending inner{&alt, 0, &rest};
        if (match_at(s, i, &inner))
          return true;
      }
      return false;
    case step::maybe: {
      const pending inner{&st.alts[0], 0, &rest};
      return match_at(s, i, &inner) || match_at(s, i, &rest);
    }
  }
  return false;
}

// Whether the rule matches anywhere in `lower` (regex_search). A rule that
// opens with \b is tried only where a word starts or ends.
bool search(std::string_view lower, const steps& rule) {
  const pending whole{&rule, 0, nullptr};
  const bool at_words = !rule.empty() && rule.front().kind == step::boundary;
  for (size_t i = 0; i <= lower.size(); ++i)
    if ((!at_words || at_boundary(lower, i)) && match_at(lower, i, &whole))
      return true;
  return false;
}

struct rule {
  steps pattern;
  const char* kind;
  int64_t ttl_days;
};

const std::vector<rule>& english_rules() {
  // "i'm" or "i am", as (?:'m|\s+am) after \bi.
  auto i_am = [] { return one_of({{lit("'m")}, {ws, lit("am")}}); };
  static const std::vector<rule> rules = {
      // \bi\s+(?:do\s+not|don't|dont)\s+(?:like|enjoy|want)\b
      {{wb, lit("i"), ws, one_of({{lit("do"), ws, lit("not")}, {lit("don't")}, {lit("dont")}}), ws,
        words({"like", "enjoy", "want"}), wb},
       "dislike", 180},
      // \bi\s+(?:hate|dislike|can't stand|cannot stand)\b
      {{wb, lit("i"), ws, words({"hate", "dislike", "can't stand", "cannot stand"}), wb},
       "dislike", 180},
      // \bi(?:'m|\s+am)\s+allergic\s+to\b
      {{wb, lit("i"), i_am(), ws, lit("allergic"), ws, lit("to"), wb}, "constraint", 365},
      // \bi\s+(?:can't|cannot|can not|must not|mustn't|don't|do not)\s+(?:eat|drink|use|have)\b
      {{wb, lit("i"), ws,
        words({"can't", "cannot", "can not", "must not", "mustn't", "don't", "do not"}), ws,
        words({"eat", "drink", "use", "have"}), wb},
       "constraint", 365},
      // \b(?:please\s+)?(?:always|never)\s+(?:answer|reply|respond|use|give)\b
      {{wb, maybe({lit("please"), ws}), words({"always", "never"}), ws,
        words({"answer", "reply", "respond", "use", "give"}), wb},
       "constraint", 180},
      // \bi\s+(?:really\s+)?(?:like|love|prefer|enjoy)\b
      {{wb, lit("i"), ws, maybe({lit("really"), ws}), words({"like", "love", "prefer", "enjoy"}),
        wb},
       "preference", 180},
      // \bmy\s+(?:name|job|role|profession)\s+is\b
      {{wb, lit("my"), ws, words({"name", "job", "role", "profession"}), ws, lit("is"), wb},
       "identity", 365},
      // \bi\s+(?:work\s+as|work\s+at|live\s+in|am\s+from)\b
      {{wb, lit("i"), ws,
        one_of({{lit("work"), ws, lit("as")},
                {lit("work"), ws, lit("at")},
                {lit("live"), ws, lit("in")},
                {lit("am"), ws, lit("from")}}),
        wb},
       "identity", 365},
      // \bi(?:'m|\s+am)\s+an?\s+\w+
      {{wb, lit("i"), i_am(), ws, lit("a"), maybe({lit("n")}), ws, wc}, "identity", 365},
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

// ^\s*(?:do|does|did|can|could|would|will|what|which|who|how|why|is|are)\b
// (case-insensitive), or a 吗.
bool is_question(std::string_view lower) {
  static const steps opening{
      words({"do", "does", "did", "can", "could", "would", "will", "what", "which", "who", "how",
             "why", "is", "are"}),
      wb};
  size_t i = 0;
  while (i < lower.size() && is_ascii_space(lower[i]))
    ++i;
  const pending whole{&opening, 0, nullptr};
  return match_at(lower, i, &whole) || lower.find("吗") != std::string_view::npos;
}

}  // namespace

std::vector<extracted_memory> extract_memories(std::string_view user_message) {
  std::vector<extracted_memory> out;
  std::set<std::string> seen;
  for (auto& s : sentences(user_message)) {
    if (s.size() > 300)
      continue;  // long text is rarely about the user
    auto lower = to_lower_ascii(s);
    if (is_question(lower))
      continue;  // questions state no facts
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
        if (search(lower, r.pattern)) {
          kind = r.kind;
          ttl = r.ttl_days;
          break;
        }
    if (kind && seen.insert(s).second)
      out.push_back({kind, s, ttl});
  }
  return out;
}

namespace {

// What recall derives from stored rows that never change — a memory's
// distinct terms (from its content), an episode's decoded embedding (by its
// id) — kept between turns, so a turn ranks the user's 200 newest memories
// and episodes without tokenising or decoding them again (issue 20, target
// 5). Thread-safe (readers of several threads rank at once); bounded by
// bytes, the oldest entries dropped first when full (a miss only costs the
// work again).
template <class V>
class recall_memo {
public:
  std::shared_ptr<const V> find(const std::string& key) {
    std::lock_guard guard{mu_};
    auto i = map_.find(key);
    return i == map_.end() ? nullptr : i->second.first;
  }

  void add(const std::string& key, std::shared_ptr<const V> value, size_t bytes) {
    std::lock_guard guard{mu_};
    bytes += 2 * key.size() + 96;
    if (bytes > budget_)
      return;
    if (!map_.emplace(key, std::pair{std::move(value), bytes}).second)
      return;
    order_.push_back(key);
    bytes_ += bytes;
    // The oldest go first, a few at a time: clearing the whole memo at
    // once freed megabytes of long-lived blocks together, and the holes
    // they left kept the allocator's arenas growing under a soak
    // (docs/security.md, "The memo's share of the slope").
    while (bytes_ > budget_ && !order_.empty()) {
      if (auto i = map_.find(order_.front()); i != map_.end()) {
        bytes_ -= i->second.second;
        map_.erase(i);
      }
      order_.pop_front();
    }
  }

  void set_budget(size_t bytes) {
    std::lock_guard guard{mu_};
    budget_ = bytes;
    map_.clear();
    order_.clear();
    bytes_ = 0;
  }

private:
  std::mutex mu_;
  // Each entry with the bytes it was counted at.
  std::unordered_map<std::string, std::pair<std::shared_ptr<const V>, size_t>> map_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
  size_t budget_ = 8u << 20;
};

recall_memo<term_list>& memory_terms_memo() {
  static recall_memo<term_list> memo;
  return memo;
}

recall_memo<std::vector<float>>& embedding_memo() {
  static recall_memo<std::vector<float>> memo;
  return memo;
}

recall_memo<std::string>& episode_text_memo() {
  static recall_memo<std::string> memo;
  return memo;
}

term_list distinct_terms(std::string_view text) {
  term_list terms;
  for (auto& t : tokenize(text))
    terms.push_back(std::hash<std::string>{}(t));
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  return terms;
}

}  // namespace

std::shared_ptr<const term_list> memory_terms(const std::string& content) {
  auto& memo = memory_terms_memo();
  if (auto hit = memo.find(content))
    return hit;
  auto terms = std::make_shared<const term_list>(distinct_terms(content));
  memo.add(content, terms, terms->size() * sizeof(uint64_t));
  return terms;
}

void set_recall_cache_budget(size_t bytes) {
  // Half for embeddings (~1 KiB per episode), a quarter each for episodes'
  // texts (~0.7 KiB) and memories' term lists (~0.1 KiB per memory, with
  // its content as the key).
  memory_terms_memo().set_budget(bytes / 4);
  episode_text_memo().set_budget(bytes / 4);
  embedding_memo().set_budget(bytes - 2 * (bytes / 4));
}

void term_columns::add(const term_list& terms, int64_t created_at) {
  terms_.insert(terms_.end(), terms.begin(), terms.end());
  ends_.push_back(static_cast<uint32_t>(terms_.size()));
  created_.push_back(created_at);
}

void term_columns::add_from(const term_columns& other, size_t i) {
  terms_.insert(terms_.end(), other.begin(i), other.end(i));
  ends_.push_back(static_cast<uint32_t>(terms_.size()));
  created_.push_back(other.created_[i]);
}

size_t term_columns::bytes() const {
  return sizeof *this + terms_.capacity() * sizeof(uint64_t)
         + ends_.capacity() * sizeof(uint32_t) + created_.capacity() * sizeof(int64_t);
}

std::vector<size_t> rank_by_terms(std::string_view question, const term_columns& items,
                                  size_t limit) {
  const auto terms = distinct_terms(question);
  std::vector<std::tuple<int, int64_t, size_t>> scored;
  scored.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    int overlap = 0;
    auto a = terms.begin();
    auto b = items.begin(i), b_end = items.end(i);
    while (a != terms.end() && b != b_end) {
      if (*a < *b) {
        ++a;
      } else if (*b < *a) {
        ++b;
      } else {
        ++overlap;
        ++a;
        ++b;
      }
    }
    scored.emplace_back(overlap, items.created_at(i), i);
  }
  // Equal items keep the order they came in (newest first): the position
  // breaks the last tie, so a partial sort gives what a stable sort gave.
  auto better = [](auto& a, auto& b) {
    if (std::get<0>(a) != std::get<0>(b))
      return std::get<0>(a) > std::get<0>(b);
    if (std::get<1>(a) != std::get<1>(b))
      return std::get<1>(a) > std::get<1>(b);
    return std::get<2>(a) < std::get<2>(b);
  };
  // Only the best `limit` need an order.
  auto keep = std::min(limit, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                    scored.end(), better);
  std::vector<size_t> out;
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i)
    out.push_back(std::get<2>(scored[i]));
  return out;
}

std::vector<std::string> recall_memories(
    std::string_view question, const std::vector<std::pair<std::string, int64_t>>& memories,
    size_t limit) {
  term_columns items;
  for (auto& [content, created] : memories)
    items.add(*memory_terms(content), created);
  std::vector<std::string> out;
  for (auto i : rank_by_terms(question, items, limit))
    out.push_back(memories[i].first);
  return out;
}

std::shared_ptr<const std::vector<float>> remembered_episode_embedding(
    const std::string& episode_id) {
  return embedding_memo().find(episode_id);
}

void remember_episode_embedding(const std::string& episode_id, const std::vector<float>& v) {
  if (episode_id.empty() || v.empty())
    return;
  embedding_memo().add(episode_id, std::make_shared<const std::vector<float>>(v),
                       v.size() * sizeof(float));
}

std::shared_ptr<const std::string> remembered_episode_text(const std::string& episode_id) {
  return episode_text_memo().find(episode_id);
}

void remember_episode_text(const std::string& episode_id, std::string_view text) {
  if (episode_id.empty() || text.empty())
    return;
  episode_text_memo().add(episode_id, std::make_shared<const std::string>(text), text.size());
}

std::vector<float> stored_episode_embedding(const std::string& episode_id,
                                            std::string_view text) {
  if (episode_id.empty() || text.empty())
    return decode_embedding(text);
  auto& memo = embedding_memo();
  if (auto hit = memo.find(episode_id))
    return *hit;
  auto v = std::make_shared<const std::vector<float>>(decode_embedding(text));
  memo.add(episode_id, v, v->size() * sizeof(float));
  return *v;
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

namespace {

// One dot product of the question (already in double) with a stored
// vector, summed in double. Four running sums of four dimensions each
// (AVX2 with FMA) or two of two (SSE2); the run-time choice below.
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) double dot_avx2(const double* q, const float* v, size_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  size_t d = 0;
  for (; d + 16 <= n; d += 16) {
    a0 = _mm256_fmadd_pd(_mm256_loadu_pd(q + d), _mm256_cvtps_pd(_mm_loadu_ps(v + d)), a0);
    a1 = _mm256_fmadd_pd(_mm256_loadu_pd(q + d + 4), _mm256_cvtps_pd(_mm_loadu_ps(v + d + 4)), a1);
    a2 = _mm256_fmadd_pd(_mm256_loadu_pd(q + d + 8), _mm256_cvtps_pd(_mm_loadu_ps(v + d + 8)), a2);
    a3 = _mm256_fmadd_pd(_mm256_loadu_pd(q + d + 12), _mm256_cvtps_pd(_mm_loadu_ps(v + d + 12)),
                         a3);
  }
  for (; d + 4 <= n; d += 4)
    a0 = _mm256_fmadd_pd(_mm256_loadu_pd(q + d), _mm256_cvtps_pd(_mm_loadu_ps(v + d)), a0);
  __m256d s = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  double dot = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  for (; d < n; ++d)
    dot += q[d] * v[d];
  return dot;
}
#endif

// Written out: gcc's own vectorisation of the plain loop went through the
// stack and stalled on every step (docs/performance.md, "A per-user recall
// index").
double dot_sse2(const double* q, const float* v, size_t n) {
  double acc[4] = {0, 0, 0, 0};
  size_t d = 0;
#if defined(__SSE2__)
  __m128d lo = _mm_setzero_pd(), hi = _mm_setzero_pd();
  for (; d + 4 <= n; d += 4) {
    __m128 b = _mm_loadu_ps(v + d);
    lo = _mm_add_pd(lo, _mm_mul_pd(_mm_loadu_pd(q + d), _mm_cvtps_pd(b)));
    hi = _mm_add_pd(hi, _mm_mul_pd(_mm_loadu_pd(q + d + 2), _mm_cvtps_pd(_mm_movehl_ps(b, b))));
  }
  _mm_storeu_pd(acc, lo);
  _mm_storeu_pd(acc + 2, hi);
#else
  for (; d + 4 <= n; d += 4)
    for (size_t k = 0; k < 4; ++k)
      acc[k] += q[d + k] * v[d + k];
#endif
  for (; d < n; ++d)
    acc[0] += q[d] * v[d];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

using dot_fn = double (*)(const double*, const float*, size_t);

dot_fn pick_dot() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return dot_avx2;
#endif
  return dot_sse2;
}

// dots[k] += qd * column[k] for k < n, each term a multiply and then an
// add in double (no FMA), as the scalar loop rounds it.
#if defined(__x86_64__)
__attribute__((target("avx2"))) void add_scaled_avx2(double* dots, double qd,
                                                     const float* column, size_t n) {
  const __m256d q = _mm256_set1_pd(qd);
  size_t k = 0;
  for (; k + 4 <= n; k += 4)
    _mm256_storeu_pd(dots + k,
                     _mm256_add_pd(_mm256_loadu_pd(dots + k),
                                   _mm256_mul_pd(q, _mm256_cvtps_pd(_mm_loadu_ps(column + k)))));
  for (; k < n; ++k)
    dots[k] += qd * column[k];
}
#endif

void add_scaled_plain(double* dots, double qd, const float* column, size_t n) {
  for (size_t k = 0; k < n; ++k)
    dots[k] += qd * column[k];
}

using add_scaled_fn = void (*)(double*, double, const float*, size_t);

add_scaled_fn pick_add_scaled() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2"))
    return add_scaled_avx2;
#endif
  return add_scaled_plain;
}

// The best `limit` of (score, index) pairs, best first, ties by index:
// only they need an order.
std::vector<size_t> best_scored(std::vector<std::pair<double, size_t>> scored, size_t limit) {
  auto keep = std::min(limit, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                    scored.end(), [](auto& a, auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  std::vector<size_t> out;
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i)
    out.push_back(scored[i].second);
  return out;
}

}  // namespace

std::vector<size_t> rank_vectors(const std::vector<float>& q,
                                 const std::vector<const std::vector<float>*>& vectors,
                                 size_t limit, double min_similarity) {
  // A hashed question is sparse: "How do I run the tests?" sets about a
  // dozen of the 256 dimensions. Then only those dimensions of each stored
  // vector are read and multiplied, in order and in double (the very sum of
  // the plain loop over all dimensions, whose other terms are zero), and
  // only their cache lines are asked for ahead (docs/performance.md,
  // "Recall ranks only the question's dimensions"). A dense question takes
  // the vector loop below.
  const std::vector<double> qd(q.begin(), q.end());
  std::vector<uint32_t> nonzero;
  for (size_t d = 0; d < q.size(); ++d)
    if (q[d] != 0.0f)
      nonzero.push_back(static_cast<uint32_t>(d));
  const bool sparse = nonzero.size() * 4 <= q.size();
  // Byte offsets of the cache lines the dot products read: those of the
  // question's dimensions (sparse), else all of its length.
  std::vector<uint32_t> lines;
  for (size_t d = 0; d < q.size(); ++d)
    if (!sparse || q[d] != 0.0f)
      if (auto off = static_cast<uint32_t>(d * sizeof(float) / 64 * 64);
          lines.empty() || lines.back() != off)
        lines.push_back(off);
  // The vectors are separate 1 KiB blocks, rarely in cache: without asking
  // for the next one's lines ahead, each line was a wait on memory (~110
  // µs for 200 vectors; docs/performance.md, "A per-user recall index").
  auto ask_for = [&](size_t i) {  // vector i's lines, and vector i + 1 itself
    if (i + 1 < vectors.size() && vectors[i + 1])
      __builtin_prefetch(vectors[i + 1]);
    if (i < vectors.size() && vectors[i]) {
      const auto* p = reinterpret_cast<const char*>(vectors[i]->data());
      auto n = vectors[i]->size() * sizeof(float);
      for (auto off : lines)
        if (off < n)
          __builtin_prefetch(p + off);
    }
  };
  // The question converted to double once, not once per stored vector;
  // the dot products with FMA where the CPU has it (half the time of the
  // SSE2 loop per call: docs/performance.md, "Recall's ranking in fewer
  // instructions").
  static const dot_fn dot_of = pick_dot();
  std::vector<std::pair<double, size_t>> scored;
  scored.reserve(vectors.size());
  ask_for(0);
  for (size_t c = 0; c < vectors.size(); ++c) {
    ask_for(c + 1);
    if (!vectors[c])
      continue;
    const auto& v = *vectors[c];
    double dot = 0;
    if (sparse) {
      for (auto d : nonzero) {
        if (d >= v.size())
          break;
        dot += qd[d] * v[d];
      }
    } else {
      dot = dot_of(qd.data(), v.data(), std::min(qd.size(), v.size()));
    }
    if (dot >= min_similarity)
      scored.emplace_back(dot, c);
  }
  return best_scored(std::move(scored), limit);
}

vector_columns::vector_columns(size_t dims, size_t capacity)
    : dims_{dims}, capacity_{capacity},
      data_{std::make_unique_for_overwrite<float[]>(dims * capacity)} {}

std::optional<uint32_t> vector_columns::claim(size_t n) {
  auto used = used_.load(std::memory_order_relaxed);
  do {
    if (used + n > capacity_)
      return std::nullopt;
  } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  return static_cast<uint32_t>(used);
}

void vector_columns::put(uint32_t slot, const std::vector<float>& v) {
  for (size_t d = 0; d < dims_; ++d)
    data_[d * capacity_ + slot] = d < v.size() ? v[d] : 0.0f;
}

void vector_columns::copy(const vector_columns& from, const std::vector<uint32_t>& from_slots,
                          const std::vector<uint32_t>& to_slots) {
  for (size_t d = 0; d < dims_; ++d) {
    auto* to = data_.get() + d * capacity_;
    if (d >= from.dims_) {
      for (auto s : to_slots)
        to[s] = 0.0f;
      continue;
    }
    const auto* src = from.column(d);
    for (size_t i = 0; i < to_slots.size(); ++i)
      to[to_slots[i]] = src[from_slots[i]];
  }
}

std::vector<size_t> rank_columns(const std::vector<float>& q, const vector_columns& columns,
                                 const std::vector<uint32_t>& slots, size_t limit,
                                 double min_similarity) {
  // The candidates' slots as runs of consecutive slots: each run of a
  // column is read as one block. Only the candidates' own slots are read
  // (another version of the rows may be writing the slots it claimed).
  const size_t capacity = columns.capacity();
  std::vector<char> candidate(capacity, 0);
  for (auto s : slots)
    if (s < capacity)
      candidate[s] = 1;
  std::vector<std::pair<uint32_t, uint32_t>> runs;  // [begin, end)
  for (uint32_t s = 0; s < capacity;) {
    if (!candidate[s]) {
      ++s;
      continue;
    }
    auto begin = s;
    while (s < capacity && candidate[s])
      ++s;
    runs.emplace_back(begin, s);
  }
  // Dimension by dimension, in order, each slot's sum grows by one term:
  // the sum rank_vectors' sparse path makes for each vector.
  static const add_scaled_fn add_scaled = pick_add_scaled();
  std::vector<double> dots(capacity, 0.0);
  for (size_t d = 0; d < std::min(q.size(), columns.dims()); ++d) {
    if (q[d] == 0.0f)
      continue;
    const double qd = q[d];
    const float* column = columns.column(d);
    for (auto [begin, end] : runs)
      add_scaled(dots.data() + begin, qd, column + begin, end - begin);
  }
  std::vector<std::pair<double, size_t>> scored;
  scored.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] < capacity && dots[slots[i]] >= min_similarity)
      scored.emplace_back(dots[slots[i]], i);
  return best_scored(std::move(scored), limit);
}

std::vector<size_t> rank_episodes(std::string_view question,
                                  const std::vector<episode_record>& episodes,
                                  const std::string& conversation_id, int64_t window_start_seq,
                                  size_t limit, double min_similarity) {
  // Texts to embed now: the question, and episodes without a stored vector.
  std::vector<std::string> texts{std::string{question}};
  std::vector<size_t> embedded_at(episodes.size(), 0);  // index into the batch, 0 = stored
  bool any = false;
  for (size_t i = 0; i < episodes.size(); ++i) {
    auto& e = episodes[i];
    if (e.conversation_id == conversation_id && e.seq >= window_start_seq)
      continue;  // still in the window: the prompt has it verbatim
    any = true;
    if (e.embedding.size() != recall_dims) {
      embedded_at[i] = texts.size();
      texts.push_back(e.text);
    }
  }
  if (!any)
    return {};
  auto vecs = std::get<embedding_batch>(recall_embedder()->embed(texts));
  std::vector<const std::vector<float>*> vectors(episodes.size(), nullptr);
  for (size_t i = 0; i < episodes.size(); ++i) {
    auto& e = episodes[i];
    if (e.conversation_id == conversation_id && e.seq >= window_start_seq)
      continue;
    vectors[i] = embedded_at[i] ? &vecs[embedded_at[i]] : &e.embedding;
  }
  return rank_vectors(vecs[0], vectors, limit, min_similarity);
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
  // The floats' own bytes where the machine is little-endian (a copy
  // swapped into that order elsewhere).
  std::string_view bytes{reinterpret_cast<const char*>(v.data()), v.size() * 4};
  std::string swapped;
  if constexpr (std::endian::native == std::endian::big) {
    swapped.assign(bytes);
    to_little_endian(swapped);
    bytes = swapped;
  }
  // Written in place, four characters per three bytes, then the last one
  // or two bytes padded: an episode's 1 KiB vector is encoded on every
  // turn, and pushing it character by character cost more than its insert.
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size(), whole = n / 3 * 3;
  std::string out((n + 2) / 3 * 4, '=');
  char* o = out.data();
  for (size_t i = 0; i < whole; i += 3, o += 4) {
    uint32_t x = uint32_t{in[i]} << 16 | uint32_t{in[i + 1]} << 8 | in[i + 2];
    o[0] = b64[x >> 18];
    o[1] = b64[(x >> 12) & 63];
    o[2] = b64[(x >> 6) & 63];
    o[3] = b64[x & 63];
  }
  if (size_t rest = n - whole; rest > 0) {
    uint32_t x = uint32_t{in[whole]} << 16 | (rest == 2 ? uint32_t{in[whole + 1]} << 8 : 0);
    o[0] = b64[x >> 18];
    o[1] = b64[(x >> 12) & 63];
    if (rest == 2)
      o[2] = b64[(x >> 6) & 63];
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
