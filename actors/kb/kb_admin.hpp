// The kb_admin actor (one per node): creates knowledge bases and ingests
// documents while serving. It runs detached on its own thread because it
// writes files and rebuilds indexes (blocking work that must not occupy a
// scheduler thread); requests are handled one at a time, so ingests never
// race. A new snapshot is swapped into the catalog only after the
// documents are durably on disk; searches in flight keep the old one.
// The entity graph is then written to the store (entities, relations); it
// is derived data: the files stay the source of truth.
#pragma once

#include <filesystem>
#include <memory>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor {

// With a `store`, every KB's entity graph is kept in the store's entities
// and relations tables: on atom::kb_graph (at start; only what changed) and
// by every ingest before it answers.
kb_admin_actor spawn_kb_admin(caf::actor_system& sys, std::filesystem::path data_dir,
                              std::shared_ptr<kb_catalog> catalog, kb_build_options opts,
                              store_actor store = {});

}  // namespace ragtor
