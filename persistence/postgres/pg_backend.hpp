// The PostgreSQL backend (libpq): production and clusters, several ragtor
// nodes sharing one database. Synchronous libpq calls are fine here because
// a backend is only ever driven by a store worker thread (the store
// executor), never by a CAF scheduler thread; each connection belongs to
// one thread. A broken connection is re-established with PQreset before the
// next transaction or read, so the server recovers by itself when the
// database returns.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "persistence/store_backend.hpp"
#include "protocol/text.hpp"

struct pg_conn;
struct pg_result;

namespace ragtor {

class pg_backend final : public store_backend {
public:
  // Connects; throws store_error (without the password) on failure.
  // `prepare`: statements with parameters are prepared on the connection
  // the first time they run (`[store] postgres_prepared_statements`).
  explicit pg_backend(std::string dsn, bool prepare = true);
  ~pg_backend() override;
  pg_backend(const pg_backend&) = delete;
  pg_backend& operator=(const pg_backend&) = delete;

  std::string_view backend_name() const override { return "postgres"; }

  void begin() override;
  void commit() override;
  void rollback() override;
  void savepoint() override;
  void release_savepoint() override;
  void rollback_to_savepoint() override;

  // One pipeline for a turn's context reads (store_backend::read_ahead);
  // what no call took is dropped at end_read().
  void read_ahead(const turn_reads& reads) override;
  void end_read() noexcept override;

  void execute_script(std::string_view sql) override;
  std::vector<int> applied_migrations() override;
  void record_migration(int version, std::string_view name, int64_t now_ms) override;

  turn_opened begin_turn(const std::string& user_id, const std::string& session_id,
                         const std::string& content, const std::string& request_id,
                         int64_t now_ms) override;
  std::string finish_turn(const stored_message& msg, int64_t now_ms) override;
  bool find_turn(const std::string& request_id, const std::string& user_id,
                 stored_message& out) override;
  std::vector<stored_message> history(const std::string& conversation_id, int32_t limit) override;
  conversation_page list_conversations(const std::string& user_id, int32_t limit,
                                       const std::string& cursor) override;
  std::string conversation_owner(const std::string& conversation_id) override;
  std::vector<stored_message> messages_page(const std::string& conversation_id, int32_t limit,
                                            int64_t before_seq) override;
  bool delete_conversation(const std::string& conversation_id) override;
  int64_t clear_conversation(const std::string& user_id, const std::string& session_id) override;
  std::string toggle_feedback(const feedback_vote& vote, int64_t now_ms) override;
  std::string core_memory(const std::string& user_id) override;
  bool add_memory(const memory_record& m) override;
  void add_episode(const episode_record& e) override;
  summary_record load_summary(const std::string& conversation_id) override;
  graph_write write_graph(const kb_graph_rows& g, int64_t now_ms) override;
  std::pair<int64_t, int64_t> graph_size(const std::string& kb) override;
  std::string load_flow_state(const std::string& conversation_id) override;
  bool save_flow_state(const std::string& conversation_id, const std::string& state_json,
                       int64_t now_ms) override;
  bool save_summary(const summary_record& s, int64_t expected_version, int64_t now_ms) override;
  std::vector<episode_record> recent_episodes(const std::string& user_id, int32_t limit,
                                              bool texts = true) override;
  std::vector<episode_record> recent_episode_keys(const std::string& user_id, int32_t limit,
                                                  int64_t since_ms = all_time,
                                                  int64_t* after = nullptr) override;
  std::vector<std::string> episode_texts(const std::vector<std::string>& ids) override;
  std::vector<memory_record> list_memories(const std::string& user_id, int64_t now_ms,
                                           int64_t since_ms = all_time,
                                           int64_t* after = nullptr) override;
  int64_t recall_epoch(const std::string& user_id) override;
  int64_t delete_memories(const std::string& user_id, const std::string& id) override;
  void set_core_memory(const std::string& user_id, const std::string& profile_json,
                       int64_t now_ms) override;
  bool create_api_key(const api_key_record& k) override;
  std::vector<api_key_record> list_api_keys() override;
  bool revoke_api_key(const std::string& name, int64_t now_ms) override;
  int64_t put_kb_documents(const std::string& kb, const std::string& settings_json,
                           const std::vector<document>& docs, int64_t now_ms) override;
  std::vector<kb_version> list_kb_versions() override;
  std::vector<document> kb_documents_after(const std::string& kb, int64_t after) override;
  void write_member(const member_info& m) override;
  void lock_schema() override;
  void unlock_schema() override;
  std::vector<member_info> list_members() override;

