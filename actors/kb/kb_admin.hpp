// The kb_admin actor (one per node): creates knowledge bases and ingests
// documents while serving. It runs detached on its own thread because it
// writes files and rebuilds indexes (blocking work that must not occupy a
// scheduler thread); requests are handled one at a time, so ingests never
// race. A new snapshot is swapped into the catalog only after the
// documents are durably on disk; searches in flight keep the old one.
// The entity graph is then written to the store (entities, relations); it
// is derived data: the files stay the source of truth.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

// With a `store`, every KB's entity graph is kept in the store's entities
// and relations tables: on atom::kb_graph (at start; only what changed) and
// by every ingest before it answers.
//
// With a store, KB content is shared through it (docs/cluster.md): a
// create or an ingest is written to the store first (under the KB's next
// version) and then applied here; with `sync_interval` > 0 (a cluster) the
// actor also looks at the store that often and applies every version
// another node wrote, creating KBs it does not have yet. With a `cluster`,
// each version written here is announced to the other nodes, whose
// kb_admin syncs at once instead of at its next look.
kb_admin_actor spawn_kb_admin(caf::actor_system& sys, std::filesystem::path data_dir,
                              std::shared_ptr<kb_catalog> catalog, kb_build_options opts,
                              store_actor store = {},
                              std::chrono::milliseconds sync_interval = {},
                              cluster_actor cluster = {});

}  // namespace ragtor
