#include "actors/request_timeout.hpp"
#include "actors/kb/kb_admin.hpp"
#include "protocol/log.hpp"
#include "actors/admin/measured.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/elapsed.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "retrieval/kb_settings.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor {

namespace {
const log::component lg{"kb"};
}  // namespace

namespace {

struct queued_ingest {
  std::vector<document> docs;
  int64_t version = 0;  // the store's version of the KB with them; 0 = no store
  caf::typed_response_promise<ingest_report> rp;
};

struct ingest_queue {
  std::vector<queued_ingest> ingests;  // in the store, waiting for the next build
  size_t storing = 0;                  // ingests whose store write is in flight
  bool build_sent = false;             // the build's message is on its way
};

// Ingests one build applies at most; more wait for the next.
constexpr size_t max_ingests_per_build = 64;

using file_writes = std::vector<std::function<void()>>;

// A snapshot's index files (a cache of its documents file), written after
// its ingests are answered.
struct index_job {
  std::shared_ptr<const kb_snapshot> snapshot;
  std::shared_ptr<file_writes> writes;
};

// The index files waiting for the index writer: per KB only the newest
// snapshot's (a newer one replaces an older one still waiting).
struct pending_indexes {
  std::mutex mx;
  std::map<std::string, index_job> jobs;

  void put(index_job job) {
    std::lock_guard lock{mx};
    auto kb = job.snapshot->name;
    jobs[kb] = std::move(job);
  }
  // What waits for `kb` ("": every KB), taken.
  std::vector<index_job> take(const std::string& kb) {
    std::lock_guard lock{mx};
    std::vector<index_job> out;
    for (auto i = jobs.begin(); i != jobs.end();)
      if (kb.empty() || i->first == kb) {
        out.push_back(std::move(i->second));
        i = jobs.erase(i);
      } else {
        ++i;
      }
    return out;
  }
};

// Writes a job's files, unless its snapshot is no longer the catalog's
// (a later ingest's writes its own).
void write_index_files(const kb_catalog& catalog, const index_job& job) {
  if (catalog.get(job.snapshot->name) != job.snapshot)
    return;
  auto started = std::chrono::steady_clock::now();
  for (auto& write : *job.writes)
    write();
  lg->debug("knowledge base \"{}\": {} index files written in {:.0f} ms", job.snapshot->name,
            job.writes->size(), ms_since(started));
}

// The index writer: a detached actor (its own thread; the writes are
// blocking file work, a quarter of a second for a SciFact-sized KB), so
// that the KB admin takes the next ingest at once. Told a KB's name, it
// writes what waits for it (nothing when an earlier message took it). It
// watches the KB admin, and when the admin is gone writes whatever still
// waits, then ends.
caf::behavior index_writer(caf::event_based_actor* self, std::shared_ptr<pending_indexes> pending,
                           std::shared_ptr<kb_catalog> catalog, caf::actor admin) {
  pthread_setname_np(pthread_self(), "kb-index");  // detached: its own thread
  self->monitor(admin);
  self->set_down_handler([=](caf::down_msg&) {
    for (auto& job : pending->take(""))
      write_index_files(*catalog, job);
    self->quit();
  });
  return {
      [=](const std::string& kb) {
        for (auto& job : pending->take(kb))
          write_index_files(*catalog, job);
      },
  };
}

struct kb_admin_state {
  static inline const char* name = "kb_admin";
  std::filesystem::path data_dir;
  std::shared_ptr<kb_catalog> catalog;
  kb_build_options opts;
  uint64_t ingests = 0;
  uint64_t builds = 0;  // fewer than ingests when several were applied at once
  uint64_t documents = 0;
  // Per KB: ingests in the store, waiting for its next build.
  std::map<std::string, ingest_queue> queued;
  double last_build_ms = 0;
  store_actor store;
  uint64_t graphs_written = 0, graph_failures = 0;
  // KB content through the store (docs/cluster.md): the store version of
  // each KB whose documents are applied here, and how often to look.
  std::chrono::milliseconds sync_interval{0};
  std::map<std::string, int64_t> synced;
  bool syncing = false;
  bool sync_again = false;   // a version was announced during a sync
  bool tick_pending = false;  // the next periodic look is scheduled
  cluster_actor cluster;      // told of every version written here
  uint64_t syncs = 0, synced_documents = 0, sync_failures = 0;
  // Ingests' index files, and the detached actor that writes them
  // (spawned at the first ingest).
  std::shared_ptr<pending_indexes> waiting_indexes = std::make_shared<pending_indexes>();
  caf::actor indexes_writer;
};

using self_ptr = measured_pointer<kb_admin_actor, kb_admin_state>;

// Sends `rows` of snap's entity graph to the store; when they are a change
// to a graph the store does not hold (another node's, or a write that
// failed), sends every row instead. Calls `next` whatever the outcome: the
// graph is derived data.
void write_graph(self_ptr self, std::shared_ptr<const kb_snapshot> snap, kb_graph_rows rows,
                 std::function<void()> next) {
  auto change = !rows.base_signature.empty();
  auto changed = rows.entities.size() + rows.relations.size() + rows.removed_entities.size()
                 + rows.removed_relations.size();
  auto kb = snap->name;
  auto entities = rows.entity_count, relations = rows.relation_count;
  tidy_request(self, self->state.store, std::chrono::minutes(5), atom::kb_graph_v, std::move(rows))
      .then(
          [=](bool written) {
            if (written) {
              ++self->state.graphs_written;
              lg->info(
                  "knowledge base \"{}\": entity graph stored ({} entities, {} relations; "
                  "{})",
                  kb, entities, relations,
                  change ? std::to_string(changed) + " rows changed" : "every row written");
            }
            next();
          },
          [=](caf::error& err) {
            if (change && code_of(err) == errc::conflict) {
              lg->info(
                  "knowledge base \"{}\": the store holds another entity graph, or "
                  "none; writing every row",
                  kb);
              return write_graph(self, snap, snap->graph.rows(snap->name, snap->chunks), next);
            }
            ++self->state.graph_failures;
            lg->warn("knowledge base \"{}\": entity graph not stored: {}", kb,
                     self->system().render(err));
            next();
          });
}

// Writes snap's entity graph to the store's entities/relations tables:
// after an ingest only the rows that differ from `before`'s graph, which
// the store should hold. Without `before` (at start), first an empty
// change against the graph itself: the store holds it already (nothing
// built or written), or it answers conflict and gets every row.
void store_graph(self_ptr self, const std::shared_ptr<const kb_snapshot>& snap,
                 const std::shared_ptr<const kb_snapshot>& before, std::function<void()> next) {
  if (!self->state.store || !snap)
    return next();
  kb_graph_rows rows;
  if (before) {
    auto started = std::chrono::steady_clock::now();
    rows = snap->graph.rows_since(before->graph, before->chunks, snap->name, snap->chunks,
                                  before->graph_rows_signature());
    snap->remember_graph_rows_signature(rows.signature);
    lg->debug("knowledge base \"{}\": the entity graph's changed rows in {:.0f} ms", snap->name,
              ms_since(started));
  } else {
    rows.kb = snap->name;
    rows.signature = rows.base_signature = snap->graph_rows_signature();
  }
  write_graph(self, snap, std::move(rows), std::move(next));
}

// <data_dir>/kbs/<kb>/store_version: the store version applied here.
std::filesystem::path version_file(const std::filesystem::path& data_dir, const std::string& kb) {
  return data_dir / "kbs" / kb / "store_version";
}

int64_t read_version(const std::filesystem::path& data_dir, const std::string& kb) {
  std::ifstream in{version_file(data_dir, kb)};
  int64_t v = 0;
  in >> v;
  return in ? v : 0;
}

void write_version(const std::filesystem::path& data_dir, const std::string& kb, int64_t v) {
  auto file = version_file(data_dir, kb);
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out{tmp, std::ios::trunc};
    out << v << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec)
    lg->warn("knowledge base \"{}\": cannot record store version {}: {}", kb, v, ec.message());
}

