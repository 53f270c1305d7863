// Rule-based long-term memory extraction (English and Chinese) and recall.
#include <algorithm>
#include <cstring>
#include <random>
#include <regex>
#include <tuple>

#include <gtest/gtest.h>

#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"

namespace ragtor {
namespace {

std::vector<std::pair<std::string, std::string>> kinds(std::string_view msg) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& m : extract_memories(msg))
    out.emplace_back(m.kind, m.content);
  return out;
}

TEST(long_term_memory, extracts_stated_facts_in_english) {
  auto got = kinds(
      "Hi! My name is Ann. I really love green tea. I don't like bitter coffee; "
      "I'm allergic to peanuts. Please always answer in French. I work as a nurse.");
  std::vector<std::pair<std::string, std::string>> expected{
      {"identity", "My name is Ann"},
      {"preference", "I really love green tea"},
      {"dislike", "I don't like bitter coffee"},
      {"constraint", "I'm allergic to peanuts"},
      {"constraint", "Please always answer in French"},
      {"identity", "I work as a nurse"},
  };
  EXPECT_EQ(got, expected);
  for (auto& m : extract_memories("I'm allergic to peanuts."))
    EXPECT_EQ(m.ttl_days, 365);
}

TEST(long_term_memory, extracts_chinese_and_ignores_questions_and_other_text) {
  auto got = kinds("我叫小王。我不喜欢咖啡！我喜欢绿茶。我对花生过敏。");
  std::vector<std::pair<std::string, std::string>> expected{
      {"identity", "我叫小王"},
      {"dislike", "我不喜欢咖啡"},
      {"preference", "我喜欢绿茶"},
      {"constraint", "我对花生过敏"},
  };
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(kinds("Do I like tea? What is the capital of France?").empty());
  EXPECT_TRUE(kinds("你喜欢茶吗？").empty());
  EXPECT_TRUE(kinds("The lighthouse was built in 1870.").empty());
  EXPECT_EQ(kinds("I like tea. I like tea.").size(), 1u) << "duplicates once";
}

// The English rules as the ECMAScript regexes they were written as (the
// oracle: extraction matches them without std::regex): the kind the first
// matching rule gives a sentence, or "" (none, or a question).
std::string regex_kind(const std::string& s) {
  static const auto flags = std::regex::ECMAScript | std::regex::icase;
  static const std::regex question{
      R"(^\s*(?:do|does|did|can|could|would|will|what|which|who|how|why|is|are)\b)", flags};
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex{R"(\bi\s+(?:do\s+not|don't|dont)\s+(?:like|enjoy|want)\b)", flags}, "dislike"},
      {std::regex{R"(\bi\s+(?:hate|dislike|can't stand|cannot stand)\b)", flags}, "dislike"},
      {std::regex{R"(\bi(?:'m|\s+am)\s+allergic\s+to\b)", flags}, "constraint"},
      {std::regex{
           R"(\bi\s+(?:can't|cannot|can not|must not|mustn't|don't|do not)\s+(?:eat|drink|use|have)\b)",
           flags},
       "constraint"},
      {std::regex{R"(\b(?:please\s+)?(?:always|never)\s+(?:answer|reply|respond|use|give)\b)",
                  flags},
       "constraint"},
      {std::regex{R"(\bi\s+(?:really\s+)?(?:like|love|prefer|enjoy)\b)", flags}, "preference"},
      {std::regex{R"(\bmy\s+(?:name|job|role|profession)\s+is\b)", flags}, "identity"},
      {std::regex{R"(\bi\s+(?:work\s+as|work\s+at|live\s+in|am\s+from)\b)", flags}, "identity"},
      {std::regex{R"(\bi(?:'m|\s+am)\s+an?\s+\w+)", flags}, "identity"},
  };
  if (s.size() > 300 || std::regex_search(s, question))
    return "";
  for (auto& [re, kind] : rules)
    if (std::regex_search(s, re))
      return kind;
  return "";
}