  // Round trips to the server on this connection so far (a pipeline is
  // one), for tests and benches.
  uint64_t round_trips() const { return round_trips_; }

private:
  class result;
  using param = std::optional<std::string>;  // nullopt = SQL NULL
  struct statement {
    const char* sql;
    std::vector<param> params;
    bool prepare = true;  // false: SQL built per call, never prepared
  };
  struct read_ahead_result;
  struct outcome;  // a statement's result, or its error
  // Runs one statement with $1..$n text parameters; throws store_error.
  // One with parameters is prepared on the connection the first time
  // (prepare_ on, `prepare` true: SQL built per call passes false). The
  // result of the same statement read ahead is taken instead when there
  // is one.
  result run(const char* sql, const std::vector<param>& params = {}, bool prepare = true);
  result run(const statement& s);
  // Runs `list` in one round trip (with the control statements waiting);
  // throws the first one's error that failed.
  std::vector<result> run_all(std::vector<statement> list);
  // After a failed round trip: true to go again on a connection made
  // again (a statement outside a transaction, the first attempt); else
  // throws `msg` (libpq's message when empty).
  bool again_after(bool retryable, int attempt, std::string msg);
  // The name `sql` is prepared under on this connection; nullptr when it
  // is not (yet).
  const std::string* prepared_name(const char* sql) const;
  std::string next_statement_name();
  // Sends the control statements waiting (pending_), then `list`, in one
  // pipeline: each statement's result or error in `out`. False when the
  // connection broke on the way.
  bool exchange(std::span<const statement> list, std::vector<outcome>& out);
  // The statements of a turn's context read, built in one place for the
  // calls and for read_ahead().
  static statement messages_statement(std::string_view conversation_id, int32_t limit,
                                      int64_t before_seq);
  static statement summary_statement(std::string_view conversation_id);
  static statement core_memory_statement(std::string_view user_id);
  static statement recall_epoch_statement(std::string_view user_id);
  static statement memories_statement(std::string_view user_id, int64_t now_ms, int64_t since_ms);
  static statement episode_keys_statement(std::string_view user_id, int32_t limit,
                                          int64_t since_ms);
  // The connection was made again: its prepared statements are gone.
  void reset_connection();
  void ensure_connected();
  // Raises the recall epoch of the user (of the conversation's owner).
  void bump_recall_epoch(const std::string& user_id);
  void bump_recall_epoch_of(const std::string& conversation_id);
  static statement message_statement(const std::string& id, const std::string& conversation_id,
                                     std::string_view role, const std::string& content,
                                     const std::string& citations, bool completed,
                                     const std::string& request_id, int64_t now_ms);
  bool find_message(const std::string& conversation_id, const std::string& request_id,
                    std::string_view role, stored_message& out);

  std::string dsn_;
  pg_conn* conn_ = nullptr;
  bool prepare_ = true;
  // Statements prepared on this connection: SQL text -> statement name.
  // Found by the statement's text without copying it (every run()).
  std::unordered_map<std::string, std::string, string_hash, std::equal_to<>> prepared_;
  uint64_t statements_named_ = 0;
  uint64_t round_trips_ = 0;
  std::vector<read_ahead_result> ahead_;
  // Control statements (BEGIN, SAVEPOINT, RELEASE) not sent yet: they go
  // with the next statement, in one round trip.
  std::vector<const char*> pending_;
  bool in_transaction_ = false;
  // The connection was made again inside a transaction: what it wrote is
  // gone, and its COMMIT must fail.
  bool transaction_lost_ = false;
};

}  // namespace ragtor
