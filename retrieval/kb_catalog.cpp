#include "retrieval/kb_catalog.hpp"
#include "protocol/log.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <span>

#include "protocol/elapsed.hpp"
#include "protocol/errc.hpp"
#include "retrieval/atomic_file.hpp"
#include "retrieval/binary_io.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor {

namespace {
const log::component lg{"retrieval"};
}  // namespace

namespace {

// Identifies the documents and every option that shapes the indexes.
std::string snapshot_signature(const std::vector<document>& docs, const kb_build_options& opts) {
  // The hash of a binary::writer's finish() after put_string(id, title,
  // text) of every document, computed as it goes instead of buffered.
  binary::hasher h;
  for (auto& d : docs) {
    h.put_string(d.id);
    h.put_string(d.title);
    h.put_string(d.text);
  }
  auto content = h.hash_of_finished();
  return "v1 docs=" + std::to_string(docs.size()) + " hash=" + std::to_string(content)
         + " chunk=" + std::to_string(opts.chunking.max_chars) + "/"
         + std::to_string(opts.chunking.overlap_chars) + " bm25=" + std::to_string(opts.bm25.k1)
         + "/" + std::to_string(opts.bm25.b)
         + " embed=" + (opts.embed ? opts.embed->name() : std::string{"none"});
}

// A chunk's title and text, as the previous snapshot holds them.
struct chunk_text {
  std::string_view title, text;
  bool operator==(const chunk_text&) const = default;
};
struct chunk_text_hash {
  size_t operator()(const chunk_text& c) const {
    std::hash<std::string_view> h;
    return h(c.text) * 31 + h(c.title);
  }
};

// A document's id, title and text hashed, each with its length.
uint64_t document_hash(const document& d) {
  std::hash<std::string_view> h;
  uint64_t x = 0;
  for (std::string_view part :
       {std::string_view{d.id}, std::string_view{d.title}, std::string_view{d.text}})
    x = (x ^ h(part)) * 0x9E3779B97F4A7C15ull + part.size();
  return x;
}

// `d`'s chunks in `previous`, when they can stand for chunking it again:
// the same chunking, the same hash of its id, title and text, and every
// chunk's title and text still what the document holds at its offset.
std::span<const chunk> reusable_chunks(const kb_snapshot* previous, const document& d,
                                       uint64_t hash, const chunker_options& opts) {
  if (!previous || previous->chunked_with != opts)
    return {};
  auto known = previous->chunks_by_document.find(d.id);
  if (known == previous->chunks_by_document.end() || known->second.hash != hash
      || size_t{known->second.first} + known->second.count > previous->chunks.size())
    return {};
  auto chunks = std::span{previous->chunks}.subspan(known->second.first, known->second.count);
  for (auto& c : chunks)
    if (c.doc_id != d.id || c.title != d.title || c.offset > d.text.size()
        || std::string_view{d.text}.substr(c.offset, c.text.size()) != c.text)
      return {};
  return chunks;
}

// The documents' chunks, in order, an unchanged document's taken from
// `previous` (reusable_chunks); returns each chunk's row in `previous`
// when it was taken from there, else -1.
std::vector<int64_t> chunk_documents(kb_snapshot& snap, const std::vector<document>& docs,
                                     const chunker_options& opts, const kb_snapshot* previous) {
  snap.chunked_with = opts;
  snap.chunks_by_document.reserve(docs.size());
  std::vector<int64_t> taken_from;
  for (auto& d : docs) {
    auto hash = document_hash(d);
    auto first = static_cast<uint32_t>(snap.chunks.size());
    if (auto same = reusable_chunks(previous, d, hash, opts); !same.empty()) {
      snap.chunks.insert(snap.chunks.end(), same.begin(), same.end());
      snap.chunks_reused += same.size();
      auto row = same.data() - previous->chunks.data();
      for (size_t i = 0; i < same.size(); ++i)
        taken_from.push_back(row + static_cast<int64_t>(i));
    } else {
      for (auto& c : chunk_document(d, opts))
        snap.chunks.push_back(std::move(c));
      taken_from.resize(snap.chunks.size(), -1);
    }
    snap.chunks_by_document[d.id] = {hash, first,
                                     static_cast<uint32_t>(snap.chunks.size()) - first};
  }
  return taken_from;
}

// A snapshot file read whole, and where its payload is in it.
struct snapshot_file {
  std::string data;
  size_t offset = 0, size = 0;
  std::string_view payload() const { return std::string_view{data}.substr(offset, size); }
};

// The snapshot file written for `signature`, if any. The signature is
// read first, so the snapshot of other documents (an ingest's) is not read
// further; a matching one is read in one go, and its payload not copied.
std::optional<snapshot_file> read_snapshot(const std::filesystem::path& file,
                                           const std::string& signature) {
  std::ifstream in{file, std::ios::binary};
  uint64_t n = 0;
  if (!in || !in.read(reinterpret_cast<char*>(&n), sizeof n) || n != signature.size())
    return std::nullopt;
  std::string sig(n, '\0');
  if (!in.read(sig.data(), static_cast<std::streamsize>(n)) || sig != signature)
    return std::nullopt;
  std::error_code ec;
  auto bytes = std::filesystem::file_size(file, ec);
  if (ec || !in.seekg(0))
    return std::nullopt;
  snapshot_file f;
  f.data.resize(bytes);
  if (!in.read(f.data.data(), static_cast<std::streamsize>(bytes)))
    return std::nullopt;
  binary::reader r{f.data};
  std::string_view stored;
  uint64_t size = 0;
  if (!r.get_view(stored) || stored != signature || !r.get(size))
    return std::nullopt;
  f.offset = 2 * sizeof(uint64_t) + stored.size();
  f.size = size;
  if (!r.skip(size) || !r.at_end())
    return std::nullopt;
  return f;
}

// The file a binary::writer would make of put_string(signature),
// put_string(payload) and finish(), written in pieces (the payload, up to
// tens of MB, is not copied).
void write_snapshot(const std::filesystem::path& file, const std::string& signature,
                    const std::string& payload) {
  binary::hasher h;
  h.put_string(signature);
  h.put_string(payload);
  uint64_t signature_size = signature.size(), payload_size = payload.size(), sum = h.checksum();
  std::string_view pieces[] = {binary::writer::bytes_of(signature_size), signature,
                               binary::writer::bytes_of(payload_size), payload,
                               binary::writer::bytes_of(sum)};
  if (auto err = write_file_atomically(file, pieces))
    lg->warn("cannot write index snapshot {}: {}", file.string(), error_message(err));
}

}  // namespace

