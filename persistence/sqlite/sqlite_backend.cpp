#include "persistence/sqlite/sqlite_backend.hpp"

#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>

#include <sqlite3.h>

namespace ragtor {

// A cached prepared statement, owned by the connection.
class sqlite_backend::statement {
public:
  statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw store_error(std::string{"sqlite prepare failed: "} + sqlite3_errmsg(db));
  }
  ~statement() { sqlite3_finalize(stmt_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  sqlite3* db() const { return db_; }
  sqlite3_stmt* get() const { return stmt_; }

private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// One use of a cached statement: binds, steps, reads columns, and resets the
// statement when the use ends. The reset matters: a statement left on a row
// keeps its implicit read transaction open, which pins the connection to an
// old snapshot (a reader would miss every later commit) and stops WAL
// checkpoints from ever reclaiming the log.
class sqlite_backend::statement_use {
public:
  explicit statement_use(statement& s) : db_(s.db()), stmt_(s.get()) {}
  ~statement_use() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  statement_use(const statement_use&) = delete;
  statement_use& operator=(const statement_use&) = delete;

  statement_use& bind(std::string_view s) {
    sqlite3_bind_text(stmt_, next_++, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  statement_use& bind_null_if_empty(std::string_view s) {
    if (s.empty())
      sqlite3_bind_null(stmt_, next_++);
    else
      bind(s);
    return *this;
  }
  statement_use& bind(double v) {
    sqlite3_bind_double(stmt_, next_++, v);
    return *this;
  }
  statement_use& bind(int64_t v) {
    sqlite3_bind_int64(stmt_, next_++, v);
    return *this;
  }
  // True while a row is available.
  bool step() {
    auto rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW)
      return true;
    if (rc == SQLITE_DONE)
      return false;
    throw store_error(std::string{"sqlite: "} + sqlite3_errmsg(db_));
  }
  std::string text(int col) {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string{p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))}
             : std::string{};
  }
  // Valid until the next step.
  std::string_view view(int col) {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string_view{p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))}
             : std::string_view{};
  }
  int64_t integer(int col) { return sqlite3_column_int64(stmt_, col); }
  double real(int col) { return sqlite3_column_double(stmt_, col); }

private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int next_ = 1;
};

namespace {

// SQLite counts its heap process-wide by default (sqlite3_memory_used),
// under one mutex that every allocation and free of every connection
// takes: the store's writer and readers queued on it, four to five futex
// calls per turn at 64 streams. Off before SQLite initialises (the first
// connection opened); each connection publishes its own memory instead.
// If something initialised SQLite first, the setting is refused and
// SQLite keeps counting: slower, not wrong.
void count_memory_per_connection() {
  static const bool once = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)once;
}

// What the open connections last published (memory_used()).
std::atomic<int64_t> published_total{0};

}  // namespace

sqlite_backend::sqlite_backend(const std::filesystem::path& path) {
  count_memory_per_connection();
  std::error_code ec;
  if (path.has_parent_path())
    std::filesystem::create_directories(path.parent_path(), ec);
  auto flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw store_error("cannot open SQLite database " + path.string() + ": " + msg);
  }
  sqlite3_busy_timeout(db_, 5000);
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec("PRAGMA foreign_keys=ON");
  // A write job runs in a savepoint inside its batch's transaction, so the
  // pages it changes are kept for its rollback (SQLite's statement
  // journal). Past 64 KiB (16 pages) that journal became a file created
  // and unlinked in /var/tmp, several times a second under load: two
  // metadata operations that ext4's journal, and so the next fdatasync,
  // had to commit too. It stays in memory, as do temporary b-trees
  // (docs/performance.md, "Statement journals in memory").
  exec("PRAGMA temp_store=MEMORY");
  publish_memory();
}

int64_t sqlite_backend::memory_used() {
  return published_total.load(std::memory_order_relaxed);
}

void sqlite_backend::publish_memory() noexcept {
  auto status = [&](int op) -> int64_t {
    int current = 0;
    int highest = 0;
    return sqlite3_db_status(db_, op, &current, &highest, 0) == SQLITE_OK ? current : 0;
  };
  // The page cache after every job (one look at the pager); the schema
  // and the prepared statements, which walk every statement, only when
  // the connection prepared a new one.
  if (statements_.size() != measured_statements_) {
    measured_statements_ = statements_.size();
    fixed_bytes_ = status(SQLITE_DBSTATUS_SCHEMA_USED) + status(SQLITE_DBSTATUS_STMT_USED);
  }
  auto bytes = status(SQLITE_DBSTATUS_CACHE_USED) + fixed_bytes_;
  if (bytes != published_bytes_)
    published_total.fetch_add(bytes - published_bytes_, std::memory_order_relaxed);
  published_bytes_ = bytes;
}

