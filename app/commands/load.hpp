// Shared start-up steps of the subcommands: configuration and logging.
#pragma once

#include <caf/expected.hpp>

#include "app/commands/commands.hpp"
#include "config/config.hpp"
#include "protocol/errc.hpp"

namespace ragtor {

// Loads the configuration file named by `opts` (or the default one) with
// environment overrides, then applies the command-line overrides.
caf::expected<config> load_effective_config(const common_options& opts);

// Routes spdlog to stderr at `level`.
void setup_logging(const std::string& level);

}  // namespace ragtor
