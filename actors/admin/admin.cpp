#include "actors/request_timeout.hpp"
#include "actors/admin/admin.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/admin/measured.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

process_load read_process_load() {
  process_load out;
  {
    std::ifstream statm{"/proc/self/statm"};
    uint64_t size = 0, resident = 0;
    if (statm >> size >> resident)
      out.rss_bytes = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  {
    std::ifstream stat{"/proc/self/stat"};
    std::string line;
    std::getline(stat, line);
    // Fields after the command name (which may hold spaces) start at ')'.
    if (auto close = line.rfind(')'); close != std::string::npos) {
      std::istringstream rest{line.substr(close + 2)};
      std::string field;
      // rest[0] is field 3 (state); utime = 14, stime = 15, threads = 20.
      uint64_t utime = 0, stime = 0;
      for (int i = 3; rest >> field; ++i) {
        if (i == 14)
          utime = std::stoull(field);
        else if (i == 15)
          stime = std::stoull(field);
        else if (i == 20) {
          out.threads = std::stoull(field);
          break;
        }
      }
      out.cpu_seconds =
          static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator{"/proc/self/fd", ec};
       !ec && it != std::filesystem::directory_iterator{}; it.increment(ec))
    ++out.open_fds;
  return out;
}

namespace {

struct admin_state {
  static inline const char* name = "admin";
  admin_settings settings;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // Peer nodes by name: their admin actor, null while down.
  std::map<std::string, caf::actor> peers;
  uint64_t snapshots = 0;
  uint64_t stuck = 0;  // status requests that timed out
};

using self_ptr = measured_pointer<admin_actor, admin_state>;

// The parts of one answer assembled from many replies.
struct gather {
  std::vector<std::string> parts;  // JSON values or array contents ("" = none)
  size_t pending = 0;
  caf::typed_response_promise<std::string> rp;

  void done_one() {
    if (--pending == 0)
      finish();
  }
  void finish() {
    std::string out = "[";
    for (auto& p : parts) {
      if (p.empty())
        continue;
      if (out.size() > 1)
        out += ',';
      out += p;
    }
    out += ']';
    rp.deliver(std::move(out));
  }
};

// The elements of a JSON array as text ("[a,b]" -> "a,b").
std::string array_contents(const std::string& array_json) {
  if (array_json.size() < 2)
    return {};
  return array_json.substr(1, array_json.size() - 2);
}

std::string stuck_json(const directory_entry& e, std::string_view node, std::string_view why) {
  json_writer w;
  w.begin_object()
      .field("kind", e.kind)
      .field("name", e.name)
      .field("node", node)
      .field("id", e.id)
      .field("stuck", true)
      .field("last_error", why)
      .end_object();
  return w.take();
}

std::string own_status(self_ptr self) {
  auto& st = self->state;
  json_writer w;
  self->status_head(w);
  w.field("peers", static_cast<uint64_t>(st.peers.size()))
      .field("snapshots", st.snapshots)
      .field("stuck_replies", st.stuck)
      .end_object();
  return w.take();
}

std::string node_json(self_ptr self) {
  auto& st = self->state;
  auto& dir = actor_directory::instance();
  auto load = read_process_load();
  json_writer w;
  w.begin_object().field("name", st.settings.node);
  w.key("roles").begin_array();
  std::stringstream roles{st.settings.roles};
  for (std::string role; std::getline(roles, role, ',');)
    if (!role.empty())
      w.value(role);
  w.end_array();
  w.field("status", "up")
      .field("address", st.settings.address)
      .field("uptime_ms", static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                   std::chrono::steady_clock::now() - st.started)
                                                   .count()))
      .field("actors", static_cast<uint64_t>(dir.count(self->system(), "")))
      .field("sessions", static_cast<uint64_t>(dir.count(self->system(), "session")))
      .field("streams", static_cast<uint64_t>(dir.count(self->system(), "stream")))
      .field("rss_bytes", load.rss_bytes)
      .field("threads", load.threads)
      .field("cpu_seconds", load.cpu_seconds)
      .field("open_fds", load.open_fds)
      .end_object();
  return w.take();
}

std::string down_node_json(const std::string& name) {
  json_writer w;
  w.begin_object().field("name", name).field("status", "down").end_object();
  return w.take();
}

// Asks every live peer's admin actor `xs...` (answered with a bool, each
// within twice the status timeout); true once any of them answered true.
template <class... Ts>
caf::result<bool> ask_any_peer(self_ptr self, Ts... xs) {
  struct tally {
    caf::typed_response_promise<bool> rp;
    size_t left = 1;
    bool found = false;
    void settle() {
      if (--left == 0)
        rp.deliver(found);
    }
  };
  auto t = std::make_shared<tally>();
  t->rp = self->make_response_promise<bool>();
  for (auto& [name, peer] : self->state.peers) {
    if (!peer)
      continue;
    ++t->left;
    tidy_request(self, caf::actor_cast<admin_actor>(peer), self->state.settings.status_timeout * 2,
                  xs...)
        .then(
            [t](bool b) {
              t->found = t->found || b;
              t->settle();
            },
            [t](caf::error&) { t->settle(); });
  }
  t->settle();
  return t->rp;
}

caf::result<std::string> snapshot(self_ptr self, const std::string& kind, bool local_only) {
  auto& st = self->state;
  ++st.snapshots;
  auto node = st.settings.node;
  auto entries = actor_directory::instance().list(self->system(), kind);
  auto g = std::make_shared<gather>();
  g->rp = self->make_response_promise<std::string>();
  g->parts.resize(entries.size() + (local_only ? 0 : st.peers.size()));
  g->pending = 1;  // released below, once everything is asked
  for (size_t i = 0; i < entries.size(); ++i) {
    auto& e = entries[i];
    if (e.id == self->id()) {
      g->parts[i] = own_status(self);
      continue;
    }
    auto handle = caf::actor_cast<status_api>(e.addr);
    if (!handle)
      continue;  // gone meanwhile
    ++g->pending;
    tidy_request(self, handle, st.settings.status_timeout, atom::status_v)
        .then(
            [g, i](std::string& s) {
              g->parts[i] = std::move(s);
              g->done_one();
            },
            [self, g, i, e, node](caf::error& err) {
              // A timeout is a stuck actor; any other error one that ended.
              if (err == caf::sec::request_timeout) {
                ++self->state.stuck;
                g->parts[i] = stuck_json(e, node, "no status answer in time");
              }
              g->done_one();
            });
  }
  if (!local_only) {
    size_t slot = entries.size();
    for (auto& [name, peer] : st.peers) {
      if (!peer)
        continue;
      auto i = slot++;
      ++g->pending;
      tidy_request(self, caf::actor_cast<admin_actor>(peer), st.settings.status_timeout * 2,
                    atom::snapshot_v, kind, true)
          .then(
              [g, i](std::string& arr) {
                g->parts[i] = array_contents(arr);
                g->done_one();
              },
              [g](caf::error&) { g->done_one(); });
    }
  }
  g->done_one();
  return g->rp;
}

}  // namespace