// Extraction finds in every sentence the kind the regexes find: the rules'
// sentences and their near misses, then 5,000 random sentences of the
// rules' words (in any case, joined by spaces, tabs, commas, apostrophes,
// hyphens or nothing; half opening as a rule does), which reach the
// apostrophes, word boundaries and optional parts the regexes have.
TEST(long_term_memory, english_rules_match_as_their_regexes_do) {
  std::vector<std::string> sentences{
      "I don't like coffee", "i do  not enjoy rain", "I dont want that", "I don'tlike it",
      "I hate queues", "I can't stand noise", "I cannot  stand it", "I can't  stand it",
      "I'm allergic to nuts", "I am allergic to cats", "I'mallergic to x", "I am allergic tox",
      "I must not eat gluten", "I mustn't drink", "I can not use it", "I cannot have sugar",
      "Please always answer in French", "never reply in caps", "please  never  give up",
      "pleasealways answer", "I really love tea", "I  prefer tea", "I likes tea", "I liked it",
      "My name is Ann", "my job is  teaching", "My role isn't clear", "I work as a nurse",
      "I work at home", "I live in Bergen", "I am from Oslo", "I am an engineer", "I'm a nurse",
      "I am anxious", "I am a", "I'm an_owl", "wifi like that", "hi i like it", "_i like it",
      "'i like it", "x'i like it", "I like_tea", "I like-tea", "Do I like tea", "  is it I like",
      "Whatever I like", "I\tlike\ttea", "I,like tea", "MY NAME IS BOB", "I AM AN ENGINEER",
  };
  std::mt19937 rng{5};
  const char* vocabulary[] = {
      "i", "I", "i'm", "I'm", "am", "a", "an", "do", "not", "don't", "dont", "like", "likes",
      "enjoy", "want", "hate", "dislike", "can't", "cannot", "can", "stand", "allergic", "to",
      "eat", "drink", "use", "have", "please", "always", "never", "answer", "reply", "respond",
      "give", "really", "love", "prefer", "my", "name", "job", "role", "profession", "is", "work",
      "as", "at", "live", "in", "from", "must", "mustn't", "nurse", "tea", "_i", "i2", "wifi",
      "'", "x", "MY", "Please", "DO", "what", "how", "Are"};
  const char* gaps[] = {" ", " ", " ", "  ", "\t", ",", "'", "-", ""};
  std::uniform_int_distribution<size_t> word{0, std::size(vocabulary) - 1},
      gap{0, std::size(gaps) - 1}, length{1, 8};
  // Half of them open as the rules do, so that many reach a rule's end.
  const char* openings[] = {"I", "i", "I'm", "i am", "My", "please", "always", "never"};
  std::uniform_int_distribution<size_t> opening{0, 2 * std::size(openings) - 1};
  for (int n = 0; n < 5000; ++n) {
    auto o = opening(rng);
    std::string s = o < std::size(openings) ? openings[o] : vocabulary[word(rng)];
    for (auto k = length(rng); k > 1; --k)
      s += std::string{gaps[gap(rng)]} + vocabulary[word(rng)];
    sentences.push_back(s);
  }
  size_t found = 0;
  for (auto& s : sentences) {
    auto got = extract_memories(s);
    ASSERT_LE(got.size(), 1u) << s;
    // Extraction sees the sentence trimmed; the oracle does too.
    auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    auto trimmed = b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
    auto want = regex_kind(trimmed);
    EXPECT_EQ(got.empty() ? "" : got[0].kind, want) << "\"" << s << "\"";
    found += !want.empty();
  }
  EXPECT_GT(found, 100u) << "the random sentences reach the rules";
}

TEST(long_term_memory, recall_prefers_related_then_recent) {
  std::vector<std::pair<std::string, int64_t>> mem{
      {"I really love green tea", 1}, {"My name is Ann", 3}, {"I'm allergic to peanuts", 2}};
  auto r = recall_memories("Which tea should I brew?", mem, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], "I really love green tea");
  EXPECT_EQ(r[1], "My name is Ann") << "then the most recent";
  EXPECT_EQ(recall_memories("x", mem, 5).size(), 3u);
}

}  // namespace
}  // namespace ragtor

