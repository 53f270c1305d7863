// Knowledge bases on disk: <data_dir>/kbs/<kb>/documents.jsonl, one
// {"id","title","text","source"} object per line, rewritten atomically
// (temp file + rename) on every ingest. Ingestion reads .txt, .md and
// .jsonl files ({"id","title","text"} per line), walking directories.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "retrieval/document.hpp"

namespace ragtor {

// Documents of one file; a bad .jsonl line is an error naming FILE:LINE.
caf::expected<std::vector<document>> read_documents(const std::filesystem::path& file);

// The stored documents of `kb` (empty when it does not exist yet).
caf::expected<std::vector<document>> load_kb_documents(const std::filesystem::path& data_dir,
                                                       std::string_view kb);

struct ingest_report {
  size_t documents_added = 0;
  size_t documents_replaced = 0;
  size_t chunks = 0;  // chunks in the KB after ingestion
};

// Adds the documents found under `paths` to `kb`; a document whose id is
// already stored replaces it. `progress(done, total)` counts files.
caf::expected<ingest_report> ingest_paths(const std::filesystem::path& data_dir,
                                          const std::string& kb,
                                          const std::vector<std::filesystem::path>& paths,
                                          const std::function<void(size_t, size_t)>& progress);

// Names of the KBs in the data dir, sorted.
std::vector<std::string> list_kbs(const std::filesystem::path& data_dir);

}  // namespace ragtor