// Version `v` of `kb` is applied here (an ingest of this node, or a sync).
// An ingest's own version counts only when it follows the last one applied:
// otherwise another node's ingest in between is still to be read.
void note_version(self_ptr self, const std::string& kb, int64_t v, bool whole) {
  auto& cur = self->state.synced[kb];
  if (whole ? v > cur : v == cur + 1) {
    cur = v;
    write_version(self->state.data_dir, kb, v);
  }
}

struct applied_ingest {
  std::vector<ingest_report> reports;                   // one per batch
  std::shared_ptr<const kb_snapshot> snapshot, before;  // the KB after and before
  std::shared_ptr<file_writes> later;                   // its index files, when deferred
};

// Adds the batches of documents to the KB's files in turn, rebuilds its
// indexes once and swaps the new snapshot in. With `defer`, the index
// files are left to write_indexes.
caf::expected<applied_ingest> apply_locally(self_ptr self, const std::string& kb,
                                            std::vector<std::vector<document>> batches,
                                            bool defer = false) {
  auto& st = self->state;
  auto current = st.catalog->get(kb);
  if (!current)
    return make_error(errc::not_found, "unknown knowledge base \"" + kb + "\"");
  size_t count = 0;
  for (auto& docs : batches)
    count += docs.size();
  auto started = std::chrono::steady_clock::now();
  auto added = add_documents(st.data_dir, kb, std::move(batches));
  if (!added)
    return std::move(added.error());
  auto documents_ms = ms_since(started);
  auto later = defer ? std::make_shared<file_writes>() : nullptr;
  auto snap = kb_catalog::build_snapshot(current->settings, added->all, st.opts, current.get(),
                                         later.get());
  st.catalog->put(snap);
  size_t added_count = 0, replaced = 0;
  for (auto& report : added->reports) {
    report.chunks = snap->chunks.size();
    added_count += report.documents_added;
    replaced += report.documents_replaced;
  }
  st.last_build_ms = ms_since(started);
  st.ingests += added->reports.size();
  ++st.builds;
  st.documents += count;
  std::string stages = fmt::format("documents file {:.0f}", documents_ms);
  for (auto& [stage, ms] : snap->build_stages)
    stages += fmt::format(", {} {:.0f}", stage, ms);
  lg->info(
      "knowledge base \"{}\": {} added, {} replaced, {} chunks, {} reused ({:.0f} ms: {}; {} {})",
      kb, added_count, replaced, snap->chunks.size(), snap->chunks_reused, st.last_build_ms, stages,
      added->reports.size(), added->reports.size() == 1 ? "ingest" : "ingests in one build");
  return applied_ingest{std::move(added->reports), snap, current, std::move(later)};
}