void sqlite_backend::after_job() noexcept {
  publish_memory();
}

sqlite_backend::~sqlite_backend() {
  published_total.fetch_sub(published_bytes_, std::memory_order_relaxed);
  statements_.clear();
  if (db_)
    sqlite3_close(db_);
}

void sqlite_backend::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw store_error("sqlite: " + msg);
  }
}

sqlite_backend::statement_use sqlite_backend::prepare(const char* sql) {
  // Keyed by the literal's address: every call site passes a literal.
  auto& slot = statements_[sql];
  if (!slot)
    slot = std::make_unique<statement>(db_, sql);
  return statement_use{*slot};
}

// The writer's control statements run several times per turn: prepared
// once, like every other statement, instead of parsed by sqlite3_exec on
// each use (docs/performance.md, "SQLite's allocation mutex"). The rare
// ones (ROLLBACK) still go through exec.
void sqlite_backend::begin() {
  prepare("BEGIN IMMEDIATE").step();
}
void sqlite_backend::commit() {
  prepare("COMMIT").step();
}
void sqlite_backend::rollback() {
  if (!sqlite3_get_autocommit(db_))
    exec("ROLLBACK");
}
void sqlite_backend::begin_read() {
  // Inside a transaction already (a write job reading): that one is the
  // snapshot.
  if (read_open_ || !sqlite3_get_autocommit(db_))
    return;
  prepare("BEGIN").step();  // deferred: the first read takes the snapshot
  read_open_ = true;
}
void sqlite_backend::end_read() noexcept {
  if (!read_open_)
    return;
  read_open_ = false;
  try {
    if (!sqlite3_get_autocommit(db_))
      prepare("COMMIT").step();
  } catch (...) {
    // A read-only transaction has nothing to lose; the next BEGIN reports
    // a connection that is really broken.
  }
}
void sqlite_backend::savepoint() {
  prepare("SAVEPOINT job").step();
}
void sqlite_backend::release_savepoint() {
  prepare("RELEASE SAVEPOINT job").step();
}
void sqlite_backend::rollback_to_savepoint() {
  exec("ROLLBACK TO SAVEPOINT job");
  exec("RELEASE SAVEPOINT job");
}

void sqlite_backend::execute_script(std::string_view sql) {
  exec(std::string{sql}.c_str());
}

std::vector<int> sqlite_backend::applied_migrations() {
  exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
      "name TEXT NOT NULL, applied_at BIGINT NOT NULL)");
  std::vector<int> out;
  auto st = prepare("SELECT version FROM schema_migrations ORDER BY version");
  while (st.step())
    out.push_back(static_cast<int>(st.integer(0)));
  return out;
}

void sqlite_backend::record_migration(int version, std::string_view name, int64_t now) {
  auto st = prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)");
  st.bind(int64_t{version}).bind(name).bind(now).step();
}

int64_t sqlite_backend::next_seq(const std::string& conversation_id) {
  auto st = prepare("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = ?");
  st.bind(conversation_id).step();
  return st.integer(0);
}

