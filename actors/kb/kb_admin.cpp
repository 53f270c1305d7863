#include "actors/kb/kb_admin.hpp"

#include <chrono>
#include <functional>
#include <memory>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor {

namespace {

struct kb_admin_state {
  static inline const char* name = "kb_admin";
  std::filesystem::path data_dir;
  std::shared_ptr<kb_catalog> catalog;
  kb_build_options opts;
  uint64_t ingests = 0;
  uint64_t documents = 0;
  double last_build_ms = 0;
  store_actor store;
  uint64_t graphs_written = 0, graph_failures = 0;
};

using self_ptr = kb_admin_actor::stateful_pointer<kb_admin_state>;

// Writes the KB's entity graph to the store's entities/relations tables
// (skipped by the store when that version is there already), then calls
// `next` whatever the outcome: the graph is derived data.
void store_graph(self_ptr self, const std::shared_ptr<const kb_snapshot>& snap,
                 std::function<void()> next) {
  auto& st = self->state;
  if (!st.store || !snap)
    return next();
  auto rows = snap->graph.rows(snap->name, snap->chunks);
  auto kb = snap->name;
  self->request(st.store, std::chrono::minutes(5), atom::kb_graph_v, std::move(rows))
      .then(
          [=](bool written) {
            if (written) {
              ++self->state.graphs_written;
              spdlog::info("knowledge base \"{}\": entity graph stored ({} entities, {} links)", kb,
                           snap->graph.entity_count(), snap->graph.relation_count());
            }
            next();
          },
          [=](caf::error& err) {
            ++self->state.graph_failures;
            spdlog::warn("knowledge base \"{}\": entity graph not stored: {}", kb,
                         self->system().render(err));
            next();
          });
}

}  // namespace

kb_admin_actor spawn_kb_admin(caf::actor_system& sys, std::filesystem::path data_dir,
                              std::shared_ptr<kb_catalog> catalog, kb_build_options opts,
                              store_actor store) {
  return sys.spawn<caf::detached>([data_dir, catalog, opts,
                                   store](self_ptr self) -> kb_admin_actor::behavior_type {
    auto& st = self->state;
    st.data_dir = data_dir;
    st.catalog = catalog;
    st.opts = opts;
    st.store = store;
    return {
        [=](atom::kb_create, kb_settings& s) -> caf::result<kb_settings> {
          auto& st = self->state;
          if (auto problem = validate(s))
            return make_error(errc::invalid_request, *problem);
          if (kb_exists(st.data_dir, s.name) || st.catalog->get(s.name))
            return make_error(errc::conflict, "knowledge base \"" + s.name + "\" already exists");
          // Settings first: a crash in between leaves a KB without
          // documents file, which list_kbs ignores and create retries.
          if (auto err = save_kb_settings(st.data_dir, s))
            return err;
          if (auto err = create_kb(st.data_dir, s.name))
            return err;
          st.catalog->put(kb_catalog::build_snapshot(s, {}, st.opts));
          spdlog::info("knowledge base \"{}\" created", s.name);
          return s;
        },
        [=](atom::kb_ingest, const std::string& kb,
            std::vector<document>& docs) -> caf::result<ingest_report> {
          auto& st = self->state;
          auto current = st.catalog->get(kb);
          if (!current || !kb_exists(st.data_dir, kb))
            return make_error(errc::not_found, "unknown knowledge base \"" + kb
                                                   + "\"; create it with POST /api/v1/kbs");
          auto count = docs.size();
          auto report = ingest_documents(st.data_dir, kb, std::move(docs), st.opts.chunking);
          if (!report)
            return std::move(report.error());
          auto started = std::chrono::steady_clock::now();
          auto stored = load_kb_documents(st.data_dir, kb);
          if (!stored)
            return std::move(stored.error());
          auto snap =
              kb_catalog::build_snapshot(current->settings, *stored, st.opts, current.get());
          st.catalog->put(snap);
          st.last_build_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count();
          ++st.ingests;
          st.documents += count;
          spdlog::info("knowledge base \"{}\": {} added, {} replaced, {} chunks ({:.0f} ms)", kb,
                       report->documents_added, report->documents_replaced, report->chunks,
                       st.last_build_ms);
          // Answered once the entity graph is in the database too.
          auto rp = self->make_response_promise<ingest_report>();
          store_graph(self, snap, [rp, r = *report]() mutable { rp.deliver(r); });
          return rp;
        },
        [=](atom::kb_graph) -> caf::result<int64_t> {
          auto names = self->state.catalog->names();
          auto rp = self->make_response_promise<int64_t>();
          auto left = std::make_shared<size_t>(names.size());
          if (names.empty())
            rp.deliver(int64_t{0});
          for (auto& name : names)
            store_graph(self, self->state.catalog->get(name), [=]() mutable {
              if (--*left == 0)
                rp.deliver(static_cast<int64_t>(names.size()));
            });
          return rp;
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          w.begin_object()
              .field("kind", "kb_admin")
              .field("name", "kb_admin")
              .field("ingests", st.ingests)
              .field("documents_ingested", st.documents)
              .field("last_build_ms", st.last_build_ms)
              .field("graphs_stored", st.graphs_written)
              .field("graph_failures", st.graph_failures)
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
