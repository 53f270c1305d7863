// Read-only look into a server's SQLite database (<data_dir>/ragtor.db) so
// integration tests can check what was persisted. Every call opens its own
// read-only connection: safe next to a running server (WAL) and after a
// restart, and each call sees the latest committed state.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ragtor::test {

class db_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct message_row {
  std::string id;
  std::string conversation_id;
  int64_t seq = 0;
  std::string role;
  std::string content;
  std::string citations;  // as stored (JSON text), "" when NULL
  int64_t completed = -1;
  std::string request_id;  // "" when NULL
};

class db_reader {
public:
  explicit db_reader(std::filesystem::path data_dir);

  std::filesystem::path db_path() const { return data_dir_ / "ragtor.db"; }

  // Messages of the conversation of (user_id, session_id), by seq.
  std::vector<message_row> messages(const std::string& user_id,
                                    const std::string& session_id) const;

  // Number of conversations of `user_id` (any session).
  int64_t conversation_count(const std::string& user_id) const;

  // Number of messages of all conversations whose session_id starts with
  // `prefix`.
  int64_t message_count_for_sessions(const std::string& prefix) const;

  // The first column of the first row of `sql` as an integer (for ad-hoc
  // checks); nullopt when there is no row.
  std::optional<int64_t> scalar(const std::string& sql) const;

  // Every row of `sql`, each column as text joined by '|' (NULL as "").
  std::vector<std::string> text_rows(const std::string& sql) const;

private:
  std::filesystem::path data_dir_;
};

}  // namespace ragtor::test
