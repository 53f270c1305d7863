// The store actor: the façade every persistence request goes through
// (DESIGN §9). Writes are group-committed by the store executor's writer
// thread and answered only after their transaction committed; reads run on
// a second connection. Blocking database calls never run on CAF scheduler
// threads: the façade only queues jobs and delivers response promises when
// a worker thread reports back with `store_done`.
#pragma once

#include <filesystem>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

struct store_options {
  // PostgreSQL when set (libpq DSN); otherwise the SQLite file below.
  std::string postgres_dsn;
  bool postgres_prepared = true;  // `[store] postgres_prepared_statements`
  std::filesystem::path sqlite_path;
  int flush_max_batch = 256;
  int read_connections = 2;
  // Bytes of the per-user recall rows the store keeps between turns
  // (persistence/recall_index.hpp; `[memory] recall_cache_mb`).
  size_t recall_index_bytes = 16u << 20;
  // Run jobs on the façade's own thread (no worker threads), so tests with
  // CAF's deterministic test coordinator see every step. Never in serve.
  bool run_inline = false;
};

// Opens the database, applies pending migrations (blocking, at start-up)
// and spawns the façade. Fails with a clear message when the database
// cannot be opened or migrated.
caf::expected<store_actor> spawn_store(caf::actor_system& sys, const store_options& opts);

}  // namespace ragtor
