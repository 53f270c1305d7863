// The knowledge bases a node serves: immutable snapshots (chunks + BM25
// index) shared read-only by retrieval agents and swapped atomically when a
// KB changes, so searches never see a half-built index.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/expected.hpp>

#include "protocol/messages.hpp"
#include "retrieval/bm25_index.hpp"
#include "retrieval/chunker.hpp"
#include "retrieval/embedder.hpp"
#include "retrieval/entity_graph.hpp"
#include "retrieval/fusion_policy.hpp"
#include "retrieval/kb_settings.hpp"
#include "retrieval/vector_index.hpp"

namespace ragtor {

// How a KB's snapshot is built from its documents.
struct kb_build_options {
  chunker_options chunking;
  bm25_params bm25;
  std::shared_ptr<embedder> embed = make_hashed_embedder();  // null = no vector leg
  // Where index snapshots live (<dir>/kbs/<kb>/index/); "" = none. A
  // snapshot is reused when the documents and these options are unchanged,
  // so a restart neither re-indexes nor re-embeds.
  std::filesystem::path snapshot_dir;
  vector_index_options vectors;
  graph_options graph;
};

struct kb_snapshot {
  std::string name;
  kb_settings settings;
  size_t documents = 0;
  std::vector<chunk> chunks;
  bm25_index index;
  std::shared_ptr<embedder> embed;  // null when the KB has no vector leg
  vector_index vectors;
  entity_graph graph;
  double build_ms = 0;
  // What the build spent, stage by stage ("chunks", "bm25", "graph", ...),
  // in ms: the KB admin logs it with each ingest.
  std::vector<std::pair<std::string_view, double>> build_stages;
  bool loaded_from_snapshot = false;  // BM25, vectors and graph all read from disk
  // Each document's chunks (chunks[first, first + count)) and a hash of
  // its id, title and text, with the chunking they were made by: the next
  // build takes an unchanged document's chunks from here instead of
  // chunking it again. chunks_reused: how many this build took.
  struct document_chunks {
    uint64_t hash = 0;
    uint32_t first = 0, count = 0;
  };
  std::unordered_map<std::string, document_chunks> chunks_by_document;
  chunker_options chunked_with;
  size_t chunks_reused = 0;

  // The top `k` chunks for `query` as retrieval items (zero scores dropped).
  std::vector<retrieval_item> search(std::string_view query, size_t k) const;

  // The signature of the entity graph's rows (graph.rows_signature(chunks)),
  // computed once: the next ingest's changed rows are made against it.
  const std::string& graph_rows_signature() const;
  // Remembers that signature when computed elsewhere (the changed rows'
  // `signature` made this snapshot's graph); a signature already known is
  // kept.
  void remember_graph_rows_signature(const std::string& signature) const;

  // The fusion rule and weights its searches use (choose_fusion over its
  // settings and embedder), chosen on the first search, not on each.
  const fusion_policy& fusion() const;

private:
  mutable std::once_flag graph_signature_once_;
  mutable std::string graph_signature_;
  mutable std::once_flag fusion_once_;
  mutable fusion_policy fusion_;
};

class kb_catalog {
public:
  // Loads and indexes every KB stored under `data_dir`; a KB file that
  // cannot be read fails the whole load (serving a KB silently missing
  // documents would be worse than not starting).
  static caf::expected<std::shared_ptr<kb_catalog>> load(const std::filesystem::path& data_dir,
                                                         const kb_build_options& opts);

  // Chunks and indexes `docs` (in order) into a snapshot named `name`;
  // building happens outside the lock, put() is the atomic swap.
  // With `previous` (the KB's current snapshot), chunks whose text it
  // already embedded reuse those vectors: an ingest embeds only new or
  // changed chunks (what costs with a remote embedding model).
  //
  // With `later`, the index files (a cache of the documents file) are not
  // written here: their writes are appended to it, for the caller to run
  // once it has answered (an ingest's reply does not wait for them).
  static std::shared_ptr<const kb_snapshot> build_snapshot(
      kb_settings settings, const std::vector<document>& docs, const kb_build_options& opts,
      const kb_snapshot* previous = nullptr, std::vector<std::function<void()>>* later = nullptr);
  // The same with default settings named `name`.
  static std::shared_ptr<const kb_snapshot> build_snapshot(std::string name,
                                                           const std::vector<document>& docs,
                                                           const kb_build_options& opts);

  // nullptr when `kb` is unknown.
  std::shared_ptr<const kb_snapshot> get(std::string_view kb) const;
  std::vector<std::string> names() const;
  // Adds or replaces a KB's snapshot; readers holding the old one keep
  // using it until they drop it. A null snapshot is ignored.
  void put(std::shared_ptr<const kb_snapshot> snapshot);

private:
  mutable std::mutex mx_;
  std::map<std::string, std::shared_ptr<const kb_snapshot>, std::less<>> kbs_;
};

}  // namespace ragtor
