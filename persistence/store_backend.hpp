// The synchronous persistence interface every database backend implements
// (SQLite today, PostgreSQL next). Backends are used by exactly one thread
// at a time (the store's worker threads), never from a CAF scheduler
// thread. Failures throw store_error; the store executor turns them into
// caf::errors for the actors.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/document.hpp"
#include "protocol/messages.hpp"

namespace ragtor {

class store_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct turn_reads;

class store_backend {
public:
  // "No lower bound" for the since_ms arguments below.
  static constexpr int64_t all_time = INT64_MIN;

  virtual ~store_backend() = default;

  virtual std::string_view backend_name() const = 0;

  // -- transactions ---------------------------------------------------------------
  virtual void begin() = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;
  // Nested scopes inside a transaction, so one failing job of a group
  // commit does not undo the others.
  virtual void savepoint() = 0;
  virtual void release_savepoint() = 0;
  virtual void rollback_to_savepoint() = 0;
  // Whether in_savepoint() takes a savepoint (on unless turned off). The
  // store's writer turns it off while it runs a batch on the guess that no
  // job fails: a job that throws then rolls the whole batch back, and the
  // batch runs again with it on (store_executor::run_batch).
  bool isolating() const { return isolating_; }
  void set_isolating(bool on) { isolating_ = on; }

  // Runs a script of statements (migrations).
  virtual void execute_script(std::string_view sql) = 0;
  // Versions recorded in schema_migrations (creating the table if needed).
  virtual std::vector<int> applied_migrations() = 0;
  // Held while migrations run, so nodes starting together against one
  // database migrate one after another (PostgreSQL: an advisory lock;
  // SQLite: nothing, one process owns the file).
  virtual void lock_schema() {}
  virtual void unlock_schema() {}
  // Several reads on this connection as one snapshot (SQLite: one read
  // transaction and its shared-memory locks instead of one per statement;
  // PostgreSQL: nothing, each statement stays its own round trip).
  // end_read() never throws.
  virtual void begin_read() {}
  virtual void end_read() noexcept {}
  // A turn's context reads sent at once, before the first is asked
  // (read_turn_context), where the backend gains by it: PostgreSQL sends
  // them in one pipeline, one round trip instead of one per read, and the
  // calls that ask the same until end_read() take their results. Nothing
  // by default (SQLite reads in the process). Never throws: a read that
  // could not be sent ahead is made when it is asked.
  virtual void read_ahead(const turn_reads& reads) { (void)reads; }
  // Called by the store executor's thread after each job it ran on this
  // connection (never throws): a backend may publish what it measures
  // there (SQLite: its connection's memory, for /metrics).
  virtual void after_job() noexcept {}
  virtual void record_migration(int version, std::string_view name, int64_t now_ms) = 0;

  // -- conversations ---------------------------------------------------------------

  // Ensures the conversation (user_id, session_id) exists and appends the
  // user message at the next seq. A request_id already stored for this
  // conversation writes nothing and reports the stored turn instead.
  virtual turn_opened begin_turn(const std::string& user_id, const std::string& session_id,
                                 const std::string& content, const std::string& request_id,
                                 int64_t now_ms) = 0;

  // Appends an assistant message at the next seq; returns its id.
  virtual std::string finish_turn(const stored_message& msg, int64_t now_ms) = 0;

  // The assistant message stored for `request_id` in one of `user_id`'s
  // conversations; false when there is none.
  virtual bool find_turn(const std::string& request_id, const std::string& user_id,
                         stored_message& out) = 0;

  // The last `limit` messages of a conversation, oldest first.
  virtual std::vector<stored_message> history(const std::string& conversation_id,
                                              int32_t limit) = 0;

  // -- conversation management (DESIGN §5) ------------------------------------------------

  // The user's conversations, most recently updated first (ties: id
  // descending), at most `limit`. `cursor` is "" for the first page, else
  // the next_cursor of the previous page (an opaque "updated_at:id" string;
  // a malformed cursor throws store_error).
  virtual conversation_page list_conversations(const std::string& user_id, int32_t limit,
                                               const std::string& cursor) = 0;

  // The conversation's owner (user_id), or "" when it does not exist.
  virtual std::string conversation_owner(const std::string& conversation_id) = 0;

  // The newest `limit` messages with seq < before_seq (before_seq <= 0: no
  // bound), returned oldest first.
  virtual std::vector<stored_message> messages_page(const std::string& conversation_id,
                                                    int32_t limit, int64_t before_seq) = 0;

  // Deletes the conversation with everything that belongs to it (messages,
  // summary, episodes, feedback on its messages); false if it did not exist.
  virtual bool delete_conversation(const std::string& conversation_id) = 0;

  // Deletes the messages, summary and episodes of (user_id, session_id) but
  // keeps the conversation; returns how many messages were deleted (0 when
  // the conversation does not exist).
  virtual int64_t clear_conversation(const std::string& user_id, const std::string& session_id) = 0;

