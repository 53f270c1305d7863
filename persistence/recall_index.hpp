// Each user's recall rows kept in memory between turns (issue 20, target
// 5): the newest 200 unexpired memories with their terms and the newest
// 200 episodes' keys with their vectors, as the store last read them. A
// turn reads the user's recall epoch (one key lookup) and only the rows
// created since the newest one held (usually the previous turn's), instead
// of the 200 + 200 rows every turn; ranking runs over what is held.
//
// Coherent across processes sharing one database (cluster frontends on
// PostgreSQL): rows are only ever added at the newest end, and every write
// that removes or changes one raises the user's epoch in its own
// transaction (store_backend::recall_epoch), which makes the next turn read
// the user's rows again. New rows are read from `created_at >=` the newest
// held minus a margin for rows committed after a newer one and for clocks
// that differ between nodes, and the rows are read whole again after a
// while in any case (both below). On SQLite the store also leaves out the
// rows at or below the newest rowid held (rowids follow commit order:
// store_backend.hpp, `after`), so the rows of that margin are not read
// again every turn; elsewhere they are told by their ids. (A `VACUUM` run
// while serving may renumber rowids: rows added since would be missed by
// recall, not by the store, until the user's rows are read whole again.)
//
// Owned by the store (one per database), used by its reader threads at
// once; bounded by bytes, least recently used users dropped first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ragtor {

class store_backend;
struct turn_reads;

class recall_index {
public:
  // New rows are looked for from this long before the newest held: a row
  // is stamped when its turn ends and committed a little later (the write
  // queue; seconds under a burst), and another node's clock may be a
  // little behind.
  static constexpr int64_t late_row_margin_ms = 10000;
  // A user's rows are read whole again when held longer than this.
  static constexpr int64_t reread_after_ms = 5 * 60 * 1000;
  // What a turn recalls by default: memories, episodes, and the least
  // similarity an episode needs.
  static constexpr size_t memories_per_turn = 5;
  static constexpr size_t episodes_per_turn = 3;
  static constexpr double episode_min_similarity = 0.25;

  // budget_bytes = 0 keeps nothing: every turn reads the rows whole.
  explicit recall_index(size_t budget_bytes);
  ~recall_index();
  recall_index(const recall_index&) = delete;
  recall_index& operator=(const recall_index&) = delete;

  // The `limit` memories of the user most related to `question`: the same
  // as recall_memories() over db.list_memories(user_id, now).
  // `epoch`: the user's recall epoch when the caller read it already (one
  // read for both parts of a turn); else read here.
  std::vector<std::string> memories(store_backend& db, const std::string& user_id,
                                    std::string_view question, int64_t now,
                                    size_t limit = memories_per_turn,
                                    std::optional<int64_t> epoch = std::nullopt);

  // The episodes recalled for `question`: the same as
  // recall_episodes_from(db, user_id, question, ...), outside the window
  // of `conversation_id` from `window_start_seq`.
  std::vector<std::string> episodes(store_backend& db, const std::string& user_id,
                                    std::string_view question, const std::string& conversation_id,
                                    int64_t window_start_seq, int64_t now,
                                    size_t limit = episodes_per_turn,
                                    double min_similarity = episode_min_similarity,
                                    std::optional<int64_t> epoch = std::nullopt);

  // What this turn's memories() and episodes() will ask the store (rows
  // created since the newest held, or all of them), assuming the user's
  // recall epoch is still the one held: recall's part of what a backend
  // reads ahead (store_backend::read_ahead).
  void plan(turn_reads& reads, const std::string& user_id);

  // How each look-up was served, for tests and benches.
  struct counters {
    uint64_t held = 0;     // nothing new: no row read but the epoch
    uint64_t added = 0;    // new rows read and added to those held
    uint64_t read = 0;     // read whole (first turn, another epoch, expiry, age)
    uint64_t read_again = 0;  // rows read again that were held already (no store mark)
    uint64_t texts_read = 0;  // recalled episodes' texts read by id (not remembered)
    size_t users = 0;      // users held (memories and episodes counted apart)
    size_t bytes = 0;
  };
  counters stats() const;
  // The sums over every index of the process (the /metrics gauges).
  static counters process_stats();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ragtor
