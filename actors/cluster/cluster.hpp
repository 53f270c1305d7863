// Cluster membership (docs/cluster.md). One `cluster` actor per node. It is
// published on the node's BASP port, so connecting to a node yields its
// cluster actor; the two exchange `hello` (their node_services) and from
// then on the connecting side's pool and session manager can use the other
// node's agents and sessions.
//
// Failure detection: every heartbeat the actor pings each peer; a peer that
// has not answered for failure_timeout is `suspect` (its agents and
// sessions are no longer used), for twice that `down`; a lost connection
// (BASP kills the proxies, the monitor fires) is `down` at once, and the
// actor reconnects with backoff. A peer that answers again, or a restarted
// node that says hello under the same name, is `up` again.
//
// The store's cluster_members table (the Orleans approach) holds each
// node's own row, written every heartbeat; nodes read it to find members
// that are not in their seed list. Without a BASP listener the actor is a
// cluster of one: it answers `members` with itself and writes nothing.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

struct cluster_settings {
  // This node: name, BASP address ("" = single node), roles, kbs,
  // started_at_ms.
  member_info self;
  std::vector<std::pair<std::string, uint16_t>> seeds;
  std::chrono::milliseconds heartbeat{500};
  std::chrono::milliseconds failure_timeout{2000};
  // The middleman actor used to connect (plain BASP or caf_openssl's);
  // null = single node.
  caf::actor middleman;
  store_actor store;
  agent_pool_actor pool;
  session_manager_actor sessions;
  admin_actor admin;  // told which peers' admin actors are up
};

cluster_actor spawn_cluster(caf::actor_system& sys, cluster_settings settings);

// Whether a comma-separated list (roles, kbs) contains `item`, or "*".
bool list_has(std::string_view list, std::string_view item);

}  // namespace ragtor