  // Toggles a vote: no vote -> the vote; the same vote again -> removed;
  // the opposite vote -> replaced. Returns "positive", "negative" or "none",
  // or "" (writing nothing) when no message has id vote.message_id.
  virtual std::string toggle_feedback(const feedback_vote& vote, int64_t now_ms) = 0;

  // A user's core memory profile (a JSON object as text); "{}" when none.
  virtual std::string core_memory(const std::string& user_id) = 0;
  // Long-term memories: insert (or refresh the lifetime of the same user +
  // content), list unexpired newest first, delete one ("" = all).
  virtual bool add_memory(const memory_record& m) = 0;
  // Episodes (completed turns) for episodic recall, newest first.
  virtual void add_episode(const episode_record& e) = 0;
  // With `texts` false, an episode's text is read only when it has no
  // stored embedding (recall ranks by the embeddings, then reads the texts
  // of the few it keeps with episode_text). Served by the index on
  // (user_id, created_at DESC, id): bounded whatever the user's history.
  virtual std::vector<episode_record> recent_episodes(const std::string& user_id, int32_t limit,
                                                      bool texts = true) = 0;
  // The same episodes' id, conversation, seq and created_at only — the
  // columns of the index, so no long value is read: recall takes the
  // vectors it remembers by id (memory/long_term.hpp) from these. With
  // `since_ms`, only those created at or after it (what is new since a
  // user's recall index was read: persistence/recall_index.hpp).
  //
  // `after` (here and in list_memories): a mark of the rows a caller holds
  // already. A backend whose row ids follow commit order — SQLite's rowid:
  // one writer at a time, and a new row's rowid is above every row present
  // — leaves out the rows at or below *after and raises *after to the
  // newest row it returns. A backend without such an order (PostgreSQL,
  // whose writers commit in any order) leaves *after as it is: 0 tells
  // the caller to recognise the rows it holds by their ids.
  virtual std::vector<episode_record> recent_episode_keys(const std::string& user_id,
                                                          int32_t limit,
                                                          int64_t since_ms = all_time,
                                                          int64_t* after = nullptr) = 0;
  // The texts of these episodes, in the order of `ids` ("" for one that
  // is not there): recall reads the few it keeps at once (one round trip
  // on PostgreSQL).
  virtual std::vector<std::string> episode_texts(const std::vector<std::string>& ids) = 0;
  // The newest 200 unexpired memories (with `since_ms`, only those created
  // at or after it; `after`: as for recent_episode_keys).
  virtual std::vector<memory_record> list_memories(const std::string& user_id, int64_t now_ms,
                                                   int64_t since_ms = all_time,
                                                   int64_t* after = nullptr) = 0;
  virtual int64_t delete_memories(const std::string& user_id, const std::string& id) = 0;
  // The user's recall epoch (0 when never bumped): every write that removes
  // or changes a memory or an episode of the user rather than adding a
  // newer one (deleting or clearing a conversation, deleting memories,
  // refreshing a memory's lifetime) raises it in its own transaction.
  virtual int64_t recall_epoch(const std::string& user_id) = 0;

  // The conversation's summary with its message counts (version 0 and an
  // empty summary when there is none).
  virtual summary_record load_summary(const std::string& conversation_id) = 0;
  // Writes `s` as version expected_version + 1, but only if the stored
  // version is still `expected_version` (0 = none stored) and the message
  // at s.covered_seq still exists (a clear meanwhile voids the summary);
  // false writes nothing.
  virtual bool save_summary(const summary_record& s, int64_t expected_version, int64_t now_ms) = 0;

  // Writes the knowledge base's graph `g` to the entities and relations
  // tables, unless the stored signature is already g.signature: all its
  // rows replaced (g.base_signature empty), or g's change applied to the
  // stored graph when that is g.base_signature's (stale_base otherwise,
  // writing nothing).
  enum class graph_write { unchanged, written, stale_base };
  virtual graph_write write_graph(const kb_graph_rows& g, int64_t now_ms) = 0;
  // What write_graph does with `g` when the stored graph's signature is
  // `stored` ("" when none): nothing (unchanged, stale_base), or write.
  static graph_write graph_write_for(const kb_graph_rows& g, const std::string& stored) {
    if (stored == g.signature)
      return graph_write::unchanged;
    if (!g.base_signature.empty() && stored != g.base_signature)
      return graph_write::stale_base;
    return graph_write::written;
  }
  // The graph's rows in all once `g` is written: its own when it holds
  // every row, the totals it names when it is a change.
  static std::pair<int64_t, int64_t> graph_totals(const kb_graph_rows& g) {
    if (g.base_signature.empty())
      return {static_cast<int64_t>(g.entities.size()), static_cast<int64_t>(g.relations.size())};
    return {g.entity_count, g.relation_count};
  }
  // How many entity and relation rows the knowledge base has stored.
  virtual std::pair<int64_t, int64_t> graph_size(const std::string& kb) = 0;

