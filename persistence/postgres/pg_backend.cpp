#include "persistence/postgres/pg_backend.hpp"

#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <libpq-fe.h>

namespace ragtor {

// Owns a PGresult.
class pg_backend::result {
public:
  explicit result(PGresult* r) : r_(r) {}
  result(result&& other) noexcept : r_(std::exchange(other.r_, nullptr)) {}
  result& operator=(result&& other) noexcept {
    std::swap(r_, other.r_);
    return *this;
  }
  ~result() {
    if (r_)
      PQclear(r_);
  }
  int rows() const { return PQntuples(r_); }
  bool is_null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const {
    return PQgetisnull(r_, row, col) ? std::string{}
                                     : std::string{PQgetvalue(r_, row, col),
                                                   static_cast<size_t>(PQgetlength(r_, row, col))};
  }
  int64_t integer(int row, int col) const {
    return PQgetisnull(r_, row, col) ? 0 : std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
  }
  int64_t affected() const { return std::strtoll(PQcmdTuples(r_), nullptr, 10); }
  std::string tag() const {
    auto* t = PQcmdStatus(r_);
    return t ? t : "";
  }

private:
  PGresult* r_;
};

// A result read ahead, and the statement it answers.
struct pg_backend::read_ahead_result {
  statement asked;
  result answer;
};

struct pg_backend::outcome {
  std::optional<result> answer;
  std::string error;
};

namespace {

// The DSN's host/port/dbname for messages, never the password.
std::string describe(PGconn* c) {
  if (!c || !PQhost(c) || !*PQhost(c))
    return "?";
  std::string out = PQhost(c);
  out += ":";
  out += PQport(c) ? PQport(c) : "?";
  out += "/";
  out += PQdb(c) ? PQdb(c) : "?";
  return out;
}

std::string trimmed(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

// libpq's messages about a malformed DSN can quote pieces of it; every
// spelling of the password found in the DSN is masked before a message
// leaves this file.
std::string without_password(std::string msg, const std::string& dsn) {
  std::vector<std::string> secrets;
  char* err = nullptr;
  auto* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts) {
    for (auto* o = opts; o->keyword; ++o)
      if (std::string_view{o->keyword} == "password" && o->val && *o->val)
        secrets.emplace_back(o->val);
    PQconninfoFree(opts);
  }
  if (err)
    PQfreemem(err);
  // A DSN that does not parse may spell the password in a way the scan
  // below misses (e.g. an unquoted space in it): mask every quoted piece of
  // the DSN in libpq's message.
  if (!opts && (dsn.find("password") != std::string::npos || dsn.find('@') != std::string::npos)) {
    for (size_t open = msg.find('"'); open != std::string::npos; open = msg.find('"', open + 1)) {
      auto close = msg.find('"', open + 1);
      if (close == std::string::npos)
        break;
      if (msg.compare(open + 1, close - open - 1, "=") == 0) {  // 'missing "=" after'
        open = close;
        continue;
      }
      msg.replace(open + 1, close - open - 1, "***");
      open += 4;
    }
  }
  // Raw spellings, also when the DSN does not parse: "password=VALUE" (in a
  // keyword string or a URI query) and "scheme://user:VALUE@host".
  for (size_t at = dsn.find("password"); at != std::string::npos;
       at = dsn.find("password", at + 1)) {
    auto eq = dsn.find_first_not_of(' ', at + 8);
    if (eq == std::string::npos || dsn[eq] != '=')
      continue;
    auto start = dsn.find_first_not_of(' ', eq + 1);
    if (start == std::string::npos)
      continue;
    auto end = dsn.find_first_of(" &", start);
    secrets.push_back(dsn.substr(start, end == std::string::npos ? end : end - start));
  }
  if (auto scheme = dsn.find("://"); scheme != std::string::npos) {
    auto at = dsn.find('@', scheme + 3);
    auto colon = dsn.find(':', scheme + 3);
    if (at != std::string::npos && colon < at)
      secrets.push_back(dsn.substr(colon + 1, at - colon - 1));
  }
  for (auto& secret : secrets) {
    std::string_view v{secret};
    while (!v.empty() && (v.front() == '\'' || v.front() == '"'))
      v.remove_prefix(1);
    while (!v.empty() && (v.back() == '\'' || v.back() == '"'))
      v.remove_suffix(1);
    if (v.empty())
      continue;
    for (auto pos = msg.find(v); pos != std::string::npos; pos = msg.find(v, pos + 3))
      msg.replace(pos, v.size(), "***");
  }
  return msg;
}

// LIMIT $n: a negative limit means "no limit" in SQLite; LIMIT NULL is
// PostgreSQL's spelling of it.
std::optional<std::string> limit_param(int64_t limit) {
  if (limit < 0)
    return std::nullopt;
  return std::to_string(limit);
}

// libpq's parameter values: a pointer per parameter, null for SQL NULL.
std::vector<const char*> values_of(const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (auto& p : params)
    values.push_back(p ? p->c_str() : nullptr);
  return values;
}

}  // namespace

pg_backend::pg_backend(std::string dsn, bool prepare)
    : dsn_(std::move(dsn)), prepare_(prepare) {
  conn_ = PQconnectdb(dsn_.c_str());
  if (PQstatus(conn_) != CONNECTION_OK) {
    auto msg = without_password("cannot connect to PostgreSQL at " + describe(conn_) + ": "
                                    + trimmed(PQerrorMessage(conn_)),
                                dsn_);
    PQfinish(conn_);
    conn_ = nullptr;
    throw store_error(msg);
  }
  // Warnings about e.g. DROP ... CASCADE are not errors; keep stderr quiet.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
}

pg_backend::~pg_backend() {
  if (conn_)
    PQfinish(conn_);
}

void pg_backend::reset_connection() {
  // Inside a transaction the server had begun (its BEGIN was sent).
  if (in_transaction_ && (pending_.empty() || std::string_view{pending_.front()} != "BEGIN"))
    transaction_lost_ = true;
  PQreset(conn_);
  prepared_.clear();
  ahead_.clear();
}

void pg_backend::ensure_connected() {
  if (PQstatus(conn_) == CONNECTION_OK)
    return;
  reset_connection();
  if (PQstatus(conn_) != CONNECTION_OK)
    throw store_error(
        without_password("PostgreSQL is unreachable: " + trimmed(PQerrorMessage(conn_)) + " ("
                             + describe(conn_) + ")",
                         dsn_));
}

pg_backend::result pg_backend::run(const char* sql, const std::vector<param>& params,
                                   bool prepare) {
  for (auto i = ahead_.begin(); i != ahead_.end(); ++i)
    if (std::string_view{i->asked.sql} == sql && i->asked.params == params) {
      auto r = std::move(i->answer);
      ahead_.erase(i);
      return r;
    }
  prepare = prepare && prepare_ && !params.empty();
  const std::string* name = prepare ? prepared_name(sql) : nullptr;
  if (!pending_.empty() || (prepare && !name)) {
    // With the control statements waiting (BEGIN, SAVEPOINT, RELEASE) and
    // its preparing, when due: one round trip for all.
    std::vector<statement> one;
    one.push_back({sql, params, prepare});
    return std::move(run_all(std::move(one)).front());
  }
  const bool retryable = PQtransactionStatus(conn_) == PQTRANS_IDLE;
  const auto values = values_of(params);
  const int n = static_cast<int>(values.size());
  for (int attempt = 0;; ++attempt) {
    ++round_trips_;
    auto* r = name ? PQexecPrepared(conn_, name->c_str(), n, values.data(), nullptr, nullptr, 0)
                   : PQexecParams(conn_, sql, n, nullptr, values.data(), nullptr, nullptr, 0);
    auto st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
      return result{r};
    auto msg = trimmed(r ? PQresultErrorMessage(r) : "");
    if (r)
      PQclear(r);
    if (again_after(retryable, attempt, std::move(msg))) {
      if (prepare)  // prepared again on the new connection
        return run(sql, params, true);
    }
  }
}

std::vector<pg_backend::result> pg_backend::run_all(std::vector<statement> list) {
  const bool retryable = PQtransactionStatus(conn_) == PQTRANS_IDLE;
  for (int attempt = 0;; ++attempt) {
    std::vector<outcome> out;
    if (exchange(list, out)) {
      std::vector<result> results;
      for (auto& o : out) {
        if (!o.answer)
          throw store_error("postgres: " + o.error);
        results.push_back(std::move(*o.answer));
      }
      return results;
    }
    again_after(retryable, attempt, "");
  }
}

// A statement outside a transaction (a read, or a transaction's first
// statement with its BEGIN waiting) may be retried once on a fresh
// connection: libpq only notices that the server went away (and came
// back) when a statement fails. True: go again; else throws.
bool pg_backend::again_after(bool retryable, int attempt, std::string msg) {
  if (msg.empty())
    msg = trimmed(PQerrorMessage(conn_));
  if (retryable && attempt == 0 && PQstatus(conn_) == CONNECTION_BAD) {
    reset_connection();
    if (PQstatus(conn_) == CONNECTION_OK)
      return true;
    pending_.clear();
    throw store_error(
        without_password("PostgreSQL is unreachable: " + trimmed(PQerrorMessage(conn_)) + " ("
                             + describe(conn_) + ")",
                         dsn_));
  }
  pending_.clear();
  throw store_error("postgres: " + msg);
}

pg_backend::result pg_backend::run(const statement& s) {
  return run(s.sql, s.params, s.prepare);
}

const std::string* pg_backend::prepared_name(const char* sql) const {
  auto i = prepared_.find(std::string_view{sql});
  return i == prepared_.end() ? nullptr : &i->second;
}

// Names never used on this connection before, even when a DEALLOCATE did
// not reach the server.
std::string pg_backend::next_statement_name() {
  return "ragtor_" + std::to_string(++statements_named_);
}

// libpq's pipeline mode: the control statements waiting, then every
// statement (after its preparing, when not prepared yet), then one Sync;
// the server answers them in order, one round trip for all. Outside a
// transaction they run in one implicit transaction, each with its own
// snapshot (READ COMMITTED), as they would one after another. A statement
// that fails aborts those after it, which report its error.
bool pg_backend::exchange(std::span<const statement> list, std::vector<outcome>& out) {
  out.clear();
  out.resize(list.size());
  if (PQstatus(conn_) != CONNECTION_OK || PQenterPipelineMode(conn_) != 1)
    return false;
  ++round_trips_;
  // Per statement: the name it is being prepared under ("" when it is
  // prepared already or runs unprepared).
  std::vector<std::string> preparing(list.size());
  bool sent = true;
  for (auto* control : pending_)
    sent = sent && PQsendQueryParams(conn_, control, 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  for (size_t k = 0; k < list.size() && sent; ++k) {
    auto& s = list[k];
    const auto values = values_of(s.params);
    const int n = static_cast<int>(values.size());
    if (!(s.prepare && prepare_ && n > 0)) {
      sent = PQsendQueryParams(conn_, s.sql, n, nullptr, values.data(), nullptr, nullptr, 0) == 1;
      continue;
    }
    const std::string* name = prepared_name(s.sql);
    if (!name) {
      preparing[k] = next_statement_name();
      name = &preparing[k];
      sent = PQsendPrepare(conn_, name->c_str(), s.sql, n, nullptr) == 1;
    }
    sent = sent
           && PQsendQueryPrepared(conn_, name->c_str(), n, values.data(), nullptr, nullptr, 0)
                  == 1;
  }
  sent = sent && PQpipelineSync(conn_) == 1;
  // Each command's results end with a null. False when the connection
  // broke (no result where one was due).
  std::string first_error;
  auto next = [&](auto&& take) {
    auto* r = PQgetResult(conn_);
    if (!r)
      return false;
    auto st = PQresultStatus(r);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok && first_error.empty())
      first_error = trimmed(PQresultErrorMessage(r));
    if (!take(r, ok))
      PQclear(r);
    while (auto* more = PQgetResult(conn_))
      PQclear(more);
    return st != PGRES_FATAL_ERROR || PQstatus(conn_) == CONNECTION_OK;
  };
  auto ignore = [](pg_result*, bool) { return false; };
  bool whole = sent;
  for (size_t i = 0; i < pending_.size() && whole; ++i)
    whole = next(ignore);
  for (size_t k = 0; k < list.size() && whole; ++k) {
    if (!preparing[k].empty())
      whole = next([&](pg_result*, bool ok) {
        if (ok)
          prepared_.emplace(list[k].sql, std::move(preparing[k]));
        return false;
      });
    whole = whole && next([&](pg_result* r, bool ok) {
      if (ok)
        out[k].answer.emplace(r);
      else
        out[k].error = first_error.empty() ? "the statement failed" : first_error;
      return ok;
    });
  }
  if (whole) {
    auto* r = PQgetResult(conn_);
    whole = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    if (r)
      PQclear(r);
  }
  if (whole && PQexitPipelineMode(conn_) == 1) {
    pending_.clear();
    return true;
  }
  // Broken off: nothing read is trusted, and a connection still up is in
  // a state no call expects.
  out.clear();
  if (PQstatus(conn_) == CONNECTION_OK)
    reset_connection();
  return false;
}

void pg_backend::read_ahead(const turn_reads& t) {
  ahead_.clear();
  // Not inside a transaction: a failing statement of the pipeline would
  // abort it. The calls make every read on their own then.
  if (in_transaction_ || PQstatus(conn_) != CONNECTION_OK)
    return;
  std::vector<statement> list;
  list.push_back(messages_statement(t.conversation_id, t.window_limit, 0));
  if (!t.incognito) {
    list.push_back(summary_statement(t.conversation_id));
    list.push_back(core_memory_statement(t.user_id));
    list.push_back(recall_epoch_statement(t.user_id));
    list.push_back(memories_statement(t.user_id, t.now, t.memories_since));
    if (t.episode_keys > 0)
      list.push_back(episode_keys_statement(t.user_id, t.episode_keys, t.episodes_since));
  }
  std::vector<outcome> out;
  if (!exchange(list, out))
    return;  // the calls make the reads (and the connection) again
  for (size_t k = 0; k < list.size(); ++k)
    if (out[k].answer)
      ahead_.push_back({std::move(list[k]), std::move(*out[k].answer)});
}

void pg_backend::end_read() noexcept {
  ahead_.clear();
}

// A transaction's control statements wait for its next statement and go
// in one pipeline with it: BEGIN with the first, each job's SAVEPOINT with
// the job's first, its RELEASE with the next job's SAVEPOINT (or COMMIT).
// A group commit of n jobs sends its control statements in one round trip
// of their own (its COMMIT) instead of 2n + 2.
void pg_backend::begin() {
  ensure_connected();
  pending_.assign(1, "BEGIN");
  in_transaction_ = true;
  transaction_lost_ = false;
}

void pg_backend::commit() {
  // COMMIT of a transaction that already failed "succeeds" with the tag
  // ROLLBACK: nothing was written, so that is an error here. So does one
  // on a connection made again since BEGIN (no transaction there).
  auto aborted = PQtransactionStatus(conn_) == PQTRANS_INERROR || transaction_lost_;
  in_transaction_ = false;
  auto r = run("COMMIT");
  if (aborted || r.tag() != "COMMIT")
    throw store_error("postgres: the transaction was rolled back (an earlier statement failed)");
}

void pg_backend::rollback() {
  // What waits was never sent: nothing of it to undo.
  pending_.clear();
  in_transaction_ = false;
  transaction_lost_ = false;
  if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE)
    run("ROLLBACK");
}

