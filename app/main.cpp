// ragtor's entry point: parses the command line (CLI11) and runs a
// subcommand. The composition root of the server is app/commands/serve.cpp.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "app/commands/commands.hpp"

namespace {

// What `serve` asks of glibc's allocator when GLIBC_TUNABLES is not set.
constexpr const char* serve_tunables = "glibc.malloc.tcache_count=64";

// glibc's per-thread cache keeps at most 7 free chunks of each size; a turn
// allocates and frees dozens of strings and messages of a few sizes on
// every thread, and the rest went through the arena: malloc and free were
// ~14 % of the server's CPU at 64 streams, and with 64 chunks per size the
// server served 9 % more turns/s on the mean of four rounds
// (docs/performance.md, nineteenth session). glibc reads the cache's size
// only from GLIBC_TUNABLES at start, so `serve` sets it and starts itself
// once again: same process, same arguments. An operator's GLIBC_TUNABLES (even empty) is kept as it is:
// set it under valgrind or heaptrack, which a second start would leave.
void tune_malloc_for_serve(int argc, char** argv) {
  if (argc < 2 || std::string_view{argv[1]} != "serve" || std::getenv("GLIBC_TUNABLES"))
    return;
  setenv("GLIBC_TUNABLES", serve_tunables, 1);
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES");  // not started again (no /proc): glibc's defaults
}

}  // namespace

int main(int argc, char** argv) {
  tune_malloc_for_serve(argc, argv);
  CLI::App app{"ragtor: a RAG chat backend built as an actor runtime"};
  app.require_subcommand(1);

  ragtor::serve_options serve;
  auto* serve_cmd = app.add_subcommand("serve", "run the HTTP/SSE chat server");
  serve_cmd->add_option("--config", serve.common.config_file,
                        "TOML configuration file (default: ./config/ragtor.toml if present)");
  serve_cmd->add_option("--listen", serve.listen, "HOST:PORT to listen on (port 0 = any free)");
  serve_cmd->add_option("--data-dir", serve.common.data_dir, "directory for KBs and the database");

  ragtor::ingest_options ingest;
  auto* ingest_cmd =
      app.add_subcommand("ingest", "add .txt/.md/.jsonl documents to a knowledge base");
  ingest_cmd->add_option("--config", ingest.common.config_file, "TOML configuration file");
  ingest_cmd->add_option("--data-dir", ingest.common.data_dir,
                         "directory for KBs and the database");
  ingest_cmd->add_option("--kb", ingest.kb, "knowledge base name")->required();
  ingest_cmd->add_option("paths", ingest.paths, "files or directories")->required();

  ragtor::keys_options keys;
  auto* keys_cmd = app.add_subcommand("keys", "create, list and revoke API keys");
  keys_cmd->require_subcommand(1);
  auto common = [&keys](CLI::App* cmd) {
    cmd->add_option("--config", keys.common.config_file, "TOML configuration file");
    cmd->add_option("--data-dir", keys.common.data_dir, "directory for KBs and the database");
  };
  auto* create_cmd = keys_cmd->add_subcommand("create", "create a key; prints it (only now)");
  common(create_cmd);
  create_cmd->add_option("--name", keys.name, "unique name of the key")->required();
  create_cmd->add_option("--tenant", keys.tenant, "tenant label");
  create_cmd->add_option("--user-prefix", keys.user_prefix,
                         "the key acts only for user ids starting with this");
  create_cmd->add_option("--scopes", keys.scopes, "chat,kb:read,kb:write,admin (default chat)");
  create_cmd->add_option("--kbs", keys.kbs, "knowledge bases the key may use (default all)");
  create_cmd->add_option("--rate", keys.rate, "requests per second, 0 = no limit (default 10)");
  create_cmd->add_option("--burst", keys.burst, "requests at once (default 20)");
  auto* list_cmd = keys_cmd->add_subcommand("list", "list keys (never the keys themselves)");
  common(list_cmd);
  auto* revoke_cmd = keys_cmd->add_subcommand("revoke", "revoke a key by name");
  common(revoke_cmd);
  revoke_cmd->add_option("name", keys.name, "the key's name")->required();

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed())
    return ragtor::run_serve(serve);
  if (keys_cmd->parsed()) {
    keys.action = create_cmd->parsed() ? "create" : list_cmd->parsed() ? "list" : "revoke";
    return ragtor::run_keys(keys);
  }
  return ragtor::run_ingest(ingest);
}