// The index files of an ingest's snapshot, written after its reply by
// the index writer (they are a cache of the documents file: lost in a
// crash, they are rebuilt at start).
void write_indexes(self_ptr self, const applied_ingest& applied) {
  if (!applied.later)
    return;
  auto& st = self->state;
  if (!st.indexes_writer)
    st.indexes_writer = self->system().spawn<caf::detached>(
        index_writer, st.waiting_indexes, st.catalog, caf::actor_cast<caf::actor>(self));
  st.waiting_indexes->put({applied.snapshot, applied.later});
  caf::anon_send(st.indexes_writer, applied.snapshot->name);
}

// Tells the other nodes that `kb` has a new version in the store.
void announce(self_ptr self, const std::string& kb) {
  if (self->state.cluster)
    self->send(self->state.cluster, atom::kb_sync_v, kb);
}

// Sends the build's message to itself once `kb` has ingests queued and
// none of its store writes is still in flight (those that are join this
// build), or once a build's worth is queued.
void schedule_build(self_ptr self, const std::string& kb) {
  auto& q = self->state.queued[kb];
  if (q.build_sent || q.ingests.empty()
      || (q.storing > 0 && q.ingests.size() < max_ingests_per_build))
    return;
  q.build_sent = true;
  self->send(self, atom::kb_ingest_v, kb);
}