void pg_backend::savepoint() {
  pending_.push_back("SAVEPOINT job");
}

void pg_backend::release_savepoint() {
  // A job that sent nothing: its SAVEPOINT need not be sent either.
  if (!pending_.empty() && std::string_view{pending_.back()} == "SAVEPOINT job") {
    pending_.pop_back();
    return;
  }
  pending_.push_back("RELEASE SAVEPOINT job");
}

void pg_backend::rollback_to_savepoint() {
  if (!pending_.empty() && std::string_view{pending_.back()} == "SAVEPOINT job") {
    pending_.pop_back();
    return;
  }
  run("ROLLBACK TO SAVEPOINT job");
  pending_.push_back("RELEASE SAVEPOINT job");
}

void pg_backend::execute_script(std::string_view sql) {
  ensure_connected();
  // PQexec runs a multi-statement script (no parameters).
  // What waits of a transaction goes first, in the same round trip.
  std::string text;
  for (auto* control : pending_)
    (text += control) += ";\n";
  pending_.clear();
  text += sql;
  // A migration may change a table a prepared statement reads ("cached
  // plan must not change result type"): they are prepared again.
  if (!prepared_.empty()) {
    PQclear(PQexec(conn_, "DEALLOCATE ALL"));
    prepared_.clear();
  }
  auto* r = PQexec(conn_, text.c_str());
  auto st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  std::string msg = r ? trimmed(PQresultErrorMessage(r)) : trimmed(PQerrorMessage(conn_));
  if (r)
    PQclear(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    throw store_error("postgres: " + msg);
}

std::vector<int> pg_backend::applied_migrations() {
  ensure_connected();
  run("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
      "name TEXT NOT NULL, applied_at BIGINT NOT NULL)");
  auto r = run("SELECT version FROM schema_migrations ORDER BY version");
  std::vector<int> out;
  for (int i = 0; i < r.rows(); ++i)
    out.push_back(static_cast<int>(r.integer(i, 0)));
  return out;
}

// The lock key is a constant shared by every ragtor node ("ragtor" in
// ASCII, as a number).
void pg_backend::lock_schema() {
  ensure_connected();
  run("SELECT pg_advisory_lock(125762739254386)");
}

void pg_backend::unlock_schema() {
  run("SELECT pg_advisory_unlock(125762739254386)");
}

void pg_backend::record_migration(int version, std::string_view name, int64_t now) {
  run("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
      {std::to_string(version), std::string{name}, std::to_string(now)});
}

// Stores a message at the conversation's next seq and sets the
// conversation's time, in one statement; returns the seq. The caller
// holds the conversation's row lock (begin_turn's upsert, finish_turn's
// FOR UPDATE, each the statement before in the same round trip): writers
// of one conversation, on any node, take turns, so the seq is counted in
// the message's own statement, whose snapshot begins after the lock was
// granted.
pg_backend::statement pg_backend::message_statement(const std::string& id,
                                                    const std::string& conversation_id,
                                                    std::string_view role,
                                                    const std::string& content,
                                                    const std::string& citations, bool completed,
                                                    const std::string& request_id, int64_t now) {
  return {"WITH message AS (INSERT INTO messages (id, conversation_id, seq, role, content, "
          "citations, completed, request_id, created_at) VALUES ($1, $2, (SELECT COALESCE(MAX(seq), "
          "0) + 1 FROM messages WHERE conversation_id = $2), $3, $4, $5, $6, $7, $8) RETURNING seq), "
          "touched AS (UPDATE conversations SET updated_at = $8 WHERE id = $2) "
          "SELECT seq FROM message",
          {id, conversation_id, std::string{role}, content,
           citations.empty() ? std::string{"[]"} : citations, completed ? "1" : "0",
           request_id.empty() ? param{} : param{request_id}, std::to_string(now)}};
}

bool pg_backend::find_turn(const std::string& request_id, const std::string& user_id,
                           stored_message& out) {
  auto r = run(
      "SELECT m.conversation_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
      "WHERE m.request_id = $1 AND m.role = 'assistant' AND c.user_id = $2 "
      "ORDER BY m.created_at DESC LIMIT 1",
      {request_id, user_id});
  if (r.rows() == 0)
    return false;
  return find_message(r.text(0, 0), request_id, "assistant", out);
}

bool pg_backend::find_message(const std::string& conversation_id, const std::string& request_id,
                              std::string_view role, stored_message& out) {
  auto r =
      run("SELECT id, seq, content, citations, completed, created_at FROM messages "
          "WHERE conversation_id = $1 AND request_id = $2 AND role = $3",
          {conversation_id, request_id, std::string{role}});
  if (r.rows() == 0)
    return false;
  out.message_id = r.text(0, 0);
  out.conversation_id = conversation_id;
  out.seq = r.integer(0, 1);
  out.role = std::string{role};
  out.content = r.text(0, 2);
  out.citations_json = r.text(0, 3);
  out.completed = r.integer(0, 4) != 0;
  out.request_id = request_id;
  out.created_at_ms = r.integer(0, 5);
  return true;
}

turn_opened pg_backend::begin_turn(const std::string& user_id, const std::string& session_id,
                                   const std::string& content, const std::string& request_id,
                                   int64_t now) {
  turn_opened out;
  size_t n = std::min<size_t>(content.size(), 80);
  while (n > 0 && n < content.size() && (static_cast<unsigned char>(content[n]) & 0xC0) == 0x80)
    --n;
  // One round trip: the conversation made, or its row locked for the rest
  // of the transaction (two nodes may make the same one at once, and the
  // unique key decides: the other waits and gets the winner's id); then,
  // unless its request is stored already, the user's message at the next
  // seq, by a statement the server runs once the first holds the lock.
  auto id = new_id();
  std::vector<statement> both;
  both.push_back(
      {"INSERT INTO conversations (id, user_id, session_id, title, created_at, updated_at) "
       "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (user_id, session_id) "
       "DO UPDATE SET updated_at = conversations.updated_at RETURNING id",
       {new_id(), user_id, session_id, content.substr(0, n), std::to_string(now)}});
  both.push_back(
      {"WITH message AS (INSERT INTO messages (id, conversation_id, seq, role, content, "
       "citations, completed, request_id, created_at) SELECT $1, c.id, (SELECT COALESCE(MAX(seq), "
       "0) + 1 FROM messages WHERE conversation_id = c.id), 'user', $4, '[]', 1, $5, $6 "
       "FROM conversations c WHERE c.user_id = $2 AND c.session_id = $3 AND ($5::text IS NULL OR "
       "NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.request_id = $5 "
       "AND m.role = 'user')) RETURNING conversation_id, seq), "
       "touched AS (UPDATE conversations SET updated_at = $6 WHERE id IN "
       "(SELECT conversation_id FROM message)) SELECT seq FROM message",
       {id, user_id, session_id, content, request_id.empty() ? param{} : param{request_id},
        std::to_string(now)}});
  auto done = run_all(std::move(both));
  out.conversation_id = done[0].text(0, 0);
  if (done[1].rows() > 0) {
    out.message_id = id;
    out.seq = done[1].integer(0, 0);
    return out;
  }
  // The request's message is stored already (a retry): the turn it began.
  stored_message user;
  if (!find_message(out.conversation_id, request_id, "user", user))
    throw store_error("postgres: the user's message was neither stored nor found");
  out.existing = true;
  out.message_id = user.message_id;
  out.seq = user.seq;
  out.has_answer = find_message(out.conversation_id, request_id, "assistant", out.answer);
  return out;
}

std::string pg_backend::finish_turn(const stored_message& msg, int64_t now) {
  auto id = new_id();
  std::vector<statement> both;
  both.push_back({"SELECT id FROM conversations WHERE id = $1 FOR UPDATE", {msg.conversation_id}});
  both.push_back(message_statement(id, msg.conversation_id, "assistant", msg.content,
                                   msg.citations_json, msg.completed, msg.request_id, now));
  run_all(std::move(both));
  return id;
}

std::vector<stored_message> pg_backend::history(const std::string& conversation_id, int32_t limit) {
  return messages_page(conversation_id, limit, 0);
}

pg_backend::statement pg_backend::messages_statement(std::string_view conversation_id,
                                                     int32_t limit, int64_t before_seq) {
  return {"SELECT id, seq, role, content, citations, completed, request_id, created_at "
          "FROM messages WHERE conversation_id = $1 AND seq < $2 "
          "ORDER BY seq DESC LIMIT $3",
          {std::string{conversation_id},
           std::to_string(before_seq > 0 ? before_seq : std::numeric_limits<int64_t>::max()),
           limit_param(limit)}};
}

std::vector<stored_message> pg_backend::messages_page(const std::string& conversation_id,
                                                      int32_t limit, int64_t before_seq) {
  ensure_connected();
  auto r = run(messages_statement(conversation_id, limit, before_seq));
  std::vector<stored_message> out;
  for (int i = r.rows() - 1; i >= 0; --i) {  // newest first -> oldest first
    stored_message m;
    m.message_id = r.text(i, 0);
    m.conversation_id = conversation_id;
    m.seq = r.integer(i, 1);
    m.role = r.text(i, 2);
    m.content = r.text(i, 3);
    m.citations_json = r.text(i, 4);
    m.completed = r.integer(i, 5) != 0;
    m.request_id = r.text(i, 6);
    m.created_at_ms = r.integer(i, 7);
    out.push_back(std::move(m));
  }
  return out;
}

conversation_page pg_backend::list_conversations(const std::string& user_id, int32_t limit,
                                                 const std::string& cursor) {
  ensure_connected();
  int64_t after_time = std::numeric_limits<int64_t>::max();
  std::string after_id = "~";
  if (!cursor.empty()) {
    auto colon = cursor.find(':');
    char* end = nullptr;
    if (colon != std::string::npos)
      after_time = std::strtoll(cursor.c_str(), &end, 10);
    if (colon == std::string::npos || end != cursor.c_str() + colon)
      throw store_error("malformed cursor");
    after_id = cursor.substr(colon + 1);
  }
  // COLLATE "C": ids compare bytewise, exactly as in SQLite.
  auto r =
      run("SELECT c.id, c.session_id, c.title, c.created_at, c.updated_at, "
          "(SELECT content FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user' "
          " ORDER BY m.seq LIMIT 1), "
          "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
          "FROM conversations c WHERE c.user_id = $1 "
          "AND (c.updated_at < $2 OR (c.updated_at = $2 AND c.id COLLATE \"C\" < $3)) "
          "ORDER BY c.updated_at DESC, c.id COLLATE \"C\" DESC LIMIT $4",
          {user_id, std::to_string(after_time), after_id, limit_param(int64_t{limit} + 1)});
  conversation_page page;
  for (int i = 0; i < r.rows(); ++i) {
    conversation_info c;
    c.conversation_id = r.text(i, 0);
    c.user_id = user_id;
    c.session_id = r.text(i, 1);
    c.title = r.text(i, 2);
    c.created_at_ms = r.integer(i, 3);
    c.updated_at_ms = r.integer(i, 4);
    c.first_message = r.text(i, 5);
    c.message_count = r.integer(i, 6);
    page.conversations.push_back(std::move(c));
  }
  if (page.conversations.size() > static_cast<size_t>(limit)) {
    page.conversations.pop_back();
    auto& last = page.conversations.back();
    page.next_cursor = std::to_string(last.updated_at_ms) + ":" + last.conversation_id;
  }
  return page;
}

std::string pg_backend::conversation_owner(const std::string& conversation_id) {
  ensure_connected();
  auto r = run("SELECT user_id FROM conversations WHERE id = $1", {conversation_id});
  return r.rows() ? r.text(0, 0) : std::string{};
}

bool pg_backend::delete_conversation(const std::string& conversation_id) {
  run("DELETE FROM feedback WHERE message_id IN "
      "(SELECT id FROM messages WHERE conversation_id = $1)",
      {conversation_id});
  bump_recall_epoch_of(conversation_id);
  return run("DELETE FROM conversations WHERE id = $1", {conversation_id}).affected() > 0;
}

int64_t pg_backend::clear_conversation(const std::string& user_id, const std::string& session_id) {
  auto r = run("SELECT id FROM conversations WHERE user_id = $1 AND session_id = $2 FOR UPDATE",
               {user_id, session_id});
  if (r.rows() == 0)
    return 0;
  auto id = r.text(0, 0);
  run("DELETE FROM conversation_summaries WHERE conversation_id = $1", {id});
  run("DELETE FROM conversation_flow_state WHERE conversation_id = $1", {id});
  run("DELETE FROM episodes WHERE conversation_id = $1", {id});
  bump_recall_epoch(user_id);
  run("DELETE FROM feedback WHERE message_id IN "
      "(SELECT id FROM messages WHERE conversation_id = $1)",
      {id});
  return run("DELETE FROM messages WHERE conversation_id = $1", {id}).affected();
}

std::string pg_backend::toggle_feedback(const feedback_vote& vote, int64_t now) {
  if (run("SELECT 1 FROM messages WHERE id = $1", {vote.message_id}).rows() == 0)
    return {};
  auto current =
      run("SELECT is_positive FROM feedback WHERE thread_id = $1 AND message_id = $2 "
          "FOR UPDATE",
          {vote.thread_id, vote.message_id});
  std::string wanted = vote.is_positive ? "1" : "0";
  auto optional = [](const std::string& s) { return s.empty() ? param{} : param{s}; };
  if (current.rows() && current.text(0, 0) == wanted) {
    run("DELETE FROM feedback WHERE thread_id = $1 AND message_id = $2",
        {vote.thread_id, vote.message_id});
    return "none";
  }
  // Insert or replace in one statement: two nodes voting at once cannot
  // both insert.
  run("INSERT INTO feedback (id, thread_id, message_id, query, is_positive, agent_type, metadata, "
      "created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
      "ON CONFLICT (thread_id, message_id) DO UPDATE SET is_positive = EXCLUDED.is_positive, "
      "query = EXCLUDED.query, agent_type = EXCLUDED.agent_type, metadata = EXCLUDED.metadata, "
      "created_at = EXCLUDED.created_at",
      {new_id(), vote.thread_id, vote.message_id, vote.query, wanted, optional(vote.agent_type),
       optional(vote.metadata_json), std::to_string(now)});
  return vote.is_positive ? "positive" : "negative";
}

pg_backend::statement pg_backend::core_memory_statement(std::string_view user_id) {
  return {"SELECT profile FROM core_memory WHERE user_id = $1", {std::string{user_id}}};
}

std::string pg_backend::core_memory(const std::string& user_id) {
  auto r = run(core_memory_statement(user_id));
  return r.rows() ? r.text(0, 0) : std::string{"{}"};
}

void pg_backend::set_core_memory(const std::string& user_id, const std::string& profile_json,
                                 int64_t now) {
  run("INSERT INTO core_memory (user_id, profile, updated_at) VALUES ($1, $2, $3) "
      "ON CONFLICT (user_id) DO UPDATE SET profile = EXCLUDED.profile, "
      "updated_at = EXCLUDED.updated_at",
      {user_id, profile_json, std::to_string(now)});
}

bool pg_backend::add_memory(const memory_record& m) {
  // xmax = 0 only for a freshly inserted row.
  auto r = run(
      "INSERT INTO memories (id, user_id, kind, content, source_message_id, expires_at, "
      "created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_id, content) DO UPDATE "
      "SET expires_at = EXCLUDED.expires_at RETURNING (xmax = 0)",
      {m.id.empty() ? new_id() : m.id, m.user_id, m.kind, m.content,
       m.source_message_id.empty() ? param{} : param{m.source_message_id},
       std::to_string(m.expires_at), std::to_string(m.created_at)});
  if (r.rows() && r.text(0, 0) == "t")
    return true;
  bump_recall_epoch(m.user_id);  // a refreshed lifetime: not a newer row
  return false;
}

// PostgreSQL's rows have no commit order to mark (store_backend.hpp):
// `after` is left as it is.
pg_backend::statement pg_backend::memories_statement(std::string_view user_id, int64_t now,
                                                     int64_t since) {
  return {"SELECT id, kind, content, COALESCE(source_message_id, ''), created_at, "
          "COALESCE(expires_at, 0) FROM memories WHERE user_id = $1 AND created_at >= $3 AND "
          "(expires_at IS NULL OR expires_at = 0 OR expires_at > $2) "
          "ORDER BY created_at DESC, id LIMIT 200",
          {std::string{user_id}, std::to_string(now), std::to_string(since)}};
}

std::vector<memory_record> pg_backend::list_memories(const std::string& user_id, int64_t now,
                                                     int64_t since, int64_t* /*after*/) {
  auto r = run(memories_statement(user_id, now, since));
  std::vector<memory_record> out;
  for (int i = 0; i < r.rows(); ++i) {
    memory_record m;
    m.id = r.text(i, 0);
    m.user_id = user_id;
    m.kind = r.text(i, 1);
    m.content = r.text(i, 2);
    m.source_message_id = r.text(i, 3);
    m.created_at = std::stoll(r.text(i, 4));
    m.expires_at = std::stoll(r.text(i, 5));
    out.push_back(std::move(m));
  }
  return out;
}

int64_t pg_backend::delete_memories(const std::string& user_id, const std::string& id) {
  auto n = id.empty()
               ? run("DELETE FROM memories WHERE user_id = $1", {user_id}).affected()
               : run("DELETE FROM memories WHERE user_id = $1 AND id = $2", {user_id, id})
                     .affected();
  if (n > 0)
    bump_recall_epoch(user_id);
  return n;
}

pg_backend::statement pg_backend::recall_epoch_statement(std::string_view user_id) {
  return {"SELECT epoch FROM recall_epochs WHERE user_id = $1", {std::string{user_id}}};
}

int64_t pg_backend::recall_epoch(const std::string& user_id) {
  auto r = run(recall_epoch_statement(user_id));
  return r.rows() ? std::stoll(r.text(0, 0)) : 0;
}

void pg_backend::bump_recall_epoch(const std::string& user_id) {
  run("INSERT INTO recall_epochs (user_id, epoch) VALUES ($1, 1) "
      "ON CONFLICT (user_id) DO UPDATE SET epoch = recall_epochs.epoch + 1",
      {user_id});
}

void pg_backend::bump_recall_epoch_of(const std::string& conversation_id) {
  run("INSERT INTO recall_epochs (user_id, epoch) SELECT user_id, 1 FROM conversations "
      "WHERE id = $1 ON CONFLICT (user_id) DO UPDATE SET epoch = recall_epochs.epoch + 1",
      {conversation_id});
}

void pg_backend::add_episode(const episode_record& e) {
  auto id = e.id.empty() ? new_id() : e.id;
  run("INSERT INTO episodes (id, conversation_id, user_id, seq, text, embedding, created_at) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7)",
      {id, e.conversation_id, e.user_id, std::to_string(e.seq), e.text,
       encode_embedding(e.embedding), std::to_string(e.created_at)});
  remember_episode_embedding(id, e.embedding);
  remember_episode_text(id, e.text);
}

namespace {

// The columns `id, conversation_id, seq` every episode query starts with.
template <class Result>
episode_record episode_key(const Result& r, int row, const std::string& user_id) {
  episode_record e;
  e.id = r.text(row, 0);
  e.conversation_id = r.text(row, 1);
  e.user_id = user_id;
  e.seq = std::stoll(r.text(row, 2));
  return e;
}

}  // namespace

pg_backend::statement pg_backend::episode_keys_statement(std::string_view user_id,
                                                         int32_t limit, int64_t since) {
  return {"SELECT id, conversation_id, seq, created_at FROM episodes WHERE user_id = $1 "
          "AND created_at >= $3 ORDER BY created_at DESC, id LIMIT $2",
          {std::string{user_id}, std::to_string(limit), std::to_string(since)}};
}

std::vector<episode_record> pg_backend::recent_episode_keys(const std::string& user_id,
                                                            int32_t limit, int64_t since,
                                                            int64_t* /*after*/) {
  auto r = run(episode_keys_statement(user_id, limit, since));
  std::vector<episode_record> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(episode_key(r, i, user_id));
    out.back().created_at = std::stoll(r.text(i, 3));
  }
  return out;
}