std::vector<retrieval_item> kb_snapshot::search(std::string_view query, size_t k) const {
  std::vector<retrieval_item> out;
  for (auto& [idx, score] : index.search(query, k)) {
    if (score <= 0)
      continue;
    auto& c = chunks[idx];
    retrieval_item item;
    item.result_id = c.chunk_id;
    item.granularity = "chunk";
    item.evidence = c.text;
    item.evidence_tokens = c.prompt_tokens;
    item.source = "bm25";
    item.score = score;
    item.source_id = c.chunk_id;
    item.source_type = "chunk";
    item.doc_id = c.doc_id;
    item.title = c.title;
    item.kb_prefix = name;
    out.push_back(std::move(item));
  }
  return out;
}

const std::string& kb_snapshot::graph_rows_signature() const {
  std::call_once(graph_signature_once_, [&] { graph_signature_ = graph.rows_signature(chunks); });
  return graph_signature_;
}

const fusion_policy& kb_snapshot::fusion() const {
  std::call_once(fusion_once_, [&] { fusion_ = choose_fusion(settings, embed.get()); });
  return fusion_;
}

void kb_snapshot::remember_graph_rows_signature(const std::string& signature) const {
  std::call_once(graph_signature_once_, [&] { graph_signature_ = signature; });
}