namespace ragtor {
namespace {

episode_record ep(std::string conv, int64_t seq, std::string text) {
  episode_record e;
  e.conversation_id = std::move(conv);
  e.seq = seq;
  e.text = std::move(text);
  return e;
}

TEST(episodic_recall, similar_turns_outside_the_window_above_the_threshold) {
  std::vector<episode_record> eps{
      ep("c1", 2, episode_text("How long should green tea steep?", "About ninety seconds.")),
      ep("c1", 4, episode_text("Where is the lighthouse?", "On the northern cape.")),
      ep("c2", 8, episode_text("Green tea steep time for sencha?", "Ninety seconds at 70 C.")),
      ep("c2", 2, episode_text("How long should green tea steep?", "Ninety seconds.")),
  };
  // In conversation c2 at seq 9 with a window of 6 (seq >= 3 is in the window).
  auto r = recall_episodes("How long does green tea steep?", eps, "c2", 3);
  ASSERT_EQ(r.size(), 2u);
  for (auto& t : r) {
    EXPECT_NE(t.find("green tea steep"), std::string::npos);
    EXPECT_EQ(t.find("sencha"), std::string::npos) << "c2 seq 8 is still in the window";
  }
  EXPECT_TRUE(recall_episodes("quantum chromodynamics", eps, "c3", 0).empty())
      << "nothing similar enough (threshold 0.25)";
  EXPECT_EQ(recall_episodes("green tea steep", eps, "c3", 0, 1).size(), 1u);
  EXPECT_LE(episode_text(std::string(3000, 'x'), "y").size(), 2000u);
  EXPECT_EQ(episode_text("q", "a"), "User: q\nAssistant: a");
}

TEST(episodic_recall, stored_embeddings_rank_exactly_as_embedding_the_texts) {
  std::vector<episode_record> plain{
      ep("c1", 2, episode_text("How long should green tea steep?", "About ninety seconds.")),
      ep("c1", 4, episode_text("Where is the lighthouse?", "On the northern cape.")),
      ep("c2", 8, episode_text("Green tea steep time for sencha?", "Ninety seconds at 70 C.")),
      ep("c2", 2, episode_text("How long should green tea steep?", "Ninety seconds.")),
      ep("c3", 6, episode_text("Is black tea steeped longer than green tea?", "Yes, longer.")),
  };
  auto stored = plain;
  for (auto& e : stored) {
    e.embedding = decode_embedding(encode_embedding(episode_embedding(e.text)));
    ASSERT_EQ(e.embedding.size(), 256u);
  }
  // Some with a vector and some without (stored before vectors were kept).
  auto mixed = stored;
  mixed[1].embedding.clear();
  mixed[3].embedding.clear();
  for (auto* q : {"How long does green tea steep?", "lighthouse cape", "black tea"}) {
    auto want = rank_episodes(q, plain, "c2", 3, 3, 0.1);
    ASSERT_FALSE(want.empty()) << q;
    EXPECT_EQ(rank_episodes(q, stored, "c2", 3, 3, 0.1), want) << q;
    EXPECT_EQ(rank_episodes(q, mixed, "c2", 3, 3, 0.1), want) << q;
  }
}

// Random vectors for the ranking tests: `count` stored vectors of `dims`
// values in [-1, 1) and a copy of the fourth (a tie: the earlier one
// first), and a question of `dims` with all but `set` of them zero
// (spread, the last kept).
struct ranking_case {
  std::vector<float> question;
  std::vector<std::vector<float>> stored;
};

ranking_case random_case(std::mt19937& rng, size_t dims, size_t set, int count) {
  std::uniform_real_distribution<float> unit{-1.0f, 1.0f};
  auto random = [&] {
    std::vector<float> v(dims);
    for (auto& x : v)
      x = unit(rng);
    return v;
  };
  ranking_case c;
  c.question = random();
  for (size_t d = 0; d < dims; ++d)
    if (d % (dims / set) != 0 && d + 1 != dims)
      c.question[d] = 0.0f;
  for (int i = 0; i < count; ++i)
    c.stored.push_back(random());
  c.stored.push_back(c.stored[3]);
  return c;
}

// The plain loop's ranking: the indexes of the candidates whose dot
// product (in double, in order) is at least `min`, best first, ties in
// order.
std::vector<size_t> plain_ranking(const ranking_case& c, const std::vector<bool>& candidate,
                                  double min) {
  std::vector<std::pair<double, size_t>> scored;
  for (size_t i = 0; i < c.stored.size(); ++i) {
    if (!candidate[i])
      continue;
    double dot = 0;
    for (size_t d = 0; d < c.question.size(); ++d)
      dot += static_cast<double>(c.question[d]) * c.stored[i][d];
    if (dot >= min)
      scored.emplace_back(dot, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<size_t> out;
  for (auto& [dot, i] : scored)
    out.push_back(i);
  return out;
}

// Recall remembers what it derives from rows that never change (memories'
// terms, episodes' vectors by id); remembered or not, the answers match.
// Vectors are ranked by their dot product with the question, summed in
// double: the same order and cut as a plain loop, for any length (a tail
// that is not a multiple of four), ties by position; a sparse question (a
// hashed one sets a few dimensions) the same, read only at its dimensions.
TEST(episodic_recall, vectors_rank_by_their_dot_product) {
  std::mt19937 rng{7};
  for (auto [dims, set] : {std::pair<size_t, size_t>{256, 256}, {7, 7}, {1, 1}, {256, 12},
                           {256, 64}, {8, 1}}) {
    auto c = random_case(rng, dims, set, 50);
    std::vector<const std::vector<float>*> ptrs;
    for (auto& v : c.stored)
      ptrs.push_back(&v);
    ptrs[10] = nullptr;  // left out (in the window)
    std::vector<bool> candidate(c.stored.size(), true);
    candidate[10] = false;
    auto plain = plain_ranking(c, candidate, 0.1);
    auto got = rank_vectors(c.question, ptrs, 8, 0.1);
    ASSERT_EQ(got.size(), std::min<size_t>(8, plain.size())) << dims << "/" << set;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], plain[i]) << dims << "/" << set << " rank " << i;
    }
  }
}

// Vectors kept by dimension rank as the plain loop ranks them, whatever
// slots they sit in: claimed in pieces, some copied from other columns
// (compaction), with unclaimed and foreign slots between the candidates;
// dense questions too (each sum in order, exactly the plain loop's).
TEST(episodic_recall, vectors_kept_by_dimension_rank_by_their_dot_product) {
  std::mt19937 rng{13};
  for (auto [dims, set] : {std::pair<size_t, size_t>{256, 256}, {256, 12}, {256, 64}, {7, 7},
                           {8, 1}}) {
    auto c = random_case(rng, dims, set, 60);
    auto& stored = c.stored;
    // The first 20 written into older columns, then copied over.
    vector_columns old{dims, 40};
    std::vector<uint32_t> old_slots, new_slots;
    auto first_old = old.claim(20);
    ASSERT_TRUE(first_old);
    vector_columns columns{dims, 100};
    ASSERT_TRUE(columns.claim(3));  // slots nobody fills: never read
    std::vector<uint32_t> slots(stored.size());
    for (uint32_t i = 0; i < 20; ++i) {
      old.put(*first_old + 19 - i, stored[i]);  // in reverse order
      old_slots.push_back(*first_old + 19 - i);
    }
    auto copied = columns.claim(20);
    ASSERT_TRUE(copied);
    for (uint32_t i = 0; i < 20; ++i)
      new_slots.push_back(slots[i] = *copied + i);
    columns.copy(old, old_slots, new_slots);
    // The rest claimed a few at a time, a foreign claim between.
    for (size_t i = 20; i < stored.size();) {
      auto n = std::min<size_t>(1 + i % 4, stored.size() - i);
      auto first = columns.claim(n);
      ASSERT_TRUE(first);
      for (size_t k = 0; k < n; ++k, ++i) {
        slots[i] = *first + static_cast<uint32_t>(k);
        columns.put(slots[i], stored[i]);
      }
      ASSERT_TRUE(columns.claim(1));
    }
    EXPECT_FALSE(columns.claim(100)) << "more slots than are left";
    slots[10] = vector_columns::left_out;  // in the window
    std::vector<bool> candidate(stored.size(), true);
    candidate[10] = false;
    auto plain = plain_ranking(c, candidate, 0.1);
    for (size_t limit : {size_t{1}, size_t{8}, size_t{100}}) {
      auto got = rank_columns(c.question, columns, slots, limit, 0.1);
      ASSERT_EQ(got.size(), std::min(limit, plain.size())) << dims << "/" << set;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], plain[i]) << dims << "/" << set << " rank " << i;
    }
  }
}