std::vector<episode_record> pg_backend::recent_episodes(const std::string& user_id, int32_t limit,
                                                        bool texts) {
  auto r = run(texts ? "SELECT id, conversation_id, seq, text, created_at, COALESCE(embedding, '') "
                       "FROM episodes WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT $2"
                     : "SELECT id, conversation_id, seq, CASE WHEN COALESCE(embedding, '') = '' "
                       "THEN text ELSE '' END, created_at, COALESCE(embedding, '') "
                       "FROM episodes WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT $2",
               {user_id, std::to_string(limit)});
  std::vector<episode_record> out;
  for (int i = 0; i < r.rows(); ++i) {
    auto e = episode_key(r, i, user_id);
    e.text = r.text(i, 3);
    e.created_at = std::stoll(r.text(i, 4));
    e.embedding = stored_episode_embedding(e.id, r.text(i, 5));
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

// `items` as a text[] literal, each element quoted: a list of any length
// as one parameter.
std::string text_array(const std::vector<std::string>& items) {
  std::string array = "{";
  for (auto& item : items) {
    if (array.size() > 1)
      array += ',';
    array += '"';
    for (char c : item) {
      if (c == '"' || c == '\\')
        array += '\\';
      array += c;
    }
    array += '"';
  }
  array += '}';
  return array;
}

}  // namespace

std::vector<std::string> pg_backend::episode_texts(const std::vector<std::string>& ids) {
  std::vector<std::string> out(ids.size());
  if (ids.empty())
    return out;
  // One round trip: the ids as one text[] parameter.
  auto r = run("SELECT id, text FROM episodes WHERE id = ANY($1::text[])", {text_array(ids)});
  for (int row = 0; row < r.rows(); ++row) {
    auto id = r.text(row, 0);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == id)
        out[i] = r.text(row, 1);
  }
  return out;
}

