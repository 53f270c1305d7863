#include "retrieval/kb_info_json.hpp"

#include "protocol/json_writer.hpp"
#include "protocol/kb_settings.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

namespace {

void write_kb_info(json_writer& w, const kb_snapshot& snap) {
  w.begin_object().key("settings").raw(to_json(snap.settings));
  w.field("documents", static_cast<uint64_t>(snap.documents))
      .field("chunks", static_cast<uint64_t>(snap.chunks.size()));
  w.key("indexes").begin_object();
  w.key("bm25").begin_object().field("chunks", static_cast<uint64_t>(snap.index.size()));
  w.end_object();
  w.end_object();
  w.end_object();
}

}  // namespace

std::string kb_info_json(const kb_snapshot& snap) {
  json_writer w;
  write_kb_info(w, snap);
  return w.take();
}

std::string kb_list_json(const std::vector<std::shared_ptr<const kb_snapshot>>& snaps) {
  json_writer w;
  w.begin_object().key("kbs").begin_array();
  for (auto& s : snaps)
    if (s)
      write_kb_info(w, *s);
  w.end_array().end_object();
  return w.take();
}

}  // namespace ragtor
