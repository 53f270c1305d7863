// ragtor's entry point: parses the command line (CLI11) and runs a
// subcommand. The composition root of the server is app/commands/serve.cpp.
#include <iostream>

#include <CLI/CLI.hpp>

#include "app/commands/commands.hpp"

int main(int argc, char** argv) {
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

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed())
    return ragtor::run_serve(serve);
  return ragtor::run_ingest(ingest);
}