std::string pg_backend::load_flow_state(const std::string& conversation_id) {
  auto row =
      run("SELECT state FROM conversation_flow_state WHERE conversation_id = $1", {conversation_id});
  return row.rows() ? row.text(0, 0) : std::string{};
}

bool pg_backend::save_flow_state(const std::string& conversation_id,
                                 const std::string& state_json, int64_t now) {
  if (conversation_owner(conversation_id).empty())
    return false;
  if (state_json.empty()) {
    run("DELETE FROM conversation_flow_state WHERE conversation_id = $1", {conversation_id});
    return true;
  }
  run("INSERT INTO conversation_flow_state (conversation_id, state, updated_at) "
      "VALUES ($1, $2, $3) ON CONFLICT (conversation_id) DO UPDATE SET state = excluded.state, "
      "updated_at = excluded.updated_at",
      {conversation_id, state_json, std::to_string(now)});
  return true;
}

// The summary (when there is one) and the conversation's last seq in one
// statement, one round trip: seqs are 1..N (see
// sqlite_backend::load_summary), so the last is one index seek.
pg_backend::statement pg_backend::summary_statement(std::string_view conversation_id) {
  return {"SELECT s.summary, s.covered_seq, s.version, s.incremental_updates, s.updated_at, "
          "(SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = $1) "
          "FROM (SELECT 1) AS one LEFT JOIN conversation_summaries s ON s.conversation_id = $1",
          {std::string{conversation_id}}};
}

