// The admin actor (DESIGN §12, docs/admin.md): one per node, the admin
// console's view of the actor system. It reads the node's actor directory
// (actors/admin/measured.hpp), asks each live actor for its `status` with a
// per-actor timeout — an actor that does not answer in time is listed as
// stuck instead of holding up the page — and, in a cluster, asks the other
// nodes' admin actors the same (the cluster actor tells it who is up).
// A single node is simply a cluster of one.
#pragma once

#include <chrono>
#include <string>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

struct admin_settings {
  std::string node = "local";  // this node's name
  std::string roles = "frontend,retrieval";
  std::string address;  // its BASP address ("" = single node)
  // How long one actor may take to answer `status` (a peer node: twice
  // that).
  std::chrono::milliseconds status_timeout{1000};
};

admin_actor spawn_admin(caf::actor_system& sys, admin_settings settings);

// This process's resident set (bytes), threads and CPU time (seconds),
// from /proc/self; zeros where unavailable.
struct process_load {
  uint64_t rss_bytes = 0;
  uint64_t threads = 0;
  double cpu_seconds = 0;
  uint64_t open_fds = 0;
};
process_load read_process_load();

}  // namespace ragtor