// Applies the ingests queued for `kb` (each already in the store) in one
// build, and answers each once the entity graph is in the store too.
void apply_queued(self_ptr self, const std::string& kb) {
  auto& st = self->state;
  auto& queue = st.queued[kb];
  queue.build_sent = false;
  auto ingests = std::move(queue.ingests);
  queue.ingests.clear();
  if (ingests.size() > max_ingests_per_build) {
    auto rest = ingests.begin() + static_cast<std::ptrdiff_t>(max_ingests_per_build);
    std::move(rest, ingests.end(), std::back_inserter(queue.ingests));
    ingests.erase(rest, ingests.end());
    schedule_build(self, kb);
  }
  if (ingests.empty())
    return;
  std::vector<std::vector<document>> batches;
  for (auto& q : ingests)
    batches.push_back(std::move(q.docs));
  auto applied = apply_locally(self, kb, std::move(batches), true);
  if (!applied) {
    for (auto& q : ingests)
      q.rp.deliver(applied.error());
    return;
  }
  bool versioned = false;
  for (auto& q : ingests)
    if (q.version > 0) {
      note_version(self, kb, q.version, false);
      versioned = true;
    }
  if (versioned)
    announce(self, kb);
  auto snapshot = applied->snapshot, before = applied->before;
  store_graph(self, snapshot, before,
              [self, ingests = std::move(ingests), applied = std::move(*applied)]() mutable {
                for (size_t i = 0; i < ingests.size(); ++i)
                  ingests[i].rp.deliver(applied.reports[i]);
                write_indexes(self, applied);
              });
}

// Creates `kb` here, or updates its settings, as the store has them.
caf::error adopt_settings(self_ptr self, const kb_version& row) {
  auto& st = self->state;
  auto parsed = kb_settings_from_json(row.settings);
  if (!parsed)
    return std::move(parsed.error());
  parsed->name = row.kb;
  auto current = st.catalog->get(row.kb);
  if (current && kb_exists(st.data_dir, row.kb)) {
    if (to_json(current->settings) == to_json(*parsed))
      return {};
    if (auto err = save_kb_settings(st.data_dir, *parsed))
      return err;
    auto stored = load_kb_documents(st.data_dir, row.kb);
    if (!stored)
      return std::move(stored.error());
    st.catalog->put(kb_catalog::build_snapshot(*parsed, *stored, st.opts, current.get()));
    lg->info("knowledge base \"{}\": settings from the store", row.kb);
    return {};
  }
  if (auto err = save_kb_settings(st.data_dir, *parsed))
    return err;
  if (!kb_exists(st.data_dir, row.kb))
    if (auto err = create_kb(st.data_dir, row.kb))
      return err;
  st.catalog->put(kb_catalog::build_snapshot(*parsed, {}, st.opts));
  lg->info("knowledge base \"{}\" created from the store", row.kb);
  return {};
}

void sync_next(self_ptr self, std::shared_ptr<std::vector<kb_version>> rows, size_t i);

// One look at the store: every KB whose version is ahead of ours is
// brought up to date, one after another; then the next look is scheduled.
void sync(self_ptr self) {
  auto& st = self->state;
  if (st.syncing || !st.store)
    return;
  st.syncing = true;
  auto timeout = std::max<caf::timespan>(st.sync_interval * 10, std::chrono::seconds(10));
  tidy_request(self, st.store, timeout, atom::kb_sync_v)
      .then(
          [=](std::vector<kb_version>& rows) {
            auto behind = std::make_shared<std::vector<kb_version>>();
            for (auto& row : rows)
              if (row.version > self->state.synced[row.kb])
                behind->push_back(std::move(row));
            sync_next(self, behind, 0);
          },
          [=](caf::error& err) {
            if (self->state.sync_failures++ % 20 == 0)
              lg->warn("knowledge bases: cannot read versions from the store: {}",
                           self->system().render(err));
            sync_next(self, std::make_shared<std::vector<kb_version>>(), 0);
          });
}