summary_record pg_backend::load_summary(const std::string& conversation_id) {
  summary_record s;
  s.conversation_id = conversation_id;
  auto row = run(summary_statement(conversation_id));
  if (!row.is_null(0, 0)) {
    s.summary = row.text(0, 0);
    s.covered_seq = std::stoll(row.text(0, 1));
    s.version = std::stoll(row.text(0, 2));
    s.incremental_updates = std::stoi(row.text(0, 3));
    s.updated_at = std::stoll(row.text(0, 4));
  }
  s.count_messages(row.integer(0, 5));
  return s;
}

bool pg_backend::save_summary(const summary_record& s, int64_t expected_version, int64_t now) {
  auto covered = std::to_string(s.covered_seq);
  auto updates = std::to_string(s.incremental_updates);
  if (expected_version == 0)
    return run("INSERT INTO conversation_summaries (conversation_id, summary, covered_seq, "
               "version, "
               "incremental_updates, updated_at) SELECT $1::text, $2::text, $3::bigint, 1, "
               "$4::int, "
               "$5::bigint WHERE EXISTS (SELECT 1 FROM messages WHERE conversation_id = $1::text "
               "AND seq = $3::bigint) "
               "ON CONFLICT (conversation_id) DO NOTHING",
               {s.conversation_id, s.summary, covered, updates, std::to_string(now)})
               .affected()
           == 1;
  return run("UPDATE conversation_summaries SET summary = $2, covered_seq = $3, version = version "
             "+ 1, incremental_updates = $4, updated_at = $5 WHERE conversation_id = $1 AND "
             "version = $6 AND EXISTS (SELECT 1 FROM messages WHERE conversation_id = $1 AND "
             "seq = $3)",
             {s.conversation_id, s.summary, covered, updates, std::to_string(now),
              std::to_string(expected_version)})
             .affected()
         == 1;
}