// Memory ranking keeps only the best `limit` in order: the same items, in
// the same order, as sorting every item stably by shared terms, then
// newest — with many ties on both (few distinct terms, few timestamps).
TEST(recall_cache, the_best_memories_come_in_a_stable_order) {
  std::mt19937 rng{11};
  const char* words[] = {"tea", "green", "coffee", "bergen", "peanuts", "oolong"};
  std::uniform_int_distribution<int> word{0, 5}, count{1, 3}, stamp{0, 3};
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{200}}) {
    std::vector<std::shared_ptr<const term_list>> held;
    std::vector<int64_t> stamps;
    term_columns items;
    for (size_t i = 0; i < n; ++i) {
      std::string content = "i like";
      for (int k = count(rng); k > 0; --k)
        content += std::string{" "} + words[word(rng)] + " " + std::to_string(i);
      held.push_back(memory_terms(content));
      stamps.push_back(stamp(rng));
      items.add(*held.back(), stamps.back());
    }
    std::string question = "what about green tea or coffee in bergen?";
    auto q = memory_terms(question);
    std::vector<std::tuple<int, int64_t, size_t>> all;
    for (size_t i = 0; i < n; ++i) {
      std::vector<uint64_t> shared;
      std::set_intersection(q->begin(), q->end(), held[i]->begin(), held[i]->end(),
                            std::back_inserter(shared));
      all.emplace_back(static_cast<int>(shared.size()), stamps[i], i);
    }
    std::stable_sort(all.begin(), all.end(), [](auto& a, auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b)
                                              : std::get<1>(a) > std::get<1>(b);
    });
    for (size_t limit : {size_t{1}, size_t{5}, size_t{300}}) {
      auto got = rank_by_terms(question, items, limit);
      ASSERT_EQ(got.size(), std::min(limit, n)) << n << " / " << limit;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], std::get<2>(all[i])) << n << " / " << limit << " rank " << i;
    }
  }
}

