#include "persistence/store_backend.hpp"

#include "memory/long_term.hpp"
#include "persistence/recall_index.hpp"

#include <chrono>
#include <optional>
#include <random>

namespace ragtor {

std::string new_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::string id(32, '0');
  // 12 hex digits of milliseconds, most significant first, so that ids
  // sort in the order they were made.
  auto t = static_cast<uint64_t>(now_ms());
  for (int i = 11; i >= 0; --i, t >>= 4)
    id[i] = hex[t & 0xf];
  // 80 random bits.
  auto x = rng(), y = rng();
  for (int i = 12; i < 28; ++i, x >>= 4)
    id[i] = hex[x & 0xf];
  for (int i = 28; i < 32; ++i, y >>= 4)
    id[i] = hex[y & 0xf];
  return id;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> recall_episodes_from(store_backend& db, const std::string& user_id,
                                              std::string_view question,
                                              const std::string& conversation_id,
                                              int64_t window_start_seq, size_t limit,
                                              double min_similarity) {
  recall_index none{0};  // holds nothing: reads the rows whole
  return none.episodes(db, user_id, question, conversation_id, window_start_seq, now_ms(), limit,
                       min_similarity);
}

turn_context read_turn_context(store_backend& db, const std::string& conversation_id,
                               const std::string& user_id, const std::string& question,
                               int32_t window_limit, int64_t window_start_seq, bool incognito,
                               int64_t now, recall_index* index) {
  // Without an index, one that holds nothing (reads the rows whole), made
  // only then: the store's turns pass theirs.
  std::optional<recall_index> none;
  auto& recall = index ? *index : none.emplace(0);
  // Every part from one snapshot, in one read transaction.
  struct snapshot {
    store_backend& db;
    explicit snapshot(store_backend& d) : db{d} { db.begin_read(); }
    ~snapshot() { db.end_read(); }
  } one_snapshot{db};
  turn_reads reads{conversation_id, user_id, window_limit, incognito, now};
  if (!incognito)
    recall.plan(reads, user_id);
  db.read_ahead(reads);
  turn_context out;
  auto part = [&](const char* name, auto&& read) {
    try {
      read();
    } catch (const std::exception& e) {
      out.failed.emplace_back(name);
      out.failed.back() += std::string{": "} + e.what();
    }
  };
  part("history", [&] { out.history = db.history(conversation_id, window_limit); });
  if (incognito)
    return out;
  part("summary", [&] {
    auto s = db.load_summary(conversation_id);
    out.summary = std::move(s.summary);
    out.summary_known = true;
    out.summary_version = s.version;
    out.summary_covered_seq = s.covered_seq;
    out.summary_merges = s.incremental_updates;
  });
  part("core memory", [&] { out.core_memory = db.core_memory(user_id); });
  // The user's recall epoch, read once for both parts; if it cannot be
  // read, each part tries on its own and fails on its own.
  std::optional<int64_t> epoch;
  try {
    epoch = db.recall_epoch(user_id);
  } catch (const std::exception&) {
  }
  part("memories", [&] {
    out.memories = recall.memories(db, user_id, question, now, recall_index::memories_per_turn,
                                   epoch);
  });
  part("episodes", [&] {
    out.episodes = recall.episodes(db, user_id, question, conversation_id, window_start_seq, now,
                                   recall_index::episodes_per_turn,
                                   recall_index::episode_min_similarity, epoch);
  });
  return out;
}

}  // namespace ragtor
