#include "app/commands/load.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>

#include "llm/openai_client.hpp"
#include "llm/openai_embedder.hpp"
#include "protocol/log.hpp"
#include "protocol/log_throttle.hpp"

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
  log::rebind();
}

kb_build_options kb_build_options_of(const config& cfg) {
  kb_build_options opts;
  opts.chunking.max_chars = cfg.retrieval.chunk_max_chars;
  opts.chunking.overlap_chars = cfg.retrieval.chunk_overlap_chars;
  opts.bm25 = {cfg.retrieval.bm25_k1, cfg.retrieval.bm25_b};
  opts.vectors.exact_below = cfg.retrieval.vector_exact_below;
  opts.snapshot_dir = cfg.data_dir;
  if (cfg.retrieval.embedder == "none") {
    opts.embed = nullptr;
  } else if (cfg.retrieval.embedder == "openai") {
    auto ec =
        endpoint_of(cfg,
                    cfg.retrieval.embedding_base_url.empty() ? cfg.llm.base_url
                                                             : cfg.retrieval.embedding_base_url,
                    cfg.retrieval.embedding_model);
    opts.embed = make_openai_embedder(std::make_shared<llm::openai_client>(ec),
                                      static_cast<size_t>(cfg.retrieval.embedding_batch));
  } else {
    opts.embed = make_hashed_embedder(cfg.retrieval.hashed_dims);
  }
  return opts;
}

llm::endpoint_config endpoint_of(const config& cfg, std::string base_url, std::string model) {
  llm::endpoint_config ec;
  ec.base_url = std::move(base_url);
  ec.model = std::move(model);
  ec.api_key = cfg.llm.api_key;
  if (ec.api_key.empty())
    if (auto* key = std::getenv("OPENAI_API_KEY"))
      ec.api_key = key;
  ec.ca_file = cfg.llm.ca_file;
  ec.connect_timeout = std::chrono::milliseconds{cfg.llm.connect_timeout_ms};
  ec.first_token_timeout = std::chrono::seconds{cfg.llm.first_token_timeout_s};
  ec.idle_timeout = std::chrono::seconds{cfg.llm.idle_timeout_s};
  ec.total_timeout = std::chrono::seconds{cfg.llm.total_timeout_s};
  ec.max_retries = cfg.llm.max_retries;
  // At the open-file limit model calls wait for a descriptor: say so, at
  // most once a second per endpoint.
  auto throttle = std::make_shared<log_throttle>();
  ec.on_descriptor_wait = [throttle, url = ec.base_url](std::chrono::milliseconds waited) {
    if (throttle->allow())
      log::get("llm").warn(
          "llm {}: no file descriptor free for a model connection (the open-file limit); "
          "a call has waited {} ms (ragtor_llm_descriptor_waits_total)",
          url, waited.count());
  };
  return ec;
}

}  // namespace ragtor
