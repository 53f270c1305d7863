// The knowledge bases a node serves: immutable snapshots (chunks + BM25
// index) shared read-only by retrieval agents and swapped atomically when a
// KB changes, so searches never see a half-built index.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "protocol/messages.hpp"
#include "retrieval/bm25_index.hpp"
#include "retrieval/chunker.hpp"

namespace ragtor {

struct kb_snapshot {
  std::string name;
  std::vector<chunk> chunks;
  bm25_index index;

  // The top `k` chunks for `query` as retrieval items (zero scores dropped).
  std::vector<retrieval_item> search(std::string_view query, size_t k) const;
};

class kb_catalog {
public:
  // Loads every KB stored under `data_dir`.
  static caf::expected<std::shared_ptr<kb_catalog>> load(const std::filesystem::path& data_dir,
                                                         const chunker_options& chunking,
                                                         const bm25_params& bm25 = {});

  static std::shared_ptr<const kb_snapshot> build_snapshot(std::string name,
                                                           const std::vector<document>& docs,
                                                           const chunker_options& chunking,
                                                           const bm25_params& bm25 = {});

  // nullptr when `kb` is unknown.
  std::shared_ptr<const kb_snapshot> get(std::string_view kb) const;
  std::vector<std::string> names() const;
  // Adds or replaces a KB's snapshot.
  void put(std::shared_ptr<const kb_snapshot> snapshot);

private:
  mutable std::mutex mx_;
  std::map<std::string, std::shared_ptr<const kb_snapshot>, std::less<>> kbs_;
};

}  // namespace ragtor
