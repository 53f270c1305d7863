#include "persistence/recall_index.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <iterator>
#include <list>
#include <mutex>
#include <type_traits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"
#include "persistence/store_backend.hpp"

namespace ragtor {

namespace {

// What list_memories and recall read per user (store_backend.hpp).
constexpr size_t max_rows = 200;

size_t recall_dims() {
  static const size_t dims = episode_embedding("dims").size();
  return dims;
}

struct memory_row {
  std::string id;
  std::string content;
  int64_t created_at = 0;
  int64_t expires_at = 0;  // 0: never
  // As read, until held_rows keys the row (its terms go to the keys).
  std::shared_ptr<const term_list> terms;

  size_t bytes() const { return sizeof *this + id.size() + content.size(); }
  void keyed() { terms.reset(); }
};

// An episode's key and where its vector is: `vector` as read, until
// held_rows::set or merge puts it in the user's columns at `slot`.
struct episode_row {
  std::string id;
  std::string conversation_id;
  int64_t seq = 0;
  int64_t created_at = 0;
  std::shared_ptr<const std::vector<float>> vector;
  uint32_t slot = vector_columns::left_out;

  size_t bytes() const {
    return sizeof *this + id.size() + conversation_id.size()
           + (vector ? vector->size() * sizeof(float) : 0);
  }
  void keyed() {}  // the slot stays: a full set of columns is made again from the rows
};

// What a turn reads of every held row, in row order, in a few blocks
// (issue 20, target 5). A user's rows lie apart on the heap, and between
// two of the user's turns other turns evict them from the cache: a field
// read from each of 200 rows was 200 or more cache misses per turn.
// Memories: their term lists and times, for ranking. Episodes: their
// conversation (hashed) and seq, to leave out the turn's own window, and
// their slot in the columns.
template <class Row>
struct row_keys;

template <>
struct row_keys<memory_row> {
  term_columns terms;
  void add(const memory_row& r) { terms.add(*r.terms, r.created_at); }
  void add_from(const row_keys& other, size_t i) { terms.add_from(other.terms, i); }
  size_t bytes() const { return terms.bytes(); }
};

template <>
struct row_keys<episode_row> {
  std::vector<uint64_t> conversation;  // std::hash of the conversation id
  std::vector<int64_t> seq;
  std::vector<uint32_t> slot;  // in the columns
  static uint64_t hash(const std::string& conversation_id) {
    return std::hash<std::string>{}(conversation_id);
  }
  void add(const episode_row& r) {
    conversation.push_back(hash(r.conversation_id));
    seq.push_back(r.seq);
    slot.push_back(r.slot);
  }
  void add_from(const row_keys& other, size_t i) {
    conversation.push_back(other.conversation[i]);
    seq.push_back(other.seq[i]);
    slot.push_back(other.slot[i]);
  }
  size_t bytes() const {
    return sizeof *this + conversation.capacity() * sizeof(uint64_t)
           + seq.capacity() * sizeof(int64_t) + slot.capacity() * sizeof(uint32_t);
  }
};

// The rows one read or one merge brought, newest first, and the batches
// before them. A version of a user's rows points into its newest batch
// and older ones, and holds the newest: the chain keeps every row it
// points at alive, with no count per row. Copying a count per row was 200
// atomic increments per new episode (and 200 decrements when the version
// before was dropped), on rows that lie apart on the heap: a cache miss
// each (2 % of ragtor's CPU at 64 streams, docs/performance.md).
template <class Row>
struct row_batch {
  std::vector<Row> rows;
  std::shared_ptr<const row_batch> older;
  size_t chain_rows = 0;   // rows here and in the older batches
  size_t chain_bytes = 0;  // what they hold
  static constexpr size_t overhead = 96;  // the batch and its shared block, about
};

// One user's rows as last read, newest first (created_at DESC, id: the
// store's order). The rows are shared between versions: a turn that adds
// its new rows makes a new version that points at the same held rows, so
// nothing is copied but pointers, and a reader on another store thread
// keeps the version it found.
template <class Row>
struct held_rows {
  using row_ptr = const Row*;  // into `batches`
  int64_t epoch = 0;
  int64_t read_at = 0;              // when they were last read whole
  int64_t valid_until = INT64_MAX;  // the first expiry among them
  // The store's mark of the newest row read (store_backend.hpp, `after`):
  // 0 on a store without one, where rows read again are told by their ids.
  int64_t mark = 0;
  std::vector<row_ptr> rows;
  std::shared_ptr<const row_batch<Row>> batches;  // the newest: keeps `rows` alive
  // Episodes: the rows' vectors by dimension, each row at its slot. Shared
  // with the versions before while it has room for the rows added.
  std::shared_ptr<vector_columns> columns;
  row_keys<Row> keys;  // of `rows`, in their order
  size_t bytes = 0;

