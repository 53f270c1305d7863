// What every actor knows about itself for the admin console (DESIGN §12,
// docs/admin.md): messages handled, handling time over a recent window,
// errors, mailbox depth and uptime; and the node-wide directory of live
// actors the admin actor asks for `status`.
//
// An actor opts in by taking a `measured_pointer<Iface, State>` instead of
// `Iface::stateful_pointer<State>`: its class then overrides CAF's
// `consume` to time each message (two clock reads and a store into a ring,
// ~40 ns; bench_admin measures it). It registers with `track(kind, name)`
// and opens its status object with `status_head`.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/stateful_actor.hpp>

#include "protocol/json_writer.hpp"

namespace ragtor {

// Counters one actor keeps about itself (its own thread only).
struct actor_stats {
  static constexpr size_t window = 256;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  uint64_t messages = 0;
  uint64_t errors = 0;
  std::string last_error;
  // Handling times of the last `window` messages, in ns (saturating).
  std::array<uint32_t, window> recent_ns{};

  void record(int64_t ns) {
    recent_ns[messages % window] =
        ns < 0 ? 0u : (ns > int64_t{UINT32_MAX} ? UINT32_MAX : static_cast<uint32_t>(ns));
    ++messages;
  }
  void error(std::string what) {
    ++errors;
    last_error = std::move(what);
  }
  // p50 and p99 of the recent window, in milliseconds.
  std::pair<double, double> handler_ms() const;
};

// One live actor as the directory lists it.
struct directory_entry {
  uint64_t id = 0;
  std::string kind;
  std::string name;
  caf::actor_addr addr;
};

// Every tracked actor of every actor system in this process, by system.
// Adding and removing take one small mutex (once per actor lifetime);
// snapshots copy the entries of one system.
class actor_directory {
public:
  static actor_directory& instance();

  void add(const caf::actor_system& sys, directory_entry e);
  void remove(const caf::actor_system& sys, uint64_t id);
  // The entries of `sys` of kind `kind` ("" = all).
  std::vector<directory_entry> list(const caf::actor_system& sys, std::string_view kind) const;
  std::optional<directory_entry> find(const caf::actor_system& sys, uint64_t id) const;
  // The first entry of `sys` with this kind and name.
  std::optional<directory_entry> find_named(const caf::actor_system& sys, std::string_view kind,
                                            std::string_view name) const;
  // How many entries of `sys` have kind `kind` ("" = all), and the counts
  // of every kind: kept as actors come and go, so /metrics and the node's
  // status do not walk every entry (one per stream) under the lock that
  // every spawn takes.
  size_t count(const caf::actor_system& sys, std::string_view kind) const;
  std::map<std::string, size_t, std::less<>> kinds(const caf::actor_system& sys) const;

  // The node name status objects carry ("" until serve sets it: "local").
  void set_node(const caf::actor_system& sys, std::string node);
  std::string node(const caf::actor_system& sys) const;
  // Forget everything about `sys` (its shutdown).
  void forget(const caf::actor_system& sys);

private:
  struct per_system {
    std::string node;
    std::unordered_map<uint64_t, directory_entry> actors;
    std::map<std::string, size_t, std::less<>> kinds;  // entries by kind
    void uncount(const std::string& kind);
  };
  mutable std::mutex mx_;
  std::unordered_map<const caf::actor_system*, per_system> systems_;
};

// Writes the common head of a status object: kind, name, node, id,
// uptime_ms, messages, mailbox, handler_ms {p50, p99}, errors, last_error.
// The caller adds its own fields and closes the object.
void write_status_head(json_writer& w, std::string_view kind, std::string_view name,
                       std::string_view node, uint64_t id, const actor_stats& stats,
                       size_t mailbox);

// An actor class (Base: a typed_event_based_actor) that times every message.
template <class Base>
class measured : public Base {
public:
  template <class... Ts>
  explicit measured(caf::actor_config& cfg, Ts&&... xs) : Base(cfg, std::forward<Ts>(xs)...) {}

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    auto t0 = std::chrono::steady_clock::now();
    auto r = Base::consume(x);
    stats_.record((std::chrono::steady_clock::now() - t0).count());
    return r;
  }

  actor_stats& stats() { return stats_; }

  // Lists this actor in the node's directory as `kind` / `name` until it
  // terminates. Call once, in the behavior function.
  void track(std::string kind, std::string name) {
    kind_ = std::move(kind);
    name_ = std::move(name);
    auto& dir = actor_directory::instance();
    dir.add(this->system(), directory_entry{this->id(), kind_, name_, this->address()});
    tracked_ = true;
  }

  // Leaves the directory before the actor's attachables run, so whoever
  // waits for its exit (a monitor, `wait_for`) sees it gone.
  bool cleanup(caf::error&& reason, caf::execution_unit* host) override {
    if (tracked_) {
      tracked_ = false;
      actor_directory::instance().remove(this->system(), this->id());
    }
    return Base::cleanup(std::move(reason), host);
  }

  // Opens a status object with the common fields (write_status_head).
  void status_head(json_writer& w) {
    write_status_head(w, kind_, name_, actor_directory::instance().node(this->system()),
                      this->id(), stats_, this->mailbox().size());
  }

private:
  actor_stats stats_;
  std::string kind_;
  std::string name_;
  bool tracked_ = false;
};

// The self pointer of a measured stateful actor of interface `Iface`.
template <class Iface, class State>
using measured_pointer = caf::stateful_actor<State, measured<typename Iface::base>>*;

}  // namespace ragtor