admin_actor spawn_admin(caf::actor_system& sys, admin_settings settings) {
  return sys.spawn([settings](self_ptr self) -> admin_actor::behavior_type {
    self->state.settings = settings;
    actor_directory::instance().set_node(self->system(), settings.node);
    self->track("admin", "admin");
    return {
        [=](atom::snapshot, const std::string& kind, bool local_only) {
          return snapshot(self, kind, local_only);
        },
        [=](atom::status, const std::string& node, uint64_t id) -> caf::result<std::string> {
          auto& st = self->state;
          if (node.empty() || node == st.settings.node) {
            if (id == self->id())
              return own_status(self);
            auto e = actor_directory::instance().find(self->system(), id);
            auto handle = e ? caf::actor_cast<status_api>(e->addr) : status_api{};
            if (!handle)
              return make_error(errc::not_found, "no actor " + std::to_string(id) + " on node "
                                                     + st.settings.node);
            return self->delegate(handle, atom::status_v);
          }
          auto i = st.peers.find(node);
          if (i == st.peers.end() || !i->second)
            return make_error(errc::not_found, "no node \"" + node + "\" is up");
          return self->delegate(caf::actor_cast<admin_actor>(i->second), atom::status_v, node, id);
        },
        [=](atom::nodes, bool local_only) -> caf::result<std::string> {
          auto g = std::make_shared<gather>();
          g->rp = self->make_response_promise<std::string>();
          g->parts.push_back(node_json(self));
          g->pending = 1;
          if (!local_only) {
            for (auto& [name, peer] : self->state.peers) {
              auto i = g->parts.size();
              if (!peer) {
                g->parts.push_back(down_node_json(name));
                continue;
              }
              g->parts.emplace_back();
              ++g->pending;
              tidy_request(self, caf::actor_cast<admin_actor>(peer),
                            self->state.settings.status_timeout * 2, atom::nodes_v, true)
                  .then(
                      [g, i](std::string& arr) {
                        g->parts[i] = array_contents(arr);
                        g->done_one();
                      },
                      [g, i, name = name](caf::error&) {
                        g->parts[i] = down_node_json(name);
                        g->done_one();
                      });
            }
          }
          g->done_one();
          return g->rp;
        },
        [=](atom::stop, const std::string& request_id, bool local_only) -> caf::result<bool> {
          auto e = actor_directory::instance().find_named(self->system(), "stream", request_id);
          if (auto s = e ? caf::actor_cast<stream_actor>(e->addr) : stream_actor{}) {
            self->send(s, atom::cancel_v);
            return true;
          }
          if (local_only)
            return false;
          return ask_any_peer(self, atom::stop_v, request_id, true);
        },
        [=](atom::evict, const std::string& user_id, const std::string& session_id,
            bool local_only) -> caf::result<bool> {
          auto e = actor_directory::instance().find_named(self->system(), "session",
                                                          user_id + "/" + session_id);
          if (auto s = e ? caf::actor_cast<session_actor>(e->addr) : session_actor{}) {
            self->send(s, atom::shutdown_v);
            return true;
          }
          if (local_only)
            return false;
          return ask_any_peer(self, atom::evict_v, user_id, session_id, true);
        },
        [=](atom::peer_up, const std::string& node, caf::actor admin) {
          self->state.peers[node] = std::move(admin);
        },
        [=](atom::peer_down, const std::string& node) {
          if (auto i = self->state.peers.find(node); i != self->state.peers.end())
            i->second = nullptr;
        },
        [=](atom::status) -> std::string { return own_status(self); },
    };
  });
}

}  // namespace ragtor
