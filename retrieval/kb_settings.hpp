// Per-knowledge-base settings: the KB's profile (description, keywords —
// what the router matches messages against) and its retrieval defaults
// (agent, top_k, fusion weights, per-leg thresholds). Stored as
// <data_dir>/kbs/<kb>/kb.json next to documents.jsonl, written atomically.
// A KB without kb.json (e.g. created by `ragtor ingest`) uses the defaults.
#pragma once

#include <filesystem>
#include <string_view>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "protocol/kb_settings.hpp"

namespace ragtor {

// The settings of `kb` (defaults named `kb` when it has no kb.json).
caf::expected<kb_settings> load_kb_settings(const std::filesystem::path& data_dir,
                                            std::string_view kb);
// Writes kb.json (temp file, fsync, rename); creates the KB directory.
caf::error save_kb_settings(const std::filesystem::path& data_dir, const kb_settings& s);

}  // namespace ragtor
