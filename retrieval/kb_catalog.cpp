#include "retrieval/kb_catalog.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "retrieval/kb_store.hpp"

namespace ragtor {

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

std::shared_ptr<const kb_snapshot> kb_catalog::build_snapshot(kb_settings settings,
                                                              const std::vector<document>& docs,
                                                              const kb_build_options& opts) {
  auto snap = std::make_shared<kb_snapshot>();
  snap->name = settings.name;
  snap->settings = std::move(settings);
  snap->documents = docs.size();
  for (auto& d : docs)
    for (auto& c : chunk_document(d, opts.chunking))
      snap->chunks.push_back(std::move(c));
  auto started = std::chrono::steady_clock::now();
  snap->index = bm25_index::build(snap->chunks, opts.bm25);
  if (opts.embed && !snap->chunks.empty()) {
    std::vector<std::string> texts;
    texts.reserve(snap->chunks.size());
    for (auto& c : snap->chunks)
      texts.push_back(c.title + "\n" + c.text);
    auto vecs = opts.embed->embed(texts);
    if (auto* rows = std::get_if<embedding_batch>(&vecs)) {
      std::vector<float> flat;
      flat.reserve(rows->size() * opts.embed->dims());
      for (auto& r : *rows)
        flat.insert(flat.end(), r.begin(), r.end());
      snap->vectors = vector_index::build(std::move(flat), opts.embed->dims(), opts.vectors);
      snap->embed = opts.embed;
    } else {
      spdlog::warn("knowledge base \"{}\": embedding failed ({}); vector search disabled",
                   snap->name, std::get<std::string>(vecs));
    }
  }
  snap->graph = entity_graph::build(snap->chunks, opts.graph);
  snap->build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
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
