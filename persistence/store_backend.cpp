#include "persistence/store_backend.hpp"

#include "memory/long_term.hpp"

#include <chrono>
#include <random>

namespace ragtor {

std::string new_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::string id;
  id.reserve(32);
  for (int i = 0; i < 2; ++i) {
    auto x = rng();
    for (int j = 0; j < 16; ++j, x >>= 4)
      id += hex[x & 0xf];
  }
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
                                              int64_t window_start_seq, int32_t candidates,
                                              size_t limit, double min_similarity) {
  // The newest episodes' keys, and their vectors from memory when every one
  // is remembered (always, after a user's first turn, but for episodes
  // stored before vectors were kept); else one read of the vectors, which
  // remembers them.
  auto keys = db.recent_episode_keys(user_id, candidates);
  std::vector<std::shared_ptr<const std::vector<float>>> held;
  held.reserve(keys.size());
  for (auto& e : keys) {
    auto v = remembered_episode_embedding(e.id);
    if (!v)
      break;
    held.push_back(std::move(v));
  }
  std::vector<std::string> out;
  if (held.size() == keys.size()) {
    std::vector<const std::vector<float>*> vectors(keys.size(), nullptr);
    bool any = false;
    for (size_t i = 0; i < keys.size(); ++i)
      if (!(keys[i].conversation_id == conversation_id && keys[i].seq >= window_start_seq)) {
        vectors[i] = held[i].get();
        any = true;
      }
    if (!any)
      return out;  // nothing outside the window: the question need not be embedded
    for (auto i : rank_vectors(episode_embedding(question), vectors, limit, min_similarity))
      out.push_back(db.episode_text(keys[i].id));
    return out;
  }
  auto eps = db.recent_episodes(user_id, candidates, false);
  for (auto i :
       rank_episodes(question, eps, conversation_id, window_start_seq, limit, min_similarity))
    out.push_back(eps[i].embedding.empty() ? std::move(eps[i].text) : db.episode_text(eps[i].id));
  return out;
}

turn_context read_turn_context(store_backend& db, const std::string& conversation_id,
                               const std::string& user_id, const std::string& question,
                               int32_t window_limit, int64_t window_start_seq, bool incognito,
                               int64_t now) {
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
  part("summary", [&] { out.summary = db.load_summary(conversation_id).summary; });
  part("core memory", [&] { out.core_memory = db.core_memory(user_id); });
  part("memories", [&] {
    std::vector<std::pair<std::string, int64_t>> items;
    for (auto& m : db.list_memories(user_id, now))
      items.emplace_back(std::move(m.content), m.created_at);
    out.memories = recall_memories(question, items, 5);
  });
  part("episodes", [&] {
    out.episodes = recall_episodes_from(db, user_id, question, conversation_id, window_start_seq);
  });
  return out;
}

}  // namespace ragtor
