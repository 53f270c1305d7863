// The embedded SQLite backend (the zero-config default): WAL journal,
// synchronous=FULL (a commit survives power loss), foreign keys on,
// prepared statements cached per connection. One connection per instance,
// used by one thread at a time.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>

#include "persistence/store_backend.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace ragtor {

class sqlite_backend final : public store_backend {
public:
  // Opens (creating the file and its directory if needed). Throws store_error.
  explicit sqlite_backend(const std::filesystem::path& path);
  ~sqlite_backend() override;
  sqlite_backend(const sqlite_backend&) = delete;
  sqlite_backend& operator=(const sqlite_backend&) = delete;

  std::string_view backend_name() const override { return "sqlite"; }

  // Bytes the open connections hold (page caches, schemas, prepared
  // statements: sqlite3_db_status), as each last published it: at its
  // opening and after each job. SQLite's own process-wide count
  // (sqlite3_memory_used) is off: it took one mutex for every allocation
  // (docs/performance.md, "SQLite's allocation mutex").
  static int64_t memory_used();
  void after_job() noexcept override;

  void begin() override;
  void commit() override;
  void rollback() override;
  void savepoint() override;
  void release_savepoint() override;
  void rollback_to_savepoint() override;

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
  void begin_read() override;
  void end_read() noexcept override;
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
  std::vector<member_info> list_members() override;

private:
  bool read_open_ = false;  // begin_read() opened a transaction
  class statement;
  class statement_use;
  statement_use prepare(const char* sql);
  void exec(const char* sql);
  // Raises the recall epoch of the user (of the conversation's owner).
  void bump_recall_epoch(const std::string& user_id);
  void bump_recall_epoch_of(const std::string& conversation_id);
  int64_t next_seq(const std::string& conversation_id);
  std::string insert_message(const std::string& conversation_id, int64_t seq, std::string_view role,
                             const std::string& content, const std::string& citations,
                             bool completed, const std::string& request_id, int64_t now_ms,
                             bool touch_conversation = true);
  std::vector<stored_message> read_messages(statement_use& st, const std::string& conversation_id);
  bool find_message(const std::string& conversation_id, const std::string& request_id,
                    std::string_view role, stored_message& out);

  void publish_memory() noexcept;

  sqlite3* db_ = nullptr;
  std::unordered_map<const char*, std::unique_ptr<statement>> statements_;
  int64_t published_bytes_ = 0;  // this connection's part of memory_used()
  int64_t fixed_bytes_ = 0;       // its schema and statements, when last measured
  size_t measured_statements_ = static_cast<size_t>(-1);
};

}  // namespace ragtor