void sync_next(self_ptr self, std::shared_ptr<std::vector<kb_version>> rows, size_t i) {
  auto& st = self->state;
  if (i >= rows->size()) {
    st.syncing = false;
    ++st.syncs;
    if (st.sync_again) {
      st.sync_again = false;
      return sync(self);
    }
    if (st.sync_interval.count() > 0 && !st.tick_pending) {
      st.tick_pending = true;
      self->delayed_send(self, st.sync_interval, atom::kb_sync_v);
    }
    return;
  }
  auto row = (*rows)[i];
  if (auto err = adopt_settings(self, row)) {
    ++st.sync_failures;
    lg->warn("knowledge base \"{}\": cannot adopt the store's settings: {}", row.kb,
                 error_message(err));
    return sync_next(self, rows, i + 1);
  }
  auto after = st.synced[row.kb];
  tidy_request(self, st.store, std::chrono::minutes(1), atom::kb_sync_v, row.kb, after)
      .then(
          [=](std::vector<document>& docs) {
            auto& st = self->state;
            auto n = docs.size();
            if (!docs.empty()) {
              std::vector<std::vector<document>> batch;
              batch.push_back(std::move(docs));
              auto applied = apply_locally(self, row.kb, std::move(batch));
              if (!applied) {
                ++st.sync_failures;
                lg->warn("knowledge base \"{}\": cannot apply version {} from the store: {}",
                             row.kb, row.version, error_message(applied.error()));
                return sync_next(self, rows, i + 1);
              }
              st.synced_documents += n;
            }
            note_version(self, row.kb, row.version, true);
            lg->info("knowledge base \"{}\": synced to store version {} ({} documents)", row.kb,
                         row.version, n);
            sync_next(self, rows, i + 1);
          },
          [=](caf::error& err) {
            ++self->state.sync_failures;
            lg->warn("knowledge base \"{}\": cannot read documents from the store: {}", row.kb,
                         self->system().render(err));
            sync_next(self, rows, i + 1);
          });
}

}  // namespace

