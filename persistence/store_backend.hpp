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

#include "protocol/messages.hpp"

namespace ragtor {

class store_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class store_backend {
public:
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

  // Runs a script of statements (migrations).
  virtual void execute_script(std::string_view sql) = 0;
  // Versions recorded in schema_migrations (creating the table if needed).
  virtual std::vector<int> applied_migrations() = 0;
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

  // The last `limit` messages of a conversation, oldest first.
  virtual std::vector<stored_message> history(const std::string& conversation_id,
                                              int32_t limit) = 0;
};

// A random 128-bit id as 32 hex characters.
std::string new_id();

// Milliseconds since the epoch.
int64_t now_ms();

}  // namespace ragtor
