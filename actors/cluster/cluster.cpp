#include "actors/request_timeout.hpp"
#include "actors/cluster/cluster.hpp"
#include "protocol/log.hpp"
#include "actors/admin/measured.hpp"

#include <charconv>
#include <map>
#include <set>

#include <spdlog/spdlog.h>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {
const log::component lg{"cluster"};
}  // namespace

namespace {

using steady = std::chrono::steady_clock;

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A node this one knows by name (it said hello).
struct peer {
  member_info info;  // status and heartbeat_at_ms kept current here
  cluster_actor cluster;  // null while the connection is lost
  caf::actor pool;
  caf::actor sessions;
  caf::actor admin;
  steady::time_point last_heard{};
  bool ping_in_flight = false;
  bool announced = false;  // pool / sessions were told peer_up
};

// An address to be connected to (a seed, or a member found in the store).
struct target {
  bool connecting = false;
  int failures = 0;
  steady::time_point next_attempt{};
};

struct cluster_state {
  static inline const char* name = "cluster";
  cluster_settings cfg;
  std::map<std::string, peer> peers;  // by node name
  std::map<std::string, target> targets;  // by "host:port"
  std::vector<member_info> table;  // the last read of cluster_members
  uint64_t ticks = 0;
  uint64_t hellos = 0;
  uint64_t store_errors = 0;
  bool leaving = false;
  bool row_in_flight = false;
  kb_admin_actor kb_admin;  // told of KB versions other nodes wrote
  uint64_t kb_versions_sent = 0, kb_versions_heard = 0;
};

// How long the store may take for membership reads and writes; a slow store
// only delays them (liveness is judged by pings).
constexpr auto store_timeout = std::chrono::seconds(10);

using cluster_ptr = measured_pointer<cluster_actor, cluster_state>;

std::pair<std::string, uint16_t> split_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return {address, 0};
  auto host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  uint16_t port = 0;
  auto digits = std::string_view{address}.substr(colon + 1);
  std::from_chars(digits.data(), digits.data() + digits.size(), port);
  return {host, port};  // port 0 (a malformed row) fails to connect
}

node_services services_of(cluster_ptr self) {
  node_services s;
  s.info = self->state.cfg.self;
  s.info.status = "up";
  s.info.heartbeat_at_ms = wall_ms();
  s.cluster = caf::actor_cast<caf::actor>(self);
  s.pool = caf::actor_cast<caf::actor>(self->state.cfg.pool);
  s.sessions = caf::actor_cast<caf::actor>(self->state.cfg.sessions);
  s.admin = caf::actor_cast<caf::actor>(self->state.cfg.admin);
  return s;
}

// Tells the pool and the session manager that `p` may be used.
void announce(cluster_ptr self, peer& p) {
  auto& cfg = self->state.cfg;
  if (p.pool && list_has(p.info.roles, "retrieval") && cfg.pool)
    self->send(cfg.pool, atom::peer_up_v, p.info.name, p.pool, p.info.kbs);
  if (p.sessions && list_has(p.info.roles, "frontend") && cfg.sessions)
    self->send(cfg.sessions, atom::peer_up_v, p.info.name, p.sessions);
  if (p.admin && cfg.admin)
    self->send(cfg.admin, atom::peer_up_v, p.info.name, p.admin);
  p.announced = true;
}

// Tells them it may not (suspect or down).
void withdraw(cluster_ptr self, peer& p) {
  auto& cfg = self->state.cfg;
  if (cfg.pool)
    self->send(cfg.pool, atom::peer_down_v, p.info.name);
  if (cfg.sessions)
    self->send(cfg.sessions, atom::peer_down_v, p.info.name);
  if (cfg.admin)
    self->send(cfg.admin, atom::peer_down_v, p.info.name);
  p.announced = false;
}