  // A guided workflow's state of the conversation (JSON; "" when none).
  virtual std::string load_flow_state(const std::string& conversation_id) = 0;
  // Replaces it ("" deletes it); false when the conversation does not exist.
  virtual bool save_flow_state(const std::string& conversation_id, const std::string& state_json,
                               int64_t now_ms) = 0;

  // -- API keys (docs/security.md) ---------------------------------------------------

  // Inserts `k` (created_at_ms as given); false, writing nothing, when an
  // API key with that name exists (revoked ones included).
  virtual bool create_api_key(const api_key_record& k) = 0;
  // Every API key, revoked ones included, ordered by name.
  virtual std::vector<api_key_record> list_api_keys() = 0;
  // Sets revoked_at of the active key `name`; false when there is none.
  virtual bool revoke_api_key(const std::string& name, int64_t now_ms) = 0;

  // -- KB content shared through the store (docs/cluster.md) ---------------------------

  // Stores `settings_json` as the KB's settings and `docs` (replacing by
  // id) under the KB's next version; returns that version.
  virtual int64_t put_kb_documents(const std::string& kb, const std::string& settings_json,
                                   const std::vector<document>& docs, int64_t now_ms) = 0;
  // Every KB's version and settings, by name.
  virtual std::vector<kb_version> list_kb_versions() = 0;
  // The documents of `kb` stored after version `after`, oldest first.
  virtual std::vector<document> kb_documents_after(const std::string& kb, int64_t after) = 0;

  // -- cluster membership (docs/cluster.md) ---------------------------------------------

  // Inserts or replaces the row of node m.name.
  virtual void write_member(const member_info& m) = 0;
  // Every row, ordered by name.
  virtual std::vector<member_info> list_members() = 0;

  // Replaces it.
  virtual void set_core_memory(const std::string& user_id, const std::string& profile_json,
                               int64_t now_ms) = 0;

private:
  bool isolating_ = true;
};

// What a turn's context read will ask (store_backend::read_ahead): the
// window, and unless `incognito` the summary, the core memory, the recall
// epoch, and recall's rows created from `memories_since` / `episodes_since`
// (list_memories at `now`, recent_episode_keys of `episode_keys`; all_time:
// whole; recall_index::plan fills them in).
struct turn_reads {
  std::string_view conversation_id, user_id;
  int32_t window_limit = 0;
  bool incognito = false;
  int64_t now = 0;
  int64_t memories_since = store_backend::all_time, episodes_since = store_backend::all_time;
  int32_t episode_keys = 0;  // 0: recall asks for none
};

// A new row's id: 32 hex characters, the time in milliseconds (12) then
// 80 random bits (20). Ids made later sort later, so a row's insert lands
// at the right end of its table's id index, as rows are made, instead of
// on a random leaf: a commit writes a few index pages, not one per row.
// With 300,000 rows, 33 inserts per commit (one group commit at 64
// streams), the WAL took 196 KiB per commit against 352 KiB with 128
// random bits (docs/performance.md).
std::string new_id();

// Episodic recall through the store (memory/long_term.hpp): the user's 200
// most recent episodes ranked by their stored embeddings, then the texts of
// the best `limit`. Same result as recall_episodes() over
// recent_episodes(user_id, 200), reading only a few texts.
std::vector<std::string> recall_episodes_from(store_backend& db, const std::string& user_id,
                                              std::string_view question,
                                              const std::string& conversation_id,
                                              int64_t window_start_seq, size_t limit = 3,
                                              double min_similarity = 0.25);

class recall_index;

// A turn's context in one job on one connection (turn_context): the
// newest `window_limit` messages of the conversation and, unless
// `incognito`, its summary, the user's core memory, the 5 memories most
// related to `question` and the episodes recalled for it. Each part is read on its
// own: one that fails is left empty and named in `failed`. With `index`,
// memories and episodes come from the user's rows it holds, brought up to
// date (persistence/recall_index.hpp); without, they are read whole.
turn_context read_turn_context(store_backend& db, const std::string& conversation_id,
                               const std::string& user_id, const std::string& question,
                               int32_t window_limit, int64_t window_start_seq, bool incognito,
                               int64_t now, recall_index* index = nullptr);

// Milliseconds since the epoch.
int64_t now_ms();

// Runs `work` under a savepoint of `db`'s open transaction: its writes stay
// when it returns and are taken back when it throws. Answers the exception's
// message ("" when none); a failing rollback (a broken connection) throws
// on to the caller. The write batch runs each job this way, and a job may
// nest it for writes that must not fail the job. While `db` is not
// isolating (a batch run on the guess that nothing fails), `work` runs
// as it is and what it throws goes on to the caller, which rolls back.
template <class F>
std::string in_savepoint(store_backend& db, F&& work) {
  if (!db.isolating()) {
    work();
    return {};
  }
  db.savepoint();
  try {
    work();
    db.release_savepoint();
    return {};
  } catch (const std::exception& e) {
    std::string what = e.what();
    db.rollback_to_savepoint();
    return what;
  }
}

}  // namespace ragtor