  static constexpr bool has_vectors = std::is_same_v<Row, episode_row>;

  static bool newer_row(const Row& a, const Row& b) {
    return a.created_at != b.created_at ? a.created_at > b.created_at : a.id < b.id;
  }
  // Rows in order (newer_row), their keys added to `keyed` in that order,
  // put in a new batch before `older`.
  static std::shared_ptr<const row_batch<Row>> batch(
      std::vector<Row>&& fresh, row_keys<Row>& keyed,
      std::shared_ptr<const row_batch<Row>> older) {
    auto b = std::make_shared<row_batch<Row>>();
    b->chain_bytes = row_batch<Row>::overhead;
    for (auto& r : fresh) {
      keyed.add(r);
      r.keyed();
      b->chain_bytes += r.bytes() + 16;  // 16: the vector's slack, about
    }
    b->rows = std::move(fresh);
    b->chain_rows = b->rows.size();
    if (older) {
      b->chain_rows += older->chain_rows;
      b->chain_bytes += older->chain_bytes;
    }
    b->older = std::move(older);
    return b;
  }

  // `rows` are those of one batch, in its order.
  void point_at(std::shared_ptr<const row_batch<Row>> b) {
    batches = std::move(b);
    rows.clear();
    rows.reserve(batches->rows.size());
    for (auto& r : batches->rows)
      rows.push_back(&r);
  }

  // The rows pointed at, copied into one batch: rows that left the newest
  // max_rows stay in the chain until this (at most as many again).
  void cut() {
    std::vector<Row> kept;
    kept.reserve(rows.size());
    size_t held_bytes = 0;
    for (auto* r : rows) {
      kept.push_back(*r);
      held_bytes += r->bytes() + 16;
    }
    auto b = std::make_shared<row_batch<Row>>();
    b->rows = std::move(kept);
    b->chain_rows = b->rows.size();
    b->chain_bytes = row_batch<Row>::overhead + held_bytes;
    point_at(std::move(b));
  }

  // Rows read whole: sorts, keeps the newest max_rows. Episodes' vectors
  // go into new columns: those read with their rows, and those of rows
  // without one from their slots in `from`.
  void set(std::vector<Row>&& all, const vector_columns* from = nullptr) {
    std::sort(all.begin(), all.end(), newer_row);
    if (all.size() > max_rows)
      all.resize(max_rows);
    if constexpr (has_vectors) {
      // Room for as many rows again (at most a quarter more than are
      // kept): columns are made again only when full, a few times while a
      // user's first episodes come, then every max_rows / 4 turns.
      if (!all.empty())
        columns = std::make_shared<vector_columns>(
            recall_dims(), std::min(max_rows + max_rows / 4, std::max<size_t>(2 * all.size(), 4)));
      std::vector<uint32_t> from_slots, to_slots;
      uint32_t slot = columns ? *columns->claim(all.size()) : 0;
      for (auto& r : all) {
        if (r.vector) {
          columns->put(slot, *r.vector);
          r.vector.reset();
        } else if (from && r.slot < from->capacity()) {
          from_slots.push_back(r.slot);
          to_slots.push_back(slot);
        } else {
          columns->put(slot, {});  // no vector anywhere: ranks as zero
        }
        r.slot = slot++;
      }
      if (from && !to_slots.empty())
        columns->copy(*from, from_slots, to_slots);
    }
    keys = {};
    point_at(batch(std::move(all), keys, nullptr));
    settle();
  }