std::shared_ptr<const kb_snapshot> kb_catalog::build_snapshot(
    kb_settings settings, const std::vector<document>& docs, const kb_build_options& opts,
    const kb_snapshot* previous, std::vector<std::function<void()>>* later) {
  auto snap = std::make_shared<kb_snapshot>();
  snap->name = settings.name;
  snap->settings = std::move(settings);
  snap->documents = docs.size();
  auto started = std::chrono::steady_clock::now();
  auto stage_from = started;
  auto stage = [&](std::string_view name) {
    snap->build_stages.emplace_back(name, ms_since(stage_from));
    stage_from = std::chrono::steady_clock::now();
  };
  auto taken_from = chunk_documents(*snap, docs, opts.chunking, previous);
  stage("chunks");
  auto index_dir = opts.snapshot_dir.empty() ? std::filesystem::path{}
                                             : opts.snapshot_dir / "kbs" / snap->name / "index";
  auto signature = snapshot_signature(docs, opts);
  stage("signature");
  // An index file written now, or its write queued in `later`; its
  // payload is serialised when written.
  auto keep = [later](std::filesystem::path file, std::string sig,
                      std::function<std::string()> payload) {
    auto write = [file = std::move(file), sig = std::move(sig), payload = std::move(payload)] {
      if (auto bytes = payload(); !bytes.empty())
        write_snapshot(file, sig, bytes);
    };
    if (later)
      later->push_back(std::move(write));
    else
      write();
  };
  bool have_bm25 = false, have_vectors = !opts.embed;
  if (!index_dir.empty()) {
    if (auto body = read_snapshot(index_dir / "bm25.bin", signature))
      if (auto idx = bm25_index::deserialize(body->payload());
          idx && idx->size() == snap->chunks.size()) {
        snap->index = std::move(*idx);
        have_bm25 = true;
      }
    if (opts.embed)
      if (auto body = read_snapshot(index_dir / "vectors.bin", signature)) {
        binary::reader r{body->payload()};
        uint64_t dims = 0;
        std::vector<float> rows;
        if (r.get(dims) && r.get_array(rows) && r.at_end() && dims > 0
            && rows.size() == dims * snap->chunks.size()) {
          // Above vector_exact_below the HNSW graph is kept too, so a
          // restart neither re-embeds nor rebuilds it.
          auto graph = read_snapshot(index_dir / "hnsw.bin", signature);
          snap->vectors = vector_index::build(std::move(rows), dims, opts.vectors,
                                              graph ? graph->payload() : std::string_view{});
          snap->embed = opts.embed;
          have_vectors = true;
        }
      }
  }
  snap->loaded_from_snapshot = !index_dir.empty() && have_bm25 && have_vectors;
  // Chunks the previous snapshot already indexed (same title and text):
  // row -> previous row, or -1; found when an index is built. A chunk
  // taken from it with its document is its row there; the others are
  // looked up by their texts among the previous chunks no document took
  // (a changed document's unchanged paragraphs).
  auto text_of = [](const chunk& c) { return c.title + "\n" + c.text; };
  std::vector<int64_t> previous_row;
  auto previous_rows = [&]() -> const std::vector<int64_t>& {
    if (previous_row.size() == snap->chunks.size())
      return previous_row;
    previous_row = taken_from;
    if (!previous || std::find(previous_row.begin(), previous_row.end(), -1) == previous_row.end())
      return previous_row;
    std::vector<bool> taken(previous->chunks.size(), false);
    for (auto r : previous_row)
      if (r >= 0)
        taken[static_cast<size_t>(r)] = true;
    std::unordered_map<chunk_text, size_t, chunk_text_hash> known;
    for (size_t i = 0; i < previous->chunks.size(); ++i)
      if (!taken[i])
        known.emplace(chunk_text{previous->chunks[i].title, previous->chunks[i].text}, i);
    for (size_t i = 0; i < snap->chunks.size(); ++i)
      if (previous_row[i] < 0)
        if (auto k = known.find(chunk_text{snap->chunks[i].title, snap->chunks[i].text});
            k != known.end())
          previous_row[i] = static_cast<int64_t>(k->second);
    return previous_row;
  };
  if (!have_bm25) {
    snap->index = previous && previous->index.size() == previous->chunks.size()
                      ? bm25_index::build(snap->chunks, opts.bm25, previous->index, previous_rows())
                      : bm25_index::build(snap->chunks, opts.bm25);
    if (!index_dir.empty())
      keep(index_dir / "bm25.bin", signature, [snap] { return snap->index.serialize(); });
    stage("bm25");
  }
  if (!have_vectors && !snap->chunks.empty()) {
    // Vectors the previous snapshot computed with the same embedder.
    bool same_embedder = previous && previous->embed == opts.embed
                         && previous->vectors.dims() == opts.embed->dims()
                         && previous->vectors.size() == previous->chunks.size();
    auto& row_before = previous_rows();
    std::vector<std::string> texts;
    std::vector<size_t> missing;  // chunk rows to embed
    for (size_t i = 0; i < snap->chunks.size(); ++i)
      if (!same_embedder || row_before[i] < 0) {
        texts.push_back(text_of(snap->chunks[i]));
        missing.push_back(i);
      }
    auto vecs = texts.empty() ? std::variant<embedding_batch, std::string>{embedding_batch{}}
                              : opts.embed->embed(texts);
    if (auto* rows = std::get_if<embedding_batch>(&vecs)) {
      auto dims = opts.embed->dims();
      std::vector<float> flat(snap->chunks.size() * dims);
      size_t next = 0;
      for (size_t i = 0; i < snap->chunks.size(); ++i) {
        auto* to = flat.data() + i * dims;
        if (next < missing.size() && missing[next] == i) {
          auto& v = (*rows)[next++];
          std::copy(v.begin(), v.end(), to);
        } else {
          previous->vectors.copy_row(static_cast<size_t>(row_before[i]), to);
        }
      }
      if (missing.size() < snap->chunks.size())
        lg->debug("knowledge base \"{}\": embedded {} of {} chunks", snap->name, missing.size(),
                  snap->chunks.size());
      snap->vectors = vector_index::build(std::move(flat), opts.embed->dims(), opts.vectors);
      if (!index_dir.empty())
        // Taken from the index when written: it keeps the rows as given.
        keep(index_dir / "vectors.bin", signature, [snap] {
          binary::writer w;
          w.put<uint64_t>(snap->vectors.dims());
          w.put_array(snap->vectors.rows());
          return w.finish();
        });
      snap->embed = opts.embed;
    } else {
      lg->warn("knowledge base \"{}\": embedding failed ({}); vector search disabled",
                   snap->name, std::get<std::string>(vecs));
    }
  }
  if (!have_vectors)
    stage("vectors");
  if (!index_dir.empty() && snap->vectors.uses_hnsw() && !snap->vectors.graph_loaded()) {
    keep(index_dir / "hnsw.bin", signature, [snap] { return snap->vectors.graph_bytes(); });
  } else if (!index_dir.empty() && !snap->vectors.uses_hnsw()) {
    // A graph from when this KB was above vector_exact_below (or the
    // threshold lower): no longer read, so not kept.
    std::error_code ignored;
    std::filesystem::remove(index_dir / "hnsw.bin", ignored);
  }
  // The entity graph: from its snapshot when the documents and options
  // are the same (a restart), else built and its snapshot written.
  auto graph_signature = signature + " graph=" + std::to_string(opts.graph.salient_per_chunk) + "/"
                         + std::to_string(opts.graph.max_df_fraction) + "/"
                         + std::to_string(opts.graph.max_neighbours);
  std::optional<entity_graph> graph;
  if (!index_dir.empty())
    if (auto body = read_snapshot(index_dir / "graph.bin", graph_signature))
      graph = entity_graph::deserialize(body->payload(), snap->chunks.size());
  if (graph) {
    snap->graph = std::move(*graph);
  } else {
    snap->loaded_from_snapshot = false;
    // Named phrases of chunks the previous graph has (same title and
    // text) are taken from it.
    snap->graph = entity_graph::build(snap->chunks, snap->index, opts.graph,
                                      previous ? &previous->graph : nullptr, previous_rows());
    if (!index_dir.empty())
      keep(index_dir / "graph.bin", graph_signature, [snap] { return snap->graph.serialize(); });
    stage("graph");
  }
  snap->build_ms = ms_since(started);
  return snap;
}

