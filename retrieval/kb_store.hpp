// Knowledge bases on disk: <data_dir>/kbs/<kb>/documents.jsonl, one
// {"id","title","text","source"} object per line. The file is the source
// of truth for a KB (indexes are rebuilt from it at start). An ingest of
// only new documents appends their lines (then fdatasync); one that
// replaces a document rewrites the file atomically (temp file, fsync,
// rename), so a replaced text leaves the disk. A crash during an append
// can leave an unfinished last line: that ingest was never acknowledged,
// and the line is ignored when read and cut before the next append.
// Ingestion reads .txt, .md, .html and .jsonl files ({"id","title","text"}
// per line), walking directories. Two ingests into the same KB at once are
// not coordinated: an append finding the file changed since it read it
// rewrites it whole, and the later rename wins.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

#include "retrieval/chunker.hpp"
#include "protocol/document.hpp"
#include "protocol/messages.hpp"

namespace ragtor {

// Documents of one file. .jsonl: one document per non-blank line, "id" and
// "text" required, "title" and "source" optional; a bad line is an error
// naming FILE:LINE. Anything else is one text document: id = file stem,
// title = first "# " heading, else the first non-blank line.
caf::expected<std::vector<document>> read_documents(const std::filesystem::path& file);

// The stored documents of `kb` (empty when it does not exist yet). An
// unfinished last line (an append cut short) is ignored with a warning.
caf::expected<std::vector<document>> load_kb_documents(const std::filesystem::path& data_dir,
                                                       std::string_view kb);

// Adds `docs` to `kb` (created when missing); a document whose id is
// already stored replaces it, a later duplicate in `docs` replaces an
// earlier one. Ids must be non-empty.
caf::expected<ingest_report> ingest_documents(const std::filesystem::path& data_dir,
                                              const std::string& kb, std::vector<document> docs,
                                              const chunker_options& chunking = {});

// The same for several ingests at once: each batch applied in turn, as
// if ingested one after another, with its own report (report.chunks 0,
// report.documents the KB's total after all of them); the KB's file is
// written once. Hands back every document of the KB after them, for a
// caller that indexes them next.
struct added_documents {
  std::vector<ingest_report> reports;  // one per batch, in order
  std::vector<document> all;
};
caf::expected<added_documents> add_documents(const std::filesystem::path& data_dir,
                                             const std::string& kb,
                                             std::vector<std::vector<document>> batches);

// Adds the documents found under `paths` (files, or directories walked
// recursively for .txt/.md/.html/.htm/.jsonl, hidden entries skipped) to `kb`; a
// document whose id is already stored replaces it. Every file is read
// before anything is written, so a bad file leaves the KB untouched.
// `progress(done, total)` counts files read; it may be empty.
caf::expected<ingest_report> ingest_paths(
    const std::filesystem::path& data_dir, const std::string& kb,
    const std::vector<std::filesystem::path>& paths,
    const std::function<void(size_t done, size_t total)>& progress,
    const chunker_options& chunking = {});

// Whether `kb` has a documents file (possibly empty).
bool kb_exists(const std::filesystem::path& data_dir, std::string_view kb);

// Creates an empty KB; errc::conflict when it exists.
caf::error create_kb(const std::filesystem::path& data_dir, std::string_view kb);

// Names of the KBs in the data dir, sorted.
std::vector<std::string> list_kbs(const std::filesystem::path& data_dir);

}  // namespace ragtor
