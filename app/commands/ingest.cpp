// `ragtor ingest`: adds documents to a knowledge base in the data dir, with
// a progress bar when stderr is a terminal.
#include <cstdio>
#include <iostream>

#include <unistd.h>

#include "app/commands/commands.hpp"
#include "app/commands/load.hpp"
#include "protocol/errc.hpp"
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
  return 0;
}

}  // namespace ragtor