namespace {

// Runs `insert` ("INSERT INTO t (cols) VALUES") for `rows` in multi-row
// statements of at most `per_statement` rows, each ending with `tail`
// (e.g. an ON CONFLICT clause): one round trip per batch.
template <class Rows, class Fields, class Run>
void insert_batched(std::string_view insert, std::string_view tail, const Rows& rows,
                    size_t columns, Fields fields, Run run) {
  constexpr size_t per_statement = 500;
  for (size_t start = 0; start < rows.size(); start += per_statement) {
    std::string sql{insert};
    std::vector<std::optional<std::string>> params;
    auto end = std::min(rows.size(), start + per_statement);
    for (size_t i = start; i < end; ++i) {
      sql += i == start ? " (" : ", (";
      for (size_t c = 0; c < columns; ++c)
        sql += (c ? ", $" : "$") + std::to_string(params.size() + c + 1);
      sql += ")";
      fields(rows[i], params);
    }
    sql += tail;
    run(sql, params);
  }
}

}  // namespace

store_backend::graph_write pg_backend::write_graph(const kb_graph_rows& g, int64_t now) {
  // Nodes of a cluster starting together write the same KB's graph: one
  // at a time (FOR UPDATE below locks nothing while the KB has no row).
  run("SELECT pg_advisory_xact_lock(hashtext($1))", {"ragtor.kb_graph." + g.kb});
  auto current = run("SELECT signature FROM kb_graph_state WHERE kb = $1 FOR UPDATE", {g.kb});
  auto plan = graph_write_for(g, current.rows() ? current.text(0, 0) : std::string{});
  if (plan != graph_write::written)
    return plan;
  auto whole = g.base_signature.empty();
  if (whole) {
    run("DELETE FROM entities WHERE kb = $1", {g.kb});
    run("DELETE FROM relations WHERE kb = $1", {g.kb});
  }
  if (!g.removed_entities.empty())
    run("DELETE FROM entities WHERE kb = $1 AND id = ANY($2::text[])",
        {g.kb, text_array(g.removed_entities)});
  if (!g.removed_relations.empty())
    run("DELETE FROM relations WHERE kb = $1 AND id = ANY($2::text[])",
        {g.kb, text_array(g.removed_relations)});
  auto exec = [this](const std::string& sql, std::vector<param>& params) {
    run(sql.c_str(), params, false);  // built per batch: not worth preparing
  };
  insert_batched(
      "INSERT INTO entities (kb, id, name, kind, description) VALUES",
      whole ? ""
            : " ON CONFLICT (kb, id) DO UPDATE SET name = EXCLUDED.name, "
              "kind = EXCLUDED.kind, description = EXCLUDED.description",
      g.entities, 5,
      [&](const graph_entity_row& e, std::vector<param>& p) {
        p.insert(p.end(), {g.kb, e.id, e.name, e.kind, e.description});
      },
      exec);
  insert_batched(
      "INSERT INTO relations (kb, id, source_entity, target_entity, kind, weight, chunk_id) "
      "VALUES",
      whole ? ""
            : " ON CONFLICT (kb, id) DO UPDATE SET source_entity = EXCLUDED.source_entity, "
              "target_entity = EXCLUDED.target_entity, kind = EXCLUDED.kind, "
              "weight = EXCLUDED.weight, chunk_id = EXCLUDED.chunk_id",
      g.relations, 7,
      [&](const graph_relation_row& r, std::vector<param>& p) {
        p.insert(p.end(),
                 {g.kb, r.id, r.source, r.target, r.kind, std::to_string(r.weight), r.chunk_id});
      },
      exec);
  auto [entities, relations] = graph_totals(g);
  run("INSERT INTO kb_graph_state (kb, signature, entities, relations, updated_at) "
      "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kb) DO UPDATE SET signature = EXCLUDED.signature, "
      "entities = EXCLUDED.entities, relations = EXCLUDED.relations, "
      "updated_at = EXCLUDED.updated_at",
      {g.kb, g.signature, std::to_string(entities), std::to_string(relations),
       std::to_string(now)});
  return graph_write::written;
}