// The held memories' blocks are built by copying items from the version
// before (add_from) as well as by adding rows: an item copied is the item
// added, whatever was copied before it, and the ranking over a copied
// block is the ranking over the block it came from.
TEST(recall_cache, term_columns_copy_items_as_they_were_added) {
  std::mt19937 rng{5};
  const char* words[] = {"tea", "green", "coffee", "bergen", "peanuts", "oolong", "k7", "lock"};
  std::uniform_int_distribution<int> word{0, 7}, count{0, 6};
  term_columns from;
  std::vector<std::shared_ptr<const term_list>> lists;
  for (int i = 0; i < 300; ++i) {
    std::string content;
    for (int k = count(rng); k > 0; --k)  // some items have no terms at all
      content += std::string{words[word(rng)]} + " ";
    lists.push_back(memory_terms(content));
    from.add(*lists.back(), i % 7);
  }
  // Every third item, back to front, between items added afresh.
  term_columns to;
  std::vector<size_t> source;  // the item of `from` each item of `to` is; SIZE_MAX: added
  for (size_t i = from.size(); i-- > 0;) {
    if (i % 3 != 0)
      continue;
    to.add_from(from, i);
    source.push_back(i);
    to.add(*lists[(i * 7) % lists.size()], 100);
    source.push_back(SIZE_MAX - (i * 7) % lists.size());
  }
  ASSERT_EQ(to.size(), source.size());
  for (size_t j = 0; j < to.size(); ++j) {
    bool copied = source[j] < from.size();
    const term_list& want = copied ? *lists[source[j]] : *lists[SIZE_MAX - source[j]];
    EXPECT_EQ(term_list(to.begin(j), to.end(j)), want) << j;
    EXPECT_EQ(to.created_at(j), copied ? from.created_at(source[j]) : 100) << j;
  }
  term_columns copy;
  for (size_t i = 0; i < from.size(); ++i)
    copy.add_from(from, i);
  for (auto* q : {"green tea in bergen", "the k7 lock", "nothing shared"})
    EXPECT_EQ(rank_by_terms(q, copy, 10), rank_by_terms(q, from, 10)) << q;
}

