// `ragtor ingest`: adds documents to a knowledge base in the data dir, with
// a progress bar when stderr is a terminal. On a cluster node's config
// ([cluster] listen set) the KB's documents are also written to the shared
// store under a new version, so every node serving the KB picks them up
// (docs/cluster.md).
#include <cstdio>
#include <iostream>

#include <unistd.h>

#include "app/commands/commands.hpp"
#include "app/commands/load.hpp"
#include "persistence/migrations.hpp"
#include "persistence/postgres/pg_backend.hpp"
#include "protocol/errc.hpp"
#include "retrieval/kb_settings.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor {

int run_ingest(const ingest_options& opts) {
  auto cfg = load_effective_config(opts.common);
  if (!cfg) {
    std::cerr << "ragtor: configuration error: " << error_message(cfg.error()) << "\n";
    return 2;
  }
  bool tty = isatty(STDERR_FILENO) != 0;
  auto progress = [tty](size_t done, size_t total) {
    if (!tty || total == 0)
      return;
    constexpr int width = 40;
    auto filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu documents", filled,
                 "########################################", width - filled, "", done, total);
    if (done == total)
      std::fputc('\n', stderr);
    std::fflush(stderr);
  };
  auto report = ingest_paths(cfg->data_dir, opts.kb, opts.paths, progress,
                             kb_build_options_of(*cfg).chunking);
  if (!report) {
    std::cerr << "ragtor ingest: " << error_message(report.error()) << "\n";
    return 1;
  }
  std::cout << "ingested into \"" << opts.kb << "\": " << report->documents_added << " added, "
            << report->documents_replaced << " replaced, " << report->chunks << " chunks\n";
  if (cfg->cluster.listen.empty())
    return 0;
  // A cluster: the whole KB into the shared store (replacing by id), one
  // blocking transaction; this is a command, not an actor.
  auto docs = load_kb_documents(cfg->data_dir, opts.kb);
  auto settings = load_kb_settings(cfg->data_dir, opts.kb);
  if (!docs || !settings) {
    std::cerr << "ragtor ingest: " << error_message(docs ? settings.error() : docs.error()) << "\n";
    return 1;
  }
  try {
    pg_backend db{cfg->store.postgres_dsn, cfg->store.postgres_prepared_statements};
    apply_migrations(db, embedded_migrations());
    db.begin();
    auto version = db.put_kb_documents(opts.kb, to_json(*settings), *docs, now_ms());
    db.commit();
    std::cout << "stored in the cluster's store as version " << version << " of \"" << opts.kb
              << "\" (" << docs->size() << " documents)\n";
  } catch (const store_error& e) {
    std::cerr << "ragtor ingest: cannot write to the cluster's store: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ragtor