std::string sqlite_backend::insert_message(const std::string& conversation_id, int64_t seq,
                                           std::string_view role, const std::string& content,
                                           const std::string& citations, bool completed,
                                           const std::string& request_id, int64_t now,
                                           bool touch_conversation) {
  auto id = new_id();
  auto st = prepare(
      "INSERT INTO messages (id, conversation_id, seq, role, content, citations, "
      "completed, request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(id)
      .bind(conversation_id)
      .bind(seq)
      .bind(role)
      .bind(content)
      .bind(citations.empty() ? std::string_view{"[]"} : std::string_view{citations})
      .bind(int64_t{completed ? 1 : 0})
      .bind_null_if_empty(request_id)
      .bind(now)
      .step();
  if (touch_conversation) {
    auto up = prepare("UPDATE conversations SET updated_at = ? WHERE id = ?");
    up.bind(now).bind(conversation_id).step();
  }
  return id;
}

bool sqlite_backend::find_turn(const std::string& request_id, const std::string& user_id,
                               stored_message& out) {
  std::string conversation_id;
  {
    auto st = prepare(
        "SELECT m.conversation_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.request_id = ? AND m.role = 'assistant' AND c.user_id = ? "
        "ORDER BY m.created_at DESC LIMIT 1");
    st.bind(request_id).bind(user_id);
    if (!st.step())
      return false;
    conversation_id = st.text(0);
  }
  return find_message(conversation_id, request_id, "assistant", out);
}

bool sqlite_backend::find_message(const std::string& conversation_id, const std::string& request_id,
                                  std::string_view role, stored_message& out) {
  auto st = prepare(
      "SELECT id, seq, content, citations, completed, created_at FROM messages "
      "WHERE conversation_id = ? AND request_id = ? AND role = ?");
  st.bind(conversation_id).bind(request_id).bind(role);
  if (!st.step())
    return false;
  out.message_id = st.text(0);
  out.conversation_id = conversation_id;
  out.seq = st.integer(1);
  out.role = std::string{role};
  out.content = st.text(2);
  out.citations_json = st.text(3);
  out.completed = st.integer(4) != 0;
  out.request_id = request_id;
  out.created_at_ms = st.integer(5);
  return true;
}

turn_opened sqlite_backend::begin_turn(const std::string& user_id, const std::string& session_id,
                                       const std::string& content, const std::string& request_id,
                                       int64_t now) {
  turn_opened out;
  bool created = false;
  {
    auto st = prepare("SELECT id FROM conversations WHERE user_id = ? AND session_id = ?");
    st.bind(user_id).bind(session_id);
    if (st.step())
      out.conversation_id = st.text(0);
  }
  if (out.conversation_id.empty()) {
    out.conversation_id = new_id();
    auto st = prepare(
        "INSERT INTO conversations (id, user_id, session_id, title, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?)");
    // The title is the start of the first message, cut on a UTF-8 boundary.
    size_t n = std::min<size_t>(content.size(), 80);
    while (n > 0 && n < content.size() && (static_cast<unsigned char>(content[n]) & 0xC0) == 0x80)
      --n;
    st.bind(out.conversation_id)
        .bind(user_id)
        .bind(session_id)
        .bind(std::string_view{content}.substr(0, n))
        .bind(now)
        .bind(now)
        .step();
    created = true;
  } else if (!request_id.empty()) {
    stored_message user;
    if (find_message(out.conversation_id, request_id, "user", user)) {
      out.existing = true;
      out.message_id = user.message_id;
      out.seq = user.seq;
      out.has_answer = find_message(out.conversation_id, request_id, "assistant", out.answer);
      return out;
    }
  }
  // A conversation created just now has no message yet, and its
  // updated_at is already now: its first message needs neither the
  // sequence query nor the update (two of a first turn's four statements).
  out.seq = created ? 1 : next_seq(out.conversation_id);
  out.message_id = insert_message(out.conversation_id, out.seq, "user", content, "[]", true,
                                  request_id, now, !created);
  return out;
}

std::string sqlite_backend::finish_turn(const stored_message& msg, int64_t now) {
  return insert_message(msg.conversation_id, next_seq(msg.conversation_id), "assistant",
                        msg.content, msg.citations_json, msg.completed, msg.request_id, now);
}

std::vector<stored_message> sqlite_backend::read_messages(statement_use& st,
                                                          const std::string& conversation_id) {
  std::vector<stored_message> out;
  while (st.step()) {
    stored_message m;
    m.message_id = st.text(0);
    m.conversation_id = conversation_id;
    m.seq = st.integer(1);
    m.role = st.text(2);
    m.content = st.text(3);
    m.citations_json = st.text(4);
    m.completed = st.integer(5) != 0;
    m.request_id = st.text(6);
    m.created_at_ms = st.integer(7);
    out.push_back(std::move(m));
  }
  std::reverse(out.begin(), out.end());  // queries read newest first
  return out;
}

std::vector<stored_message> sqlite_backend::history(const std::string& conversation_id,
                                                    int32_t limit) {
  return messages_page(conversation_id, limit, 0);
}

std::vector<stored_message> sqlite_backend::messages_page(const std::string& conversation_id,
                                                          int32_t limit, int64_t before_seq) {
  auto st = prepare(
      "SELECT id, seq, role, content, citations, completed, request_id, "
      "created_at FROM messages WHERE conversation_id = ? AND seq < ? "
      "ORDER BY seq DESC LIMIT ?");
  st.bind(conversation_id)
      .bind(before_seq > 0 ? before_seq : std::numeric_limits<int64_t>::max())
      .bind(int64_t{limit});
  return read_messages(st, conversation_id);
}

conversation_page sqlite_backend::list_conversations(const std::string& user_id, int32_t limit,
                                                     const std::string& cursor) {
  int64_t after_time = std::numeric_limits<int64_t>::max();
  std::string after_id;
  if (!cursor.empty()) {
    auto colon = cursor.find(':');
    char* end = nullptr;
    if (colon != std::string::npos)
      after_time = std::strtoll(cursor.c_str(), &end, 10);
    if (colon == std::string::npos || end != cursor.c_str() + colon)
      throw store_error("malformed cursor");
    after_id = cursor.substr(colon + 1);
  }
  auto st = prepare(
      "SELECT c.id, c.session_id, c.title, c.created_at, c.updated_at, "
      "(SELECT content FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user' "
      " ORDER BY m.seq LIMIT 1), "
      "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
      "FROM conversations c WHERE c.user_id = ? "
      "AND (c.updated_at < ? OR (c.updated_at = ? AND c.id < ?)) "
      "ORDER BY c.updated_at DESC, c.id DESC LIMIT ?");
  // Without a cursor every id compares below the sentinel "~".
  st.bind(user_id)
      .bind(after_time)
      .bind(after_time)
      .bind(cursor.empty() ? "~" : after_id)
      .bind(int64_t{limit} + 1);
  conversation_page page;
  while (st.step()) {
    conversation_info c;
    c.conversation_id = st.text(0);
    c.user_id = user_id;
    c.session_id = st.text(1);
    c.title = st.text(2);
    c.created_at_ms = st.integer(3);
    c.updated_at_ms = st.integer(4);
    c.first_message = st.text(5);
    c.message_count = st.integer(6);
    page.conversations.push_back(std::move(c));
  }
  if (page.conversations.size() > static_cast<size_t>(limit)) {
    page.conversations.pop_back();
    auto& last = page.conversations.back();
    page.next_cursor = std::to_string(last.updated_at_ms) + ":" + last.conversation_id;
  }
  return page;
}

std::string sqlite_backend::conversation_owner(const std::string& conversation_id) {
  auto st = prepare("SELECT user_id FROM conversations WHERE id = ?");
  st.bind(conversation_id);
  return st.step() ? st.text(0) : std::string{};
}

bool sqlite_backend::delete_conversation(const std::string& conversation_id) {
  auto fb = prepare(
      "DELETE FROM feedback WHERE message_id IN "
      "(SELECT id FROM messages WHERE conversation_id = ?)");
  fb.bind(conversation_id).step();
  bump_recall_epoch_of(conversation_id);
  // messages, summary and episodes go with it (ON DELETE CASCADE).
  auto st = prepare("DELETE FROM conversations WHERE id = ?");
  st.bind(conversation_id).step();
  return sqlite3_changes(db_) > 0;
}

int64_t sqlite_backend::clear_conversation(const std::string& user_id,
                                           const std::string& session_id) {
  std::string id;
  {
    auto st = prepare("SELECT id FROM conversations WHERE user_id = ? AND session_id = ?");
    st.bind(user_id).bind(session_id);
    if (!st.step())
      return 0;
    id = st.text(0);
  }
  prepare("DELETE FROM conversation_summaries WHERE conversation_id = ?").bind(id).step();
  prepare("DELETE FROM conversation_flow_state WHERE conversation_id = ?").bind(id).step();
  prepare("DELETE FROM episodes WHERE conversation_id = ?").bind(id).step();
  bump_recall_epoch(user_id);
  prepare(
      "DELETE FROM feedback WHERE message_id IN "
      "(SELECT id FROM messages WHERE conversation_id = ?)")
      .bind(id)
      .step();
  prepare("DELETE FROM messages WHERE conversation_id = ?").bind(id).step();
  return sqlite3_changes(db_);
}

std::string sqlite_backend::toggle_feedback(const feedback_vote& vote, int64_t now) {
  {
    auto st = prepare("SELECT 1 FROM messages WHERE id = ?");
    st.bind(vote.message_id);
    if (!st.step())
      return {};
  }
  int64_t current = -1;  // -1: no vote
  {
    auto st = prepare("SELECT is_positive FROM feedback WHERE thread_id = ? AND message_id = ?");
    st.bind(vote.thread_id).bind(vote.message_id);
    if (st.step())
      current = st.integer(0);
  }
  int64_t wanted = vote.is_positive ? 1 : 0;
  if (current == wanted) {
    prepare("DELETE FROM feedback WHERE thread_id = ? AND message_id = ?")
        .bind(vote.thread_id)
        .bind(vote.message_id)
        .step();
    return "none";
  }
  if (current >= 0) {
    prepare(
        "UPDATE feedback SET is_positive = ?, query = ?, agent_type = ?, metadata = ?, "
        "created_at = ? WHERE thread_id = ? AND message_id = ?")
        .bind(wanted)
        .bind(vote.query)
        .bind_null_if_empty(vote.agent_type)
        .bind_null_if_empty(vote.metadata_json)
        .bind(now)
        .bind(vote.thread_id)
        .bind(vote.message_id)
        .step();
  } else {
    prepare(
        "INSERT INTO feedback (id, thread_id, message_id, query, is_positive, agent_type, "
        "metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(new_id())
        .bind(vote.thread_id)
        .bind(vote.message_id)
        .bind(vote.query)
        .bind(wanted)
        .bind_null_if_empty(vote.agent_type)
        .bind_null_if_empty(vote.metadata_json)
        .bind(now)
        .step();
  }
  return vote.is_positive ? "positive" : "negative";
}

std::string sqlite_backend::core_memory(const std::string& user_id) {
  auto st = prepare("SELECT profile FROM core_memory WHERE user_id = ?");
  st.bind(user_id);
  return st.step() ? st.text(0) : std::string{"{}"};
}

void sqlite_backend::set_core_memory(const std::string& user_id, const std::string& profile_json,
                                     int64_t now) {
  prepare(
      "INSERT INTO core_memory (user_id, profile, updated_at) VALUES (?, ?, ?) "
      "ON CONFLICT (user_id) DO UPDATE SET profile = excluded.profile, "
      "updated_at = excluded.updated_at")
      .bind(user_id)
      .bind(profile_json)
      .bind(now)
      .step();
}

bool sqlite_backend::add_memory(const memory_record& m) {
  {
    auto st = prepare("UPDATE memories SET expires_at = ? WHERE user_id = ? AND content = ?");
    st.bind(m.expires_at).bind(m.user_id).bind(m.content).step();
  }
  if (sqlite3_changes(db_) > 0) {
    bump_recall_epoch(m.user_id);  // a refreshed lifetime: not a newer row
    return false;
  }
  prepare(
      "INSERT INTO memories (id, user_id, kind, content, source_message_id, expires_at, "
      "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .bind(m.id.empty() ? new_id() : m.id)
      .bind(m.user_id)
      .bind(m.kind)
      .bind(m.content)
      .bind_null_if_empty(m.source_message_id)
      .bind(m.expires_at)
      .bind(m.created_at)
      .step();
  return true;
}

// `after` (store_backend.hpp): rowids follow commit order here. The
// rowid is in every index entry, so rows at or below the mark are passed
// over in the index without reading them.
std::vector<memory_record> sqlite_backend::list_memories(const std::string& user_id, int64_t now,
                                                         int64_t since, int64_t* after) {
  auto st = prepare(
      "SELECT id, kind, content, COALESCE(source_message_id, ''), created_at, "
      "COALESCE(expires_at, 0), rowid FROM memories WHERE user_id = ? AND created_at >= ? AND "
      "rowid > ? AND (expires_at IS NULL OR expires_at = 0 OR expires_at > ?) "
      "ORDER BY created_at DESC, id LIMIT 200");
  st.bind(user_id).bind(since).bind(after ? *after : int64_t{0}).bind(now);
  std::vector<memory_record> out;
  while (st.step()) {
    if (after)
      *after = std::max(*after, st.integer(6));
    memory_record m;
    m.id = st.text(0);
    m.user_id = user_id;
    m.kind = st.text(1);
    m.content = st.text(2);
    m.source_message_id = st.text(3);
    m.created_at = st.integer(4);
    m.expires_at = st.integer(5);
    out.push_back(std::move(m));
  }
  return out;
}

int64_t sqlite_backend::delete_memories(const std::string& user_id, const std::string& id) {
  if (id.empty())
    prepare("DELETE FROM memories WHERE user_id = ?").bind(user_id).step();
  else
    prepare("DELETE FROM memories WHERE user_id = ? AND id = ?").bind(user_id).bind(id).step();
  auto n = sqlite3_changes(db_);
  if (n > 0)
    bump_recall_epoch(user_id);
  return n;
}

int64_t sqlite_backend::recall_epoch(const std::string& user_id) {
  auto st = prepare("SELECT epoch FROM recall_epochs WHERE user_id = ?");
  st.bind(user_id);
  return st.step() ? st.integer(0) : 0;
}

void sqlite_backend::bump_recall_epoch(const std::string& user_id) {
  prepare(
      "INSERT INTO recall_epochs (user_id, epoch) VALUES (?, 1) "
      "ON CONFLICT (user_id) DO UPDATE SET epoch = recall_epochs.epoch + 1")
      .bind(user_id)
      .step();
}

void sqlite_backend::bump_recall_epoch_of(const std::string& conversation_id) {
  prepare(
      "INSERT INTO recall_epochs (user_id, epoch) SELECT user_id, 1 FROM conversations "
      "WHERE id = ? ON CONFLICT (user_id) DO UPDATE SET epoch = recall_epochs.epoch + 1")
      .bind(conversation_id)
      .step();
}

void sqlite_backend::add_episode(const episode_record& e) {
  auto id = e.id.empty() ? new_id() : e.id;
  prepare(
      "INSERT INTO episodes (id, conversation_id, user_id, seq, text, embedding, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)")
      .bind(id)
      .bind(e.conversation_id)
      .bind(e.user_id)
      .bind(e.seq)
      .bind(e.text)
      .bind(encode_embedding(e.embedding))
      .bind(e.created_at)
      .step();
  remember_episode_embedding(id, e.embedding);
  remember_episode_text(id, e.text);
}

namespace {

// The columns `id, conversation_id, seq` every episode query starts with.
template <class Row>
episode_record episode_key(Row& st, const std::string& user_id) {
  episode_record e;
  e.id = st.text(0);
  e.conversation_id = st.text(1);
  e.user_id = user_id;
  e.seq = st.integer(2);
  return e;
}

}  // namespace

std::vector<episode_record> sqlite_backend::recent_episodes(const std::string& user_id,
                                                            int32_t limit, bool texts) {
  auto st = prepare(
      texts ? "SELECT id, conversation_id, seq, text, created_at, COALESCE(embedding, '') "
              "FROM episodes WHERE user_id = ? ORDER BY created_at DESC, id LIMIT ?"
            : "SELECT id, conversation_id, seq, CASE WHEN COALESCE(embedding, '') = '' THEN "
              "text ELSE '' END, created_at, COALESCE(embedding, '') "
              "FROM episodes WHERE user_id = ? ORDER BY created_at DESC, id LIMIT ?");
  st.bind(user_id).bind(int64_t{limit});
  std::vector<episode_record> out;
  while (st.step()) {
    auto e = episode_key(st, user_id);
    e.text = st.text(3);
    e.created_at = st.integer(4);
    e.embedding = stored_episode_embedding(e.id, st.view(5));
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<episode_record> sqlite_backend::recent_episode_keys(const std::string& user_id,
                                                                int32_t limit, int64_t since,
                                                                int64_t* after) {
  auto st = prepare(
      "SELECT id, conversation_id, seq, created_at, rowid FROM episodes WHERE user_id = ? AND "
      "created_at >= ? AND rowid > ? ORDER BY created_at DESC, id LIMIT ?");
  st.bind(user_id).bind(since).bind(after ? *after : int64_t{0}).bind(int64_t{limit});
  std::vector<episode_record> out;
  while (st.step()) {
    if (after)
      *after = std::max(*after, st.integer(4));
    out.push_back(episode_key(st, user_id));
    out.back().created_at = st.integer(3);
  }
  return out;
}

std::vector<std::string> sqlite_backend::episode_texts(const std::vector<std::string>& ids) {
  // One prepared statement per id: in process, a statement costs no round
  // trip.
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (auto& id : ids) {
    auto st = prepare("SELECT text FROM episodes WHERE id = ?");
    st.bind(id);
    out.push_back(st.step() ? st.text(0) : std::string{});
  }
  return out;
}

std::string sqlite_backend::load_flow_state(const std::string& conversation_id) {
  auto row = prepare("SELECT state FROM conversation_flow_state WHERE conversation_id = ?");
  row.bind(conversation_id);
  return row.step() ? row.text(0) : std::string{};
}

bool sqlite_backend::save_flow_state(const std::string& conversation_id,
                                     const std::string& state_json, int64_t now) {
  if (conversation_owner(conversation_id).empty())
    return false;
  if (state_json.empty()) {
    prepare("DELETE FROM conversation_flow_state WHERE conversation_id = ?")
        .bind(conversation_id)
        .step();
    return true;
  }
  prepare(
      "INSERT INTO conversation_flow_state (conversation_id, state, updated_at) VALUES (?, ?, ?) "
      "ON CONFLICT (conversation_id) DO UPDATE SET state = excluded.state, "
      "updated_at = excluded.updated_at")
      .bind(conversation_id)
      .bind(state_json)
      .bind(now)
      .step();
  return true;
}

summary_record sqlite_backend::load_summary(const std::string& conversation_id) {
  summary_record s;
  s.conversation_id = conversation_id;
  auto row = prepare(
      "SELECT summary, covered_seq, version, incremental_updates, updated_at "
      "FROM conversation_summaries WHERE conversation_id = ?");
  row.bind(conversation_id);
  if (row.step()) {
    s.summary = row.text(0);
    s.covered_seq = row.integer(1);
    s.version = row.integer(2);
    s.incremental_updates = static_cast<int32_t>(row.integer(3));
    s.updated_at = row.integer(4);
  }
  // A conversation's seqs are 1..N (every message is appended at MAX + 1,
  // and messages are only ever deleted with their conversation), so the
  // counts come from one index seek instead of counting the whole
  // conversation every turn (issue 20, target 5).
  auto last = prepare("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?");
  last.bind(conversation_id).step();
  s.count_messages(last.integer(0));
  return s;
}

bool sqlite_backend::save_summary(const summary_record& s, int64_t expected_version, int64_t now) {
  if (expected_version == 0) {
    prepare(
        "INSERT INTO conversation_summaries (conversation_id, summary, covered_seq, version, "
        "incremental_updates, updated_at) SELECT ?, ?, ?, 1, ?, ? WHERE EXISTS (SELECT 1 FROM "
        "messages WHERE conversation_id = ? AND seq = ?) ON CONFLICT (conversation_id) DO NOTHING")
        .bind(s.conversation_id)
        .bind(s.summary)
        .bind(s.covered_seq)
        .bind(int64_t{s.incremental_updates})
        .bind(now)
        .bind(s.conversation_id)
        .bind(s.covered_seq)
        .step();
  } else {
    prepare(
        "UPDATE conversation_summaries SET summary = ?, covered_seq = ?, version = version + 1, "
        "incremental_updates = ?, updated_at = ? WHERE conversation_id = ? AND version = ? AND "
        "EXISTS (SELECT 1 FROM messages WHERE conversation_id = ? AND seq = ?)")
        .bind(s.summary)
        .bind(s.covered_seq)
        .bind(int64_t{s.incremental_updates})
        .bind(now)
        .bind(s.conversation_id)
        .bind(expected_version)
        .bind(s.conversation_id)
        .bind(s.covered_seq)
        .step();
  }
  return sqlite3_changes(db_) == 1;
}

store_backend::graph_write sqlite_backend::write_graph(const kb_graph_rows& g, int64_t now) {
  auto current = prepare("SELECT signature FROM kb_graph_state WHERE kb = ?");
  current.bind(g.kb);
  auto plan = graph_write_for(g, current.step() ? current.text(0) : std::string{});
  if (plan != graph_write::written)
    return plan;
  auto whole = g.base_signature.empty();
  if (whole) {
    prepare("DELETE FROM entities WHERE kb = ?").bind(g.kb).step();
    prepare("DELETE FROM relations WHERE kb = ?").bind(g.kb).step();
  }
  for (auto& id : g.removed_entities)
    prepare("DELETE FROM entities WHERE kb = ? AND id = ?").bind(g.kb).bind(id).step();
  for (auto& id : g.removed_relations)
    prepare("DELETE FROM relations WHERE kb = ? AND id = ?").bind(g.kb).bind(id).step();
  for (auto& e : g.entities)
    prepare(
        "INSERT INTO entities (kb, id, name, kind, description) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (kb, id) DO UPDATE SET name = excluded.name, kind = excluded.kind, "
        "description = excluded.description")
        .bind(g.kb)
        .bind(e.id)
        .bind(e.name)
        .bind(e.kind)
        .bind(e.description)
        .step();
  for (auto& r : g.relations)
    prepare(
        "INSERT INTO relations (kb, id, source_entity, target_entity, kind, weight, chunk_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kb, id) DO UPDATE SET "
        "source_entity = excluded.source_entity, target_entity = excluded.target_entity, "
        "kind = excluded.kind, weight = excluded.weight, chunk_id = excluded.chunk_id")
        .bind(g.kb)
        .bind(r.id)
        .bind(r.source)
        .bind(r.target)
        .bind(r.kind)
        .bind(r.weight)
        .bind(r.chunk_id)
        .step();
  prepare(
      "INSERT INTO kb_graph_state (kb, signature, entities, relations, updated_at) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kb) DO UPDATE SET signature = excluded.signature, "
      "entities = excluded.entities, relations = excluded.relations, "
      "updated_at = excluded.updated_at")
      .bind(g.kb)
      .bind(g.signature)
      .bind(graph_totals(g).first)
      .bind(graph_totals(g).second)
      .bind(now)
      .step();
  return graph_write::written;
}

std::pair<int64_t, int64_t> sqlite_backend::graph_size(const std::string& kb) {
  auto st = prepare(
      "SELECT (SELECT COUNT(*) FROM entities WHERE kb = ?), "
      "(SELECT COUNT(*) FROM relations WHERE kb = ?)");
  st.bind(kb).bind(kb);
  st.step();
  return {st.integer(0), st.integer(1)};
}

// -- API keys ---------------------------------------------------------------------------

bool sqlite_backend::create_api_key(const api_key_record& k) {
  prepare(
      "INSERT INTO api_keys (id, name, hash, tenant, user_prefix, scopes, kbs, rate, burst, "
      "created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) "
      "ON CONFLICT (name) DO NOTHING")
      .bind(k.id.empty() ? new_id() : k.id)
      .bind(k.name)
      .bind(k.hash)
      .bind(k.tenant)
      .bind(k.user_prefix)
      .bind(k.scopes)
      .bind(k.kbs)
      .bind(k.rate)
      .bind(int64_t{k.burst})
      .bind(k.created_at_ms)
      .step();
  return sqlite3_changes(db_) > 0;
}

std::vector<api_key_record> sqlite_backend::list_api_keys() {
  auto st = prepare(
      "SELECT id, name, hash, tenant, user_prefix, scopes, kbs, rate, burst, created_at, "
      "COALESCE(revoked_at, 0) FROM api_keys ORDER BY name");
  std::vector<api_key_record> out;
  while (st.step()) {
    api_key_record k;
    k.id = st.text(0);
    k.name = st.text(1);
    k.hash = st.text(2);
    k.tenant = st.text(3);
    k.user_prefix = st.text(4);
    k.scopes = st.text(5);
    k.kbs = st.text(6);
    k.rate = st.real(7);
    k.burst = static_cast<int32_t>(st.integer(8));
    k.created_at_ms = st.integer(9);
    k.revoked_at_ms = st.integer(10);
    out.push_back(std::move(k));
  }
  return out;
}

bool sqlite_backend::revoke_api_key(const std::string& name, int64_t now) {
  prepare("UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL")
      .bind(now)
      .bind(name)
      .step();
  return sqlite3_changes(db_) > 0;
}

// -- KB content ------------------------------------------------------------------------

int64_t sqlite_backend::put_kb_documents(const std::string& kb, const std::string& settings_json,
                                         const std::vector<document>& docs, int64_t now) {
  auto st = prepare(
      "INSERT INTO knowledge_bases (name, config, created_at, updated_at, version) "
      "VALUES (?, ?, ?, ?, 1) ON CONFLICT (name) DO UPDATE SET config = excluded.config, "
      "updated_at = excluded.updated_at, version = knowledge_bases.version + 1 RETURNING version");
  st.bind(kb).bind(settings_json).bind(now).bind(now);
  if (!st.step())
    throw store_error("sqlite: no version returned for knowledge base " + kb);
  auto version = st.integer(0);
  while (st.step()) {
  }
  for (auto& d : docs)
    prepare(
        "INSERT INTO documents (kb, id, title, source, content_hash, created_at, version, body) "
        "VALUES (?, ?, ?, ?, '', ?, ?, ?) ON CONFLICT (kb, id) DO UPDATE SET "
        "title = excluded.title, source = excluded.source, version = excluded.version, "
        "body = excluded.body")
        .bind(kb)
        .bind(d.id)
        .bind(d.title)
        .bind(d.source)
        .bind(now)
        .bind(version)
        .bind(d.text)
        .step();
  return version;
}

std::vector<kb_version> sqlite_backend::list_kb_versions() {
  auto st = prepare("SELECT name, version, config FROM knowledge_bases ORDER BY name");
  std::vector<kb_version> out;
  while (st.step())
    out.push_back(kb_version{st.text(0), st.integer(1), st.text(2)});
  return out;
}

std::vector<document> sqlite_backend::kb_documents_after(const std::string& kb, int64_t after) {
  auto st = prepare(
      "SELECT id, title, body, source FROM documents WHERE kb = ? AND version > ? "
      "ORDER BY version, id");
  st.bind(kb).bind(after);
  std::vector<document> out;
  while (st.step())
    out.push_back(document{st.text(0), st.text(1), st.text(2), st.text(3)});
  return out;
}

// -- cluster membership ------------------------------------------------------------------

void sqlite_backend::write_member(const member_info& m) {
  prepare(
      "INSERT INTO cluster_members (name, address, roles, kbs, started_at, heartbeat_at, status) "
      "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET address = excluded.address, "
      "roles = excluded.roles, kbs = excluded.kbs, started_at = excluded.started_at, "
      "heartbeat_at = excluded.heartbeat_at, status = excluded.status")
      .bind(m.name)
      .bind(m.address)
      .bind(m.roles)
      .bind(m.kbs)
      .bind(m.started_at_ms)
      .bind(m.heartbeat_at_ms)
      .bind(m.status)
      .step();
}

std::vector<member_info> sqlite_backend::list_members() {
  auto st = prepare(
      "SELECT name, address, roles, kbs, started_at, heartbeat_at, status FROM cluster_members "
      "ORDER BY name");
  std::vector<member_info> out;
  while (st.step()) {
    member_info m;
    m.name = st.text(0);
    m.address = st.text(1);
    m.roles = st.text(2);
    m.kbs = st.text(3);
    m.started_at_ms = st.integer(4);
    m.heartbeat_at_ms = st.integer(5);
    m.status = st.text(6);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ragtor