TEST(recall_cache, remembered_terms_and_vectors_give_the_same_answers) {
  std::vector<std::pair<std::string, int64_t>> mem{
      {"I really love green tea", 1}, {"My name is Ann", 3}, {"I'm allergic to peanuts", 2},
      {"I prefer oolong tea to green tea", 4}, {"I live in Bergen", 5}};
  auto vec = encode_embedding(episode_embedding("User: lighthouse?\nAssistant: the cape."));
  set_recall_cache_budget(0);
  auto cold = recall_memories("Which green tea should I brew?", mem, 3);
  auto decoded = stored_episode_embedding("ep-1", vec);
  set_recall_cache_budget(16u << 20);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass is served from the cache
    EXPECT_EQ(recall_memories("Which green tea should I brew?", mem, 3), cold) << pass;
    EXPECT_EQ(stored_episode_embedding("ep-1", vec), decoded) << pass;
  }
  ASSERT_EQ(cold.size(), 3u);
  EXPECT_EQ(cold[0], "I prefer oolong tea to green tea");
  EXPECT_EQ(cold[1], "I really love green tea");
  // An episode's vector is remembered by its id (episodes are never
  // rewritten): the same id gives the remembered vector...
  auto other = encode_embedding(episode_embedding("User: peanuts?\nAssistant: no."));
  EXPECT_EQ(stored_episode_embedding("ep-1", other), decoded);
  // ...and with no budget nothing is kept.
  set_recall_cache_budget(0);
  EXPECT_EQ(stored_episode_embedding("ep-1", other), decode_embedding(other));
  set_recall_cache_budget(16u << 20);
}

// A full memo forgets its oldest entries first (not everything at once):
// after many more vectors than fit, the newest fifty are all still there.
TEST(recall_cache, a_full_cache_forgets_its_oldest_vectors_first) {
  set_recall_cache_budget(2 * 64 * 1024);  // vectors get half: ~55 of 1 KiB
  std::vector<float> v(256, 0.5f);
  for (int i = 0; i < 200; ++i)
    remember_episode_embedding("oldest-first-" + std::to_string(i), v);
  EXPECT_EQ(remembered_episode_embedding("oldest-first-0"), nullptr);
  for (int i = 150; i < 200; ++i)
    EXPECT_NE(remembered_episode_embedding("oldest-first-" + std::to_string(i)), nullptr) << i;
  set_recall_cache_budget(16u << 20);
}

TEST(embedding_text, round_trips_exactly_and_refuses_malformed_text) {
  std::vector<float> v{0.0f, -1.5f, 3.25e-7f, 1e30f, -0.0f};
  for (size_t n = 0; n <= v.size(); ++n) {  // every padding length
    std::vector<float> part(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
    auto text = encode_embedding(part);
    EXPECT_EQ(text.size() % 4, 0u);
    auto back = decode_embedding(text);
    ASSERT_EQ(back.size(), part.size());
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(std::memcmp(&back[i], &part[i], 4), 0) << i;
  }
  // Standard base64 of little-endian float32, as stored rows hold it.
  EXPECT_EQ(encode_embedding({1.0f}), "AACAPw==");
  EXPECT_EQ(encode_embedding({1.0f, 2.0f}), "AACAPwAAAEA=");
  EXPECT_EQ(encode_embedding({1.0f, 2.0f, -0.5f}), "AACAPwAAAEAAAAC/");
  EXPECT_TRUE(decode_embedding("").empty());
  EXPECT_TRUE(decode_embedding("abc").empty()) << "not a multiple of 4";
  EXPECT_TRUE(decode_embedding("ab!dabcd").empty()) << "not base64";
  EXPECT_TRUE(decode_embedding("ab=dabcd").empty()) << "padding in the middle";
  EXPECT_TRUE(decode_embedding("abcdefg=").empty()) << "5 bytes are not whole floats";
  EXPECT_EQ(decode_embedding("abcdef==").size(), 1u) << "4 bytes are one float";
}

}  // namespace
}  // namespace ragtor