std::pair<int64_t, int64_t> pg_backend::graph_size(const std::string& kb) {
  auto r =
      run("SELECT (SELECT COUNT(*) FROM entities WHERE kb = $1), "
          "(SELECT COUNT(*) FROM relations WHERE kb = $1)",
          {kb});
  return {std::stoll(r.text(0, 0)), std::stoll(r.text(0, 1))};
}

// -- API keys ---------------------------------------------------------------------------

bool pg_backend::create_api_key(const api_key_record& k) {
  char rate[32];
  auto res = std::to_chars(rate, rate + sizeof rate, k.rate);
  return run("INSERT INTO api_keys (id, name, hash, tenant, user_prefix, scopes, kbs, rate, burst, "
             "created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL) "
             "ON CONFLICT (name) DO NOTHING",
             {k.id.empty() ? new_id() : k.id, k.name, k.hash, k.tenant, k.user_prefix, k.scopes,
              k.kbs, std::string{rate, res.ptr}, std::to_string(k.burst),
              std::to_string(k.created_at_ms)})
             .affected()
         > 0;
}

std::vector<api_key_record> pg_backend::list_api_keys() {
  auto r = run(
      "SELECT id, name, hash, tenant, user_prefix, scopes, kbs, rate, burst, created_at, "
      "COALESCE(revoked_at, 0) FROM api_keys ORDER BY name");
  std::vector<api_key_record> out;
  for (int i = 0; i < r.rows(); ++i) {
    api_key_record k;
    k.id = r.text(i, 0);
    k.name = r.text(i, 1);
    k.hash = r.text(i, 2);
    k.tenant = r.text(i, 3);
    k.user_prefix = r.text(i, 4);
    k.scopes = r.text(i, 5);
    k.kbs = r.text(i, 6);
    k.rate = std::strtod(r.text(i, 7).c_str(), nullptr);
    k.burst = static_cast<int32_t>(r.integer(i, 8));
    k.created_at_ms = r.integer(i, 9);
    k.revoked_at_ms = r.integer(i, 10);
    out.push_back(std::move(k));
  }
  return out;
}

