// `ragtor keys create|list|revoke`: API key administration on the store
// the configuration names (SQLite under the data dir, or PostgreSQL), so
// every node sharing that store sees the change (docs/security.md). The
// CLI talks to the database directly: no server needs to run.
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>

#include "app/commands/commands.hpp"
#include "app/commands/load.hpp"
#include "http/auth.hpp"
#include "persistence/migrations.hpp"
#include "persistence/postgres/pg_backend.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "protocol/errc.hpp"

namespace ragtor {

namespace {

// The store `serve` would open with this configuration, migrated.
std::unique_ptr<store_backend> open_store(const config& cfg) {
  std::unique_ptr<store_backend> db;
  if (cfg.store.backend == "postgres"
      || (cfg.store.backend == "auto" && !cfg.store.postgres_dsn.empty()))
    db = std::make_unique<pg_backend>(cfg.store.postgres_dsn,
                                      cfg.store.postgres_prepared_statements);
  else
    db = std::make_unique<sqlite_backend>(cfg.store.sqlite_path.empty()
                                              ? std::filesystem::path{cfg.data_dir} / "ragtor.db"
                                              : std::filesystem::path{cfg.store.sqlite_path});
  apply_migrations(*db, embedded_migrations());
  return db;
}

std::string time_text(int64_t ms) {
  if (ms == 0)
    return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int run_keys(const keys_options& opts) {
  auto cfg = load_effective_config(opts.common);
  if (!cfg) {
    std::cerr << "ragtor: configuration error: " << error_message(cfg.error()) << "\n";
    return 2;
  }
  try {
    if (opts.action == "create") {
      http::key_spec spec;
      spec.name = opts.name;
      spec.tenant = opts.tenant;
      spec.user_prefix = opts.user_prefix;
      spec.scopes = opts.scopes;
      spec.kbs = opts.kbs;
      spec.rate = opts.rate;
      spec.burst = opts.burst;
      if (auto err = http::validate_key_spec(spec)) {
        std::cerr << "ragtor keys create: --" << err->field << ": " << err->message << "\n";
        return 2;
      }
      auto key = http::generate_api_key();
      auto record = http::record_of(spec, key);
      record.id = new_id();
      record.created_at_ms = now_ms();
      auto db = open_store(*cfg);
      db->begin();
      bool created = db->create_api_key(record);
      db->commit();
      if (!created) {
        std::cerr << "ragtor keys create: an API key named \"" << spec.name << "\" exists\n";
        return 1;
      }
      // The key alone on stdout (shown this once); what it may do on stderr.
      std::cerr << "created API key \"" << spec.name << "\" (scopes " << spec.scopes << "); it is "
                << "shown only now, store it safely\n";
      std::cout << key << "\n";
      return 0;
    }
    auto db = open_store(*cfg);
    if (opts.action == "list") {
      std::cout << std::left << std::setw(24) << "NAME" << std::setw(16) << "TENANT"
                << std::setw(14) << "USER_PREFIX" << std::setw(30) << "SCOPES" << std::setw(16)
                << "KBS" << std::setw(8) << "RATE" << std::setw(7) << "BURST" << std::setw(22)
                << "CREATED" << "REVOKED\n";
      for (auto& k : db->list_api_keys())
        std::cout << std::setw(24) << k.name << std::setw(16) << (k.tenant.empty() ? "-" : k.tenant)
                  << std::setw(14) << (k.user_prefix.empty() ? "-" : k.user_prefix)
                  << std::setw(30) << k.scopes << std::setw(16) << (k.kbs.empty() ? "*" : k.kbs)
                  << std::setw(8) << k.rate << std::setw(7) << k.burst << std::setw(22)
                  << time_text(k.created_at_ms) << time_text(k.revoked_at_ms) << "\n";
      return 0;
    }
    db->begin();
    bool revoked = db->revoke_api_key(opts.name, now_ms());
    db->commit();
    if (!revoked) {
      std::cerr << "ragtor keys revoke: no active API key \"" << opts.name << "\"\n";
      return 1;
    }
    std::cerr << "revoked API key \"" << opts.name << "\" (servers refuse it within [auth] "
              << "key_refresh_ms)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ragtor keys: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ragtor