  // `have`'s rows and the new ones, merged in order (the held rows are
  // sorted already), the newest max_rows kept. New episodes' vectors go
  // into free slots of `have`'s columns, or all into new ones when it has
  // too few.
  void merge(const held_rows& have, std::vector<Row>&& fresh) {
    if constexpr (has_vectors) {
      auto first = have.columns ? have.columns->claim(fresh.size()) : std::nullopt;
      if (!first) {
        std::vector<Row> all;
        all.reserve(have.rows.size() + fresh.size());
        for (auto& r : have.rows)
          all.push_back(*r);
        std::move(fresh.begin(), fresh.end(), std::back_inserter(all));
        set(std::move(all), have.columns.get());
        return;
      }
      columns = have.columns;
      for (auto& r : fresh) {
        r.slot = (*first)++;
        columns->put(r.slot, *r.vector);
        r.vector.reset();
      }
    }
    row_keys<Row> added;
    std::sort(fresh.begin(), fresh.end(), newer_row);
    auto fresh_batch = batch(std::move(fresh), added, have.batches);
    const auto& add = fresh_batch->rows;
    rows.clear();
    rows.reserve(std::min(max_rows, have.rows.size() + add.size()));
    keys = {};
    // Every row's keys are copied from a block: a held row is not read
    // (once the new rows are placed, the rest are taken unread).
    auto a = have.rows.begin();
    size_t b = 0;
    while (rows.size() < max_rows && (a != have.rows.end() || b < add.size())) {
      if (b == add.size() || (a != have.rows.end() && !newer_row(add[b], **a))) {
        keys.add_from(have.keys, static_cast<size_t>(a - have.rows.begin()));
        rows.push_back(*a++);
      } else {
        keys.add_from(added, b);
        rows.push_back(&add[b++]);
      }
    }
    batches = std::move(fresh_batch);
    if (batches->chain_rows > 2 * max_rows)
      cut();
    settle();
  }

  // Sums what the rows hold (the batches' rows, a row that left the newest
  // max_rows too, until cut) and finds the first expiry.
  void settle() {
    bytes = sizeof *this + rows.capacity() * sizeof(row_ptr);
    if (batches)
      bytes += batches->chain_bytes;
    valid_until = INT64_MAX;
    if constexpr (std::is_same_v<Row, memory_row>)
      for (auto* r : rows)
        if (r->expires_at > 0)
          valid_until = std::min(valid_until, r->expires_at);
    if (columns)
      bytes += columns->bytes();
    bytes += keys.bytes();
  }

  // Whether these rows can be brought up to date by reading only new ones.
  bool current(int64_t epoch_now, int64_t now) const {
    return epoch == epoch_now && now < valid_until
           && now - read_at < recall_index::reread_after_ms;
  }

  // Where new rows are looked for from (none held: from the start).
  int64_t since() const {
    return rows.empty() ? store_backend::all_time
                        : rows.front()->created_at - recall_index::late_row_margin_ms;
  }

  // The ids of the rows created from `from` on (the newest end: what a
  // read from since() finds again), where the store cannot leave them out
  // by the mark. A set, not a scan per row read: with turns a second
  // apart, a user's newest ten seconds hold ten rows of each kind, and
  // with an instant model (bench_load) a hundred.
  std::unordered_set<std::string_view> ids_from(int64_t from) const {
    std::unordered_set<std::string_view> ids;
    if (mark > 0)
      return ids;  // the store returns only rows past the mark
    for (auto& r : rows) {
      if (r->created_at < from)
        break;
      ids.insert(r->id);
    }
    return ids;
  }
};

// Users' rows, bounded by bytes, least recently used dropped first.
template <class V>
class lru_map {
public:
  explicit lru_map(size_t budget) : budget_{budget} {}

  std::shared_ptr<const V> find(const std::string& key) {
    std::lock_guard guard{mu_};
    auto i = map_.find(key);
    if (i == map_.end())
      return nullptr;
    order_.splice(order_.begin(), order_, i->second.pos);
    return i->second.value;
  }

  void put(const std::string& key, std::shared_ptr<const V> value) {
    auto size = value->bytes + key.size() * 2 + 96;
    std::lock_guard guard{mu_};
    auto i = map_.find(key);
    if (i != map_.end()) {
      bytes_ -= i->second.bytes;
      order_.erase(i->second.pos);
      map_.erase(i);
    }
    if (size > budget_)
      return;
    order_.push_front(key);
    map_.emplace(key, slot{std::move(value), order_.begin(), size});
    bytes_ += size;
    while (bytes_ > budget_) {
      auto last = map_.find(order_.back());
      bytes_ -= last->second.bytes;
      map_.erase(last);
      order_.pop_back();
    }
  }