bool pg_backend::revoke_api_key(const std::string& name, int64_t now) {
  return run("UPDATE api_keys SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL",
             {std::to_string(now), name})
             .affected()
         > 0;
}

// -- KB content ------------------------------------------------------------------------

int64_t pg_backend::put_kb_documents(const std::string& kb, const std::string& settings_json,
                                     const std::vector<document>& docs, int64_t now) {
  auto r = run(
      "INSERT INTO knowledge_bases (name, config, created_at, updated_at, version) "
      "VALUES ($1, $2, $3, $3, 1) ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config, "
      "updated_at = EXCLUDED.updated_at, version = knowledge_bases.version + 1 RETURNING version",
      {kb, settings_json, std::to_string(now)});
  if (r.rows() != 1)
    throw store_error("postgres: no version returned for knowledge base " + kb);
  auto version = r.integer(0, 0);
  for (auto& d : docs)
    run("INSERT INTO documents (kb, id, title, source, content_hash, created_at, version, body) "
        "VALUES ($1, $2, $3, $4, '', $5, $6, $7) ON CONFLICT (kb, id) DO UPDATE SET "
        "title = EXCLUDED.title, source = EXCLUDED.source, version = EXCLUDED.version, "
        "body = EXCLUDED.body",
        {kb, d.id, d.title, d.source, std::to_string(now), std::to_string(version), d.text});
  return version;
}

std::vector<kb_version> pg_backend::list_kb_versions() {
  auto r = run("SELECT name, version, config FROM knowledge_bases ORDER BY name");
  std::vector<kb_version> out;
  for (int i = 0; i < r.rows(); ++i)
    out.push_back(kb_version{r.text(i, 0), r.integer(i, 1), r.text(i, 2)});
  return out;
}

std::vector<document> pg_backend::kb_documents_after(const std::string& kb, int64_t after) {
  auto r = run(
      "SELECT id, title, body, source FROM documents WHERE kb = $1 AND version > $2 "
      "ORDER BY version, id",
      {kb, std::to_string(after)});
  std::vector<document> out;
  for (int i = 0; i < r.rows(); ++i)
    out.push_back(document{r.text(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3)});
  return out;
}

// -- cluster membership ------------------------------------------------------------------

void pg_backend::write_member(const member_info& m) {
  run("INSERT INTO cluster_members (name, address, roles, kbs, started_at, heartbeat_at, status) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO UPDATE SET "
      "address = EXCLUDED.address, roles = EXCLUDED.roles, kbs = EXCLUDED.kbs, "
      "started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, "
      "status = EXCLUDED.status",
      {m.name, m.address, m.roles, m.kbs, std::to_string(m.started_at_ms),
       std::to_string(m.heartbeat_at_ms), m.status});
}

std::vector<member_info> pg_backend::list_members() {
  auto r = run(
      "SELECT name, address, roles, kbs, started_at, heartbeat_at, status FROM cluster_members "
      "ORDER BY name");
  std::vector<member_info> out;
  for (int i = 0; i < r.rows(); ++i) {
    member_info m;
    m.name = r.text(i, 0);
    m.address = r.text(i, 1);
    m.roles = r.text(i, 2);
    m.kbs = r.text(i, 3);
    m.started_at_ms = r.integer(i, 4);
    m.heartbeat_at_ms = r.integer(i, 5);
    m.status = r.text(i, 6);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ragtor