void set_status(cluster_ptr self, peer& p, const char* status) {
  if (p.info.status == status)
    return;
  lg->log(std::string_view{status} == "up" ? spdlog::level::info : spdlog::level::warn,
              "cluster: node {} ({}) is {}", p.info.name, p.info.address, status);
  p.info.status = status;
  if (p.info.status == "up")
    announce(self, p);
  else if (p.announced)
    withdraw(self, p);
}

// A peer said hello (or answered ours): (re)binds its handles.
void register_peer(cluster_ptr self, const node_services& s) {
  auto& st = self->state;
  if (s.info.name == st.cfg.self.name || !s.cluster)
    return;
  ++st.hellos;
  auto& p = st.peers[s.info.name];
  auto handle = caf::actor_cast<cluster_actor>(s.cluster);
  bool rebound = p.cluster != handle;
  bool was_up = p.info.status == "up";
  if (rebound && p.cluster)
    self->demonitor(p.cluster.address());
  p.info = s.info;
  p.cluster = handle;
  p.pool = s.pool;
  p.sessions = s.sessions;
  p.admin = s.admin;
  p.last_heard = steady::now();
  p.info.heartbeat_at_ms = wall_ms();
  if (rebound)
    self->monitor(p.cluster);
  // New handles (a restarted node): announce them again.
  if (rebound || !was_up) {
    p.info.status = "joining";
    set_status(self, p, "up");
  } else {
    p.info.status = "up";
  }
  st.targets[s.info.address].failures = 0;
}

void connect(cluster_ptr self, const std::string& address) {
  auto& st = self->state;
  auto& t = st.targets[address];
  t.connecting = true;
  auto [host, port] = split_address(address);
  auto retry_later = [=](const std::string& why) {
    auto& t = self->state.targets[address];
    t.connecting = false;
    ++t.failures;
    // Backoff: one heartbeat, doubling, at most 16 of them.
    auto steps = std::min(t.failures, 5);
    t.next_attempt = steady::now() + self->state.cfg.heartbeat * (1 << (steps - 1));
    if (t.failures == 1 || t.failures % 20 == 0)
      lg->info("cluster: cannot reach {} yet ({}); retrying", address, why);
  };
  auto mm = caf::actor_cast<caf::io::middleman_actor>(st.cfg.middleman);
  tidy_request(self, mm, st.cfg.failure_timeout * 2, caf::connect_atom::value, host, port)
      .then(
          [=](const caf::node_id&, caf::strong_actor_ptr& h, const std::set<std::string>&) {
            if (!h)
              return retry_later("no cluster actor published there");
            auto remote = caf::actor_cast<cluster_actor>(h);
            tidy_request(self, remote, self->state.cfg.failure_timeout * 2, atom::hello_v,
                          services_of(self))
                .then(
                    [=](node_services& theirs) {
                      self->state.targets[address].connecting = false;
                      register_peer(self, theirs);
                    },
                    [=](caf::error& err) { retry_later(self->system().render(err)); });
          },
          [=](caf::error& err) { retry_later(self->system().render(err)); });
}

// Seeds and fresh members of the table that no live peer is known at.
void connect_targets(cluster_ptr self) {
  auto& st = self->state;
  auto now = steady::now();
  std::set<std::string> live;
  for (auto& [name, p] : st.peers)
    if (p.cluster && p.info.status != "down")
      live.insert(p.info.address);
  for (auto& [address, t] : st.targets) {
    if (address == st.cfg.self.address || live.count(address) || t.connecting
        || now < t.next_attempt)
      continue;
    connect(self, address);
  }
}