  std::pair<size_t, size_t> size() const {
    std::lock_guard guard{mu_};
    return {map_.size(), bytes_};
  }

private:
  struct slot {
    std::shared_ptr<const V> value;
    std::list<std::string>::iterator pos;
    size_t bytes;
  };
  mutable std::mutex mu_;
  std::list<std::string> order_;
  std::unordered_map<std::string, slot> map_;
  size_t bytes_ = 0;
  size_t budget_;
};

memory_row memory_row_of(memory_record&& m) {
  memory_row r;
  r.terms = memory_terms(m.content);
  r.id = std::move(m.id);
  r.content = std::move(m.content);
  r.created_at = m.created_at;
  r.expires_at = m.expires_at;
  return r;
}

// The newest episodes with their vectors: the keys, and the vectors
// remembered for them; else one read of the vectors (which remembers them).
std::vector<episode_row> read_episodes(store_backend& db, const std::string& user_id,
                                       int64_t& mark) {
  std::vector<episode_row> rows;
  auto keys = db.recent_episode_keys(user_id, max_rows, store_backend::all_time, &mark);
  for (auto& k : keys) {
    auto v = remembered_episode_embedding(k.id);
    if (!v)
      break;
    rows.push_back({std::move(k.id), std::move(k.conversation_id), k.seq, k.created_at,
                    std::move(v)});
  }
  if (rows.size() == keys.size())
    return rows;
  rows.clear();
  for (auto& e : db.recent_episodes(user_id, max_rows, false)) {
    auto v = std::make_shared<const std::vector<float>>(
        e.embedding.size() == recall_dims() ? std::move(e.embedding) : episode_embedding(e.text));
    rows.push_back(
        {std::move(e.id), std::move(e.conversation_id), e.seq, e.created_at, std::move(v)});
  }
  // The rows were read apart from their keys, and one may have committed
  // in between. The keys read again, now that the vectors are remembered,
  // give the mark when they are all among the rows read (the rows are then
  // exactly those up to it); else no mark, and the next turn tells the
  // rows it reads again by their ids.
  if (mark > 0) {
    std::unordered_set<std::string_view> read;
    for (auto& r : rows)
      read.insert(r.id);
    int64_t again_mark = 0;
    auto again = db.recent_episode_keys(user_id, max_rows, store_backend::all_time, &again_mark);
    bool all_read =
        std::all_of(again.begin(), again.end(), [&](auto& k) { return read.contains(k.id); });
    mark = all_read ? again_mark : 0;
  }
  return rows;
}

}  // namespace

struct recall_index::impl {
  explicit impl(size_t budget) : memories{budget / 2}, episodes{budget - budget / 2} {}
  lru_map<held_rows<memory_row>> memories;
  lru_map<held_rows<episode_row>> episodes;
  std::atomic<uint64_t> held{0}, added{0}, read{0}, read_again{0}, texts_read{0};

