// The graph agent's index, built at ingestion without a language model
// (DESIGN §6): per chunk, its salient entities — runs of capitalised words
// and acronyms ("Port Quellin", "BRCA1") and its highest tf-idf terms that
// are neither ubiquitous nor unique — linked by co-occurrence in a chunk.
// Local search finds the entities a query names, adds their strongest
// neighbours (the multi-hop step BM25 cannot take), and ranks the chunks
// that mention them; global search ranks topics (connected groups of
// strongly linked entities) by their overlap with the query.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/document.hpp"
#include "protocol/messages.hpp"
#include "retrieval/bm25_index.hpp"

namespace ragtor {

struct graph_options {
  size_t salient_per_chunk = 5;
  double max_df_fraction = 0.1;
  size_t max_neighbours = 16;
};

class entity_graph {
public:
  static entity_graph build(const std::vector<chunk>& chunks, graph_options opts = {});
  // The same, taking the chunks' terms from `index`, a BM25 index of
  // these chunks (it tokenized them as the graph does) instead of
  // tokenizing them again.
  static entity_graph build(const std::vector<chunk>& chunks, const bm25_index& index,
                            graph_options opts = {});
  // The same, where `previous` (or null) is the graph of the chunks before an ingest
  // and chunk i has the title and text of its chunk previous_row[i] (-1:
  // none): such a chunk's named phrases are taken from `previous` instead
  // of found in its text again, and every phrase is tokenized once across
  // the builds of a KB. The graph is the one a build from nothing makes.
  static entity_graph build(const std::vector<chunk>& chunks, const bm25_index& index,
                            graph_options opts, const entity_graph* previous,
                            std::span<const int64_t> previous_row);

  struct local_result {
    std::vector<std::pair<uint32_t, double>> chunks;  // best first
    std::vector<std::string> entity_ids;              // "e:<key>"
    std::vector<std::string> relation_ids;            // "r:<a>|<b>"
  };
  local_result local_search(std::string_view query, size_t k) const;

  struct topic_hit {
    std::string id;       // "c:<n>"
    std::string summary;  // "Topic: A, B, C"
    double score = 0;
    std::vector<uint32_t> chunks;
  };
  std::vector<topic_hit> global_search(std::string_view query, size_t k) const;

  // The graph as rows of the entities/relations tables: every entity, and
  // every kept link (each entity's strongest neighbours) once, with a chunk
  // where both occur; `chunks` are the ones the graph was built from.
  kb_graph_rows rows(std::string kb, const std::vector<chunk>& chunks) const;
  // What an ingest writes instead: the rows that turn `before`'s (the
  // KB's graph built from `before_chunks`) into this graph's, made against
  // before's signature (kb_graph_rows). Rows that did not change are never
  // built, so this costs a fraction of rows() on a large KB.
  // `before_signature`, when given, is before's rows_signature(before_chunks),
  // known already (not computed again).
  kb_graph_rows rows_since(const entity_graph& before, const std::vector<chunk>& before_chunks,
                           std::string kb, const std::vector<chunk>& chunks,
                           std::string_view before_signature = {}) const;
  // rows(kb, chunks).signature, without building the rows.
  std::string rows_signature(const std::vector<chunk>& chunks) const;

  // The graph as bytes for an index snapshot, and back (nullopt for bytes
  // that are not a whole graph of `chunk_count` chunks): a restart loads
  // it instead of building it again.
  std::string serialize() const;
  static std::optional<entity_graph> deserialize(std::string_view data, size_t chunk_count);

  size_t entity_count() const { return entities_.size(); }
  size_t relation_count() const { return relation_count_; }
  size_t topic_count() const { return topics_.size(); }
  // Named phrases in the book this graph's builds share (0 for a graph
  // read from a snapshot), and how many of them its chunks hold.
  size_t phrases_known() const;
  size_t phrases_in_use() const { return phrases_in_use_; }

private:
  friend struct graph_rows;
  struct entity {
    std::string key;   // tokenize() terms joined by ' '
    std::string name;  // display form
    std::vector<uint32_t> chunks;
    std::vector<std::pair<uint32_t, uint32_t>> neighbours;  // (entity, weight), strongest first
    std::vector<uint32_t> shared_chunk;  // per neighbour: the first chunk both are in
    double idf = 0;
    int32_t topic = -1;
  };
  struct topic {
    std::string summary;
    std::vector<uint32_t> entities;
    std::vector<uint32_t> chunks;
  };
  std::vector<uint32_t> match(std::string_view query) const;
  // Each entity's chunks, links, kept neighbours and idf from the chunks'
  // mentions (chunk c's entities, ascending, are
  // mentions[mention_start[c]..mention_start[c + 1])).
  void link(const std::vector<uint32_t>& mentions, const std::vector<uint32_t>& mention_start,
            size_t max_neighbours);
  // The entity of `key`, added (and found by its first term) when new;
  // true when it was.
  std::pair<uint32_t, bool> enter(const std::string& key);

  std::vector<entity> entities_;
  std::unordered_map<std::string, uint32_t> by_key_;
  std::unordered_map<std::string, std::vector<uint32_t>> by_term_;  // first term -> entities
  std::vector<topic> topics_;
  size_t relation_count_ = 0;
  // The named phrases of the KB's chunks, each tokenized once, shared by
  // the graphs built one from another (it only grows, so a graph's ids
  // stay valid; a build starts a new one when it holds more than twice
  // the phrases in use). Only builds read it. Null in a graph read from a
  // snapshot: the next build finds every chunk's phrases again.
  struct phrase_book;
  std::shared_ptr<phrase_book> phrases_;
  // Per chunk, the ids of the named phrases in its text, in order: chunk
  // c's are phrase_ids_[phrase_start_[c]..phrase_start_[c + 1]).
  std::vector<uint32_t> phrase_ids_, phrase_start_;
  size_t phrases_in_use_ = 0;
  // What global search reads: each entity's key tokenized as a query is
  // (tokenize(key)), and each such term's topics; made at the first
  // global search (most graphs never get one), shared by copies.
  struct key_terms {
    std::once_flag once;
    std::vector<std::vector<std::string>> of_entity;
    std::unordered_map<std::string, std::vector<uint32_t>> topics_of;  // ascending
  };
  std::shared_ptr<key_terms> key_terms_ = std::make_shared<key_terms>();
  const key_terms& tokenized_keys() const;
};

}  // namespace ragtor