std::shared_ptr<const kb_snapshot> kb_catalog::build_snapshot(std::string name,
                                                              const std::vector<document>& docs,
                                                              const kb_build_options& opts) {
  kb_settings settings;
  settings.name = std::move(name);
  return build_snapshot(std::move(settings), docs, opts);
}

caf::expected<std::shared_ptr<kb_catalog>> kb_catalog::load(const std::filesystem::path& data_dir,
                                                            const kb_build_options& opts) {
  auto catalog = std::make_shared<kb_catalog>();
  for (auto& name : list_kbs(data_dir)) {
    auto settings = load_kb_settings(data_dir, name);
    if (!settings)
      return std::move(settings.error());
    auto docs = load_kb_documents(data_dir, name);
    if (!docs)
      return std::move(docs.error());
    catalog->put(build_snapshot(std::move(*settings), *docs, opts));
  }
  return catalog;
}

std::shared_ptr<const kb_snapshot> kb_catalog::get(std::string_view kb) const {
  std::lock_guard lock{mx_};
  auto i = kbs_.find(kb);
  return i == kbs_.end() ? nullptr : i->second;
}

std::vector<std::string> kb_catalog::names() const {
  std::lock_guard lock{mx_};
  std::vector<std::string> out;
  for (auto& [name, snap] : kbs_)
    out.push_back(name);
  return out;
}

void kb_catalog::put(std::shared_ptr<const kb_snapshot> snapshot) {
  if (!snapshot)
    return;
  std::lock_guard lock{mx_};
  auto name = snapshot->name;
  kbs_[name] = std::move(snapshot);
}

}  // namespace ragtor