  // The user's rows brought up to date: `read_new(have, from, fresh, mark)`
  // puts the rows created since `from` that `have` does not hold into
  // `fresh` (false: they cannot be added, read whole), `read_all(mark)`
  // reads them whole; both move the store's mark on (`after`).
  template <class Row, class ReadNew, class ReadAll>
  std::shared_ptr<const held_rows<Row>> refresh(lru_map<held_rows<Row>>& map,
                                                const std::string& user_id, int64_t epoch,
                                                int64_t now, ReadNew read_new, ReadAll read_all) {
    if (auto have = map.find(user_id); have && have->current(epoch, now)) {
      auto from = have->since();
      std::vector<Row> fresh;
      auto mark = have->mark;
      if (read_new(*have, from, fresh, mark)) {
        if (fresh.empty()) {
          ++held;
          return have;
        }
        auto next = std::make_shared<held_rows<Row>>();
        next->epoch = have->epoch;
        next->read_at = have->read_at;
        next->mark = mark;
        next->merge(*have, std::move(fresh));
        map.put(user_id, next);
        ++added;
        return next;
      }
    }
    auto next = std::make_shared<held_rows<Row>>();
    next->epoch = epoch;
    next->read_at = now;
    next->set(read_all(next->mark));
    map.put(user_id, next);
    ++read;
    return next;
  }
};

namespace {

// Every live index of the process, for process_stats().
std::mutex live_mu;
std::vector<const recall_index*> live;

}  // namespace

recall_index::recall_index(size_t budget_bytes) : impl_{std::make_unique<impl>(budget_bytes)} {
  if (budget_bytes == 0)
    return;  // holds nothing: not worth counting (the read-whole path)
  std::lock_guard guard{live_mu};
  live.push_back(this);
}

recall_index::~recall_index() {
  std::lock_guard guard{live_mu};
  std::erase(live, this);
}

recall_index::counters recall_index::process_stats() {
  counters sum;
  std::lock_guard guard{live_mu};
  for (auto* index : live) {
    auto c = index->stats();
    sum.held += c.held;
    sum.added += c.added;
    sum.read += c.read;
    sum.read_again += c.read_again;
    sum.texts_read += c.texts_read;
    sum.users += c.users;
    sum.bytes += c.bytes;
  }
  return sum;
}

std::vector<std::string> recall_index::memories(store_backend& db, const std::string& user_id,
                                                std::string_view question, int64_t now,
                                                size_t limit, std::optional<int64_t> epoch) {
  auto held = impl_->refresh(
      impl_->memories, user_id, epoch ? *epoch : db.recall_epoch(user_id), now,
      [&](const held_rows<memory_row>& have, int64_t since, std::vector<memory_row>& fresh,
          int64_t& mark) {
        auto held_ids = have.ids_from(since);
        for (auto& m : db.list_memories(user_id, now, since, &mark)) {
          if (held_ids.contains(m.id))
            ++impl_->read_again;
          else
            fresh.push_back(memory_row_of(std::move(m)));
        }
        return true;
      },
      [&](int64_t& mark) {
        std::vector<memory_row> out;
        for (auto& m : db.list_memories(user_id, now, store_backend::all_time, &mark))
          out.push_back(memory_row_of(std::move(m)));
        return out;
      });
  std::vector<std::string> out;
  for (auto i : rank_by_terms(question, held->keys.terms, limit))
    out.push_back(held->rows[i]->content);
  return out;
}

std::vector<std::string> recall_index::episodes(store_backend& db, const std::string& user_id,
                                                std::string_view question,
                                                const std::string& conversation_id,
                                                int64_t window_start_seq, int64_t now,
                                                size_t limit, double min_similarity,
                                                std::optional<int64_t> epoch) {
  auto held = impl_->refresh(
      impl_->episodes, user_id, epoch ? *epoch : db.recall_epoch(user_id), now,
      [&](const held_rows<episode_row>& have, int64_t since, std::vector<episode_row>& fresh,
          int64_t& mark) {
        // New episodes written by this process have their vectors
        // remembered; one written elsewhere makes the rows read whole.
        auto held_ids = have.ids_from(since);
        for (auto& k : db.recent_episode_keys(user_id, max_rows, since, &mark)) {
          if (held_ids.contains(k.id)) {
            ++impl_->read_again;
            continue;
          }
          auto v = remembered_episode_embedding(k.id);
          if (!v)
            return false;
          fresh.push_back({std::move(k.id), std::move(k.conversation_id), k.seq, k.created_at,
                           std::move(v)});
        }
        return true;
      },
      [&](int64_t& mark) { return read_episodes(db, user_id, mark); });
  const auto& rows = held->rows;
  const auto& keys = held->keys;
  const auto in_window = row_keys<episode_row>::hash(conversation_id);
  std::vector<uint32_t> slots(rows.size(), vector_columns::left_out);
  bool any = false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (!(keys.seq[i] >= window_start_seq && keys.conversation[i] == in_window
          && rows[i]->conversation_id == conversation_id)) {
      slots[i] = keys.slot[i];
      any = true;
    }
  if (!any)
    return {};  // nothing outside the window: the question need not be embedded
  std::vector<std::string> ids;
  for (auto i :
       rank_columns(episode_embedding(question), *held->columns, slots, limit, min_similarity))
    ids.push_back(rows[i]->id);
  if (ids.empty())
    return {};
  // The texts this process remembered when it stored them; the rest (the
  // cache full, another node's episodes) read by id.
  std::vector<std::string> texts(ids.size()), missing;
  std::vector<size_t> missing_at;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (auto text = remembered_episode_text(ids[i])) {
      texts[i] = *text;
    } else {
      missing.push_back(ids[i]);
      missing_at.push_back(i);
    }
  }
  // Remembered once read: a user whose texts fell out of the cache (or
  // were written by another node) recalls the same few episodes turn
  // after turn, and on PostgreSQL each read is a round trip.
  if (!missing.empty()) {
    auto read = db.episode_texts(missing);
    impl_->texts_read += missing.size();
    for (size_t k = 0; k < missing.size() && k < read.size(); ++k) {
      remember_episode_text(missing[k], read[k]);
      texts[missing_at[k]] = std::move(read[k]);
    }
  }
  return texts;
}

void recall_index::plan(turn_reads& reads, const std::string& user_id) {
  auto since = [&](auto& map) {
    auto have = map.find(user_id);
    return have && have->current(have->epoch, reads.now) ? have->since() : store_backend::all_time;
  };
  reads.memories_since = since(impl_->memories);
  reads.episodes_since = since(impl_->episodes);
  reads.episode_keys = static_cast<int32_t>(max_rows);
}

recall_index::counters recall_index::stats() const {
  counters c;
  c.held = impl_->held;
  c.added = impl_->added;
  c.read = impl_->read;
  c.read_again = impl_->read_again;
  c.texts_read = impl_->texts_read;
  auto [mu, mb] = impl_->memories.size();
  auto [eu, eb] = impl_->episodes.size();
  c.users = mu + eu;
  c.bytes = mb + eb;
  return c;
}

}  // namespace ragtor