void ping(cluster_ptr self, peer& p) {
  if (!p.cluster || p.ping_in_flight)
    return;
  p.ping_in_flight = true;
  auto name = p.info.name;
  auto handle = p.cluster;
  tidy_request(self, p.cluster, self->state.cfg.failure_timeout, atom::ping_v)
      .then(
          [=](const std::string&) {
            auto i = self->state.peers.find(name);
            if (i == self->state.peers.end() || i->second.cluster != handle)
              return;
            auto& p = i->second;
            p.ping_in_flight = false;
            p.last_heard = steady::now();
            p.info.heartbeat_at_ms = wall_ms();
            set_status(self, p, "up");
          },
          [=](caf::error&) {
            auto i = self->state.peers.find(name);
            if (i != self->state.peers.end() && i->second.cluster == handle)
              i->second.ping_in_flight = false;
          });
}

// Heartbeat: ping, judge, write our row, now and then read the table.
void beat(cluster_ptr self) {
  auto& st = self->state;
  ++st.ticks;
  auto now = steady::now();
  for (auto& [name, p] : st.peers) {
    ping(self, p);
    if (!p.cluster)
      continue;
    auto silent = now - p.last_heard;
    if (silent > st.cfg.failure_timeout * 2)
      set_status(self, p, "down");
    else if (silent > st.cfg.failure_timeout && p.info.status == "up")
      set_status(self, p, "suspect");
  }
  if (!st.leaving && st.cfg.store && !st.row_in_flight) {
    // One write at a time: a slow store delays the row, it never queues
    // heartbeats behind each other.
    auto row = st.cfg.self;
    row.heartbeat_at_ms = wall_ms();
    row.status = "up";
    st.row_in_flight = true;
    tidy_request(self, st.cfg.store, store_timeout, atom::members_v, row)
        .then([=](bool) { self->state.row_in_flight = false; },
              [=](caf::error& err) {
                self->state.row_in_flight = false;
                if (self->state.store_errors++ % 20 == 0)
                  lg->warn("cluster: cannot write this node's row: {}",
                               self->system().render(err));
              });
  }
  if (!st.leaving && st.cfg.store) {
    if (st.ticks % 4 == 1) {
      tidy_request(self, st.cfg.store, store_timeout, atom::members_v)
          .then(
              [=](std::vector<member_info>& rows) {
                auto& st = self->state;
                auto fresh_after = wall_ms() - 2 * st.cfg.failure_timeout.count();
                for (auto& m : rows)
                  if (m.name != st.cfg.self.name && m.status == "up" && !m.address.empty()
                      && m.heartbeat_at_ms >= fresh_after)
                    st.targets.try_emplace(m.address);
                st.table = std::move(rows);
              },
              [=](caf::error&) { ++self->state.store_errors; });
    }
  }
  connect_targets(self);
}

std::vector<member_info> members_of(cluster_ptr self) {
  auto& st = self->state;
  std::vector<member_info> out;
  auto me = st.cfg.self;
  me.status = st.leaving ? "left" : "up";
  me.heartbeat_at_ms = wall_ms();
  out.push_back(std::move(me));
  std::set<std::string> known{st.cfg.self.name};
  for (auto& [name, p] : st.peers) {
    out.push_back(p.info);
    known.insert(name);
  }
  // Members only the table knows of: not connected (yet, or any more).
  auto fresh_after = wall_ms() - 2 * st.cfg.failure_timeout.count();
  for (auto& m : st.table) {
    if (known.count(m.name))
      continue;
    auto row = m;
    if (row.status != "left")
      row.status = row.heartbeat_at_ms >= fresh_after ? "joining" : "down";
    out.push_back(std::move(row));
  }
  return out;
}

std::string status_of(cluster_ptr self) {
  auto& st = self->state;
  json_writer w;
  self->status_head(w);
  w      .field("address", st.cfg.self.address)
      .field("roles", st.cfg.self.roles)
      .field("kbs", st.cfg.self.kbs)
      .field("heartbeats", st.ticks)
      .field("hellos", st.hellos)
      .field("store_errors", st.store_errors)
      .field("kb_versions_sent", st.kb_versions_sent)
      .field("kb_versions_heard", st.kb_versions_heard);
  w.key("peers").begin_object();
  for (auto& [name, p] : st.peers)
    w.field(name, p.info.status);
  w.end_object().end_object();
  return w.take();
}

}  // namespace