kb_admin_actor spawn_kb_admin(caf::actor_system& sys, std::filesystem::path data_dir,
                              std::shared_ptr<kb_catalog> catalog, kb_build_options opts,
                              store_actor store, std::chrono::milliseconds sync_interval,
                              cluster_actor cluster) {
  return sys.spawn<caf::detached>([data_dir, catalog, opts, store, sync_interval,
                                   cluster](self_ptr self) -> kb_admin_actor::behavior_type {
    auto& st = self->state;
    st.data_dir = data_dir;
    self->track("kb_admin", "kb_admin");
    st.catalog = catalog;
    st.opts = opts;
    st.store = store;
    st.sync_interval = sync_interval;
    for (auto& kb : list_kbs(data_dir))
      st.synced[kb] = read_version(data_dir, kb);
    st.cluster = cluster;
    if (cluster)
      self->send(cluster, atom::kb_sync_v, kb_admin_actor{self});
    if (store && sync_interval.count() > 0) {
      st.tick_pending = true;
      self->send(self, atom::kb_sync_v);
    }
    return {
        [=](atom::kb_create, kb_settings& s) -> caf::result<kb_settings> {
          auto& st = self->state;
          if (auto problem = validate(s))
            return make_error(errc::invalid_request, *problem);
          if (kb_exists(st.data_dir, s.name) || st.catalog->get(s.name))
            return make_error(errc::conflict, "knowledge base \"" + s.name + "\" already exists");
          auto create_here = [=]() -> caf::error {
            auto& st = self->state;
            // Settings first: a crash in between leaves a KB without
            // documents file, which list_kbs ignores and create retries.
            if (auto err = save_kb_settings(st.data_dir, s))
              return err;
            if (auto err = create_kb(st.data_dir, s.name))
              return err;
            st.catalog->put(kb_catalog::build_snapshot(s, {}, st.opts));
            lg->info("knowledge base \"{}\" created", s.name);
            return {};
          };
          if (!st.store) {
            if (auto err = create_here())
              return err;
            return s;
          }
          // The store first (every node learns of the KB from it), then
          // the files here.
          auto rp = self->make_response_promise<kb_settings>();
          tidy_request(self, st.store, std::chrono::minutes(1), atom::kb_sync_v, s.name, to_json(s),
                        std::vector<document>{})
              .then(
                  [=](int64_t version) mutable {
                    if (auto err = create_here()) {
                      rp.deliver(std::move(err));
                      return;
                    }
                    note_version(self, s.name, version, false);
                    announce(self, s.name);
                    rp.deliver(s);
                  },
                  [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
          return rp;
        },
        [=](atom::kb_ingest, const std::string& kb,
            std::vector<document>& docs) -> caf::result<ingest_report> {
          auto& st = self->state;
          auto current = st.catalog->get(kb);
          if (!current || !kb_exists(st.data_dir, kb))
            return make_error(errc::not_found, "unknown knowledge base \"" + kb
                                                   + "\"; create it with POST /api/v1/kbs");
          auto rp = self->make_response_promise<ingest_report>();
          // Queued for the KB's next build, which applies every ingest
          // queued by the time it starts (schedule_build): those that came
          // while the last build ran. Answered once the entity graph is in
          // the database too.
          auto here = [=](std::vector<document> docs, int64_t version) mutable {
            self->state.queued[kb].ingests.push_back(queued_ingest{std::move(docs), version, rp});
            schedule_build(self, kb);
          };
          if (!st.store) {
            here(std::move(docs), 0);
            return rp;
          }
          // The store first: what it holds is what every node serves; if
          // it refuses, nothing changed anywhere.
          auto copy = docs;
          ++st.queued[kb].storing;
          tidy_request(self, st.store, std::chrono::minutes(5), atom::kb_sync_v, kb,
                       to_json(current->settings), std::move(copy))
              .then(
                  [=](int64_t version) mutable {
                    --self->state.queued[kb].storing;
                    here(std::move(docs), version);
                  },
                  [=](caf::error& err) mutable {
                    --self->state.queued[kb].storing;
                    rp.deliver(std::move(err));
                    schedule_build(self, kb);
                  });
          return rp;
        },
        [=](atom::kb_ingest, const std::string& kb) { apply_queued(self, kb); },
        [=](atom::kb_sync) {
          self->state.tick_pending = false;
          sync(self);
        },
        [=](atom::kb_sync, const std::string& kb) {
          auto& st = self->state;
          if (!st.store)
            return;
          lg->debug("knowledge base \"{}\": a new version was announced", kb);
          if (st.syncing)
            st.sync_again = true;
          else
            sync(self);
        },
        [=](atom::kb_graph) -> caf::result<int64_t> {
          auto names = self->state.catalog->names();
          auto rp = self->make_response_promise<int64_t>();
          auto left = std::make_shared<size_t>(names.size());
          if (names.empty())
            rp.deliver(int64_t{0});
          for (auto& name : names)
            store_graph(self, self->state.catalog->get(name), nullptr, [=]() mutable {
              if (--*left == 0)
                rp.deliver(static_cast<int64_t>(names.size()));
            });
          return rp;
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w.field("ingests", st.ingests)
              .field("builds", st.builds)
              .field("documents_ingested", st.documents)
              .field("last_build_ms", st.last_build_ms)
              .field("graphs_stored", st.graphs_written)
              .field("graph_failures", st.graph_failures)
              .field("store_syncs", st.syncs)
              .field("synced_documents", st.synced_documents)
              .field("sync_failures", st.sync_failures)
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
