#include "tests/support/db_reader.hpp"

#include <memory>

#include <sqlite3.h>

namespace ragtor::test {

namespace {

struct db_closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct stmt_finalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using db_ptr = std::unique_ptr<sqlite3, db_closer>;
using stmt_ptr = std::unique_ptr<sqlite3_stmt, stmt_finalizer>;

db_ptr open_readonly(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw db_error{"database " + path.string() + " does not exist"};
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  db_ptr db{raw};
  if (rc != SQLITE_OK)
    throw db_error{"open " + path.string() + ": "
                   + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc))};
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

stmt_ptr prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK)
    throw db_error{"prepare \"" + sql + "\": " + sqlite3_errmsg(db)};
  return stmt_ptr{raw};
}

// Steps once; true while a row is available.
bool step(sqlite3* db, sqlite3_stmt* s) {
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW)
    return true;
  if (rc == SQLITE_DONE)
    return false;
  throw db_error{std::string{"step: "} + sqlite3_errmsg(db)};
}

std::string text_column(sqlite3_stmt* s, int col) {
  auto* p = sqlite3_column_text(s, col);
  if (p == nullptr)
    return {};
  return std::string{reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(s, col))};
}

void bind_text(sqlite3_stmt* s, int index, const std::string& value) {
  sqlite3_bind_text(s, index, value.c_str(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
}

}  // namespace

db_reader::db_reader(std::filesystem::path data_dir) : data_dir_(std::move(data_dir)) {}

std::vector<message_row> db_reader::messages(const std::string& user_id,
                                             const std::string& session_id) const {
  auto db = open_readonly(db_path());
  auto s = prepare(db.get(),
                   "SELECT m.id, m.conversation_id, m.seq, m.role, m.content, m.citations, "
                   "m.completed, m.request_id FROM messages m "
                   "JOIN conversations c ON m.conversation_id = c.id "
                   "WHERE c.user_id = ?1 AND c.session_id = ?2 ORDER BY m.seq");
  bind_text(s.get(), 1, user_id);
  bind_text(s.get(), 2, session_id);
  std::vector<message_row> rows;
  while (step(db.get(), s.get())) {
    message_row r;
    r.id = text_column(s.get(), 0);
    r.conversation_id = text_column(s.get(), 1);
    r.seq = sqlite3_column_int64(s.get(), 2);
    r.role = text_column(s.get(), 3);
    r.content = text_column(s.get(), 4);
    r.citations = text_column(s.get(), 5);
    r.completed = sqlite3_column_int64(s.get(), 6);
    r.request_id = text_column(s.get(), 7);
    rows.push_back(std::move(r));
  }
  return rows;
}

int64_t db_reader::conversation_count(const std::string& user_id) const {
  auto db = open_readonly(db_path());
  auto s = prepare(db.get(), "SELECT count(*) FROM conversations WHERE user_id = ?1");
  bind_text(s.get(), 1, user_id);
  step(db.get(), s.get());
  return sqlite3_column_int64(s.get(), 0);
}

int64_t db_reader::message_count_for_sessions(const std::string& prefix) const {
  auto db = open_readonly(db_path());
  auto s = prepare(db.get(),
                   "SELECT count(*) FROM messages m JOIN conversations c "
                   "ON m.conversation_id = c.id WHERE substr(c.session_id, 1, ?2) = ?1");
  bind_text(s.get(), 1, prefix);
  sqlite3_bind_int(s.get(), 2, static_cast<int>(prefix.size()));
  step(db.get(), s.get());
  return sqlite3_column_int64(s.get(), 0);
}

std::optional<int64_t> db_reader::scalar(const std::string& sql) const {
  auto db = open_readonly(db_path());
  auto s = prepare(db.get(), sql);
  if (!step(db.get(), s.get()))
    return std::nullopt;
  return sqlite3_column_int64(s.get(), 0);
}

std::vector<std::string> db_reader::text_rows(const std::string& sql) const {
  auto db = open_readonly(db_path());
  auto s = prepare(db.get(), sql);
  std::vector<std::string> out;
  while (step(db.get(), s.get())) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(s.get()); ++c) {
      if (c)
        row += '|';
      if (auto text = sqlite3_column_text(s.get(), c))
        row += reinterpret_cast<const char*>(text);
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace ragtor::test
