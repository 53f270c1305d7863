#include "app/commands/load.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace ragtor {

caf::expected<config> load_effective_config(const common_options& opts) {
  std::filesystem::path file = opts.config_file;
  if (file.empty() && std::filesystem::exists("config/ragtor.toml"))
    file = "config/ragtor.toml";
  auto cfg = load_config(file, current_environment());
  if (!cfg)
    return cfg;
  if (!opts.data_dir.empty())
    cfg->data_dir = opts.data_dir;
  return cfg;
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("ragtor");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
}

kb_build_options kb_build_options_of(const config& cfg) {
  kb_build_options opts;
  opts.chunking.max_chars = cfg.retrieval.chunk_max_chars;
  opts.chunking.overlap_chars = cfg.retrieval.chunk_overlap_chars;
  opts.bm25 = {cfg.retrieval.bm25_k1, cfg.retrieval.bm25_b};
  return opts;
}

}  // namespace ragtor
