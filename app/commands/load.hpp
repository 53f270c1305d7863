// Shared start-up steps of the subcommands: configuration and logging.
#pragma once

#include <caf/expected.hpp>

#include "app/commands/commands.hpp"
#include "config/config.hpp"
#include "llm/openai_client.hpp"
#include "protocol/errc.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

// Loads the configuration file named by `opts` (or the default one) with
// environment overrides, then applies the command-line overrides.
caf::expected<config> load_effective_config(const common_options& opts);

// How knowledge bases are chunked and indexed under this configuration
// (the same for `serve` and `ingest`).
kb_build_options kb_build_options_of(const config& cfg);

// How to reach an OpenAI-compatible endpoint at `base_url` for `model`:
// the [llm] key (or OPENAI_API_KEY), CA file, timeouts and retries.
llm::endpoint_config endpoint_of(const config& cfg, std::string base_url, std::string model);

// Routes spdlog to stderr at `level`.
void setup_logging(const std::string& level);

}  // namespace ragtor