bool list_has(std::string_view list, std::string_view item) {
  size_t pos = 0;
  while (pos <= list.size()) {
    auto end = list.find(',', pos);
    if (end == std::string_view::npos)
      end = list.size();
    auto entry = list.substr(pos, end - pos);
    while (!entry.empty() && entry.front() == ' ')
      entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ')
      entry.remove_suffix(1);
    if (entry == item || entry == "*")
      return true;
    pos = end + 1;
  }
  return false;
}

cluster_actor spawn_cluster(caf::actor_system& sys, cluster_settings settings) {
  return sys.spawn([settings](cluster_ptr self) -> cluster_actor::behavior_type {
    auto& st = self->state;
    st.cfg = settings;
    self->track("cluster", "cluster");
    bool clustered = static_cast<bool>(st.cfg.middleman);
    for (auto& [host, port] : st.cfg.seeds) {
      auto address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":"
                     + std::to_string(port);
      st.targets.try_emplace(address);
    }
    // A lost connection: BASP killed the peer's proxies.
    self->set_down_handler([=](caf::down_msg& dm) {
      for (auto& [name, p] : self->state.peers) {
        if (p.cluster && p.cluster.address() == dm.source) {
          lg->warn("cluster: connection to node {} lost", name);
          p.cluster = nullptr;
          p.pool = nullptr;
          p.sessions = nullptr;
          p.admin = nullptr;
          p.ping_in_flight = false;
          set_status(self, p, "down");
          auto& t = self->state.targets[p.info.address];
          t.connecting = false;
          t.next_attempt = steady::now() + self->state.cfg.heartbeat;
        }
      }
    });
    if (clustered) {
      lg->info("cluster: node {} on {} (roles {}, kbs {}), {} seed(s)", st.cfg.self.name,
                   st.cfg.self.address, st.cfg.self.roles, st.cfg.self.kbs, st.cfg.seeds.size());
      self->send(self, atom::tick_v);
    }
    return {
        [=](atom::hello, node_services& theirs) -> node_services {
          register_peer(self, theirs);
          return services_of(self);
        },
        [=](atom::ping) -> std::string { return self->state.cfg.self.name; },
        [=](atom::members) -> std::vector<member_info> { return members_of(self); },
        [=](atom::shutdown) -> caf::result<bool> {
          auto& st = self->state;
          st.leaving = true;
          if (!clustered || !st.cfg.store)
            return true;
          auto row = st.cfg.self;
          row.heartbeat_at_ms = wall_ms();
          row.status = "left";
          auto rp = self->make_response_promise<bool>();
          tidy_request(self, st.cfg.store, st.cfg.failure_timeout, atom::members_v, row)
              .then([=](bool) mutable { rp.deliver(true); },
                    [=](caf::error&) mutable { rp.deliver(false); });
          return rp;
        },
        [=](atom::kb_sync, const std::string& kb) {
          auto& st = self->state;
          auto sender = self->current_sender();
          if (sender && sender->node() != self->node()) {
            ++st.kb_versions_heard;
            if (st.kb_admin)
              self->send(st.kb_admin, atom::kb_sync_v, kb);
            return;
          }
          for (auto& [name, p] : st.peers)
            if (p.cluster && p.info.status == "up") {
              ++st.kb_versions_sent;
              self->send(p.cluster, atom::kb_sync_v, kb);
            }
        },
        [=](atom::kb_sync, kb_admin_actor& kb_admin) { self->state.kb_admin = std::move(kb_admin); },
        [=](atom::tick) {
          beat(self);
          if (!self->state.leaving)
            self->delayed_send(self, self->state.cfg.heartbeat, atom::tick_v);
        },
        [=](atom::status) -> std::string { return status_of(self); },
    };
  });
}

}  // namespace ragtor
