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

}  // namespace ragtor
