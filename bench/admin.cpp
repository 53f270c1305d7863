// What the admin console costs (docs/admin.md):
//   1. status bookkeeping per message: the same ping-pong between two
//      actors, plain typed actors versus measured ones (ns per message);
//   2. a full snapshot of the actors (what GET /admin/api/actors asks the
//      admin actor for) with 10,000 live session-like actors: ms and bytes.
// Turn throughput with the console open versus closed is bench_load
// --console (it holds /admin/api/events?view=actors open during the run).
// Prints numbers; never asserts.
//
//   build/bench/bench_admin [--messages 2000000] [--actors 10000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/admin/admin.hpp"
#include "actors/admin/measured.hpp"
#include "protocol/type_ids.hpp"

using namespace ragtor;
using steady = std::chrono::steady_clock;

namespace {

// A counter actor: `n` pings, then tells `done`.
using counter_actor = caf::typed_actor<caf::reacts_to<atom::tick, uint64_t>>::extend_with<status_api>;

struct counter_state {
  static inline const char* name = "counter";
  uint64_t seen = 0;
};

template <class Self>
counter_actor::behavior_type counter_behavior(Self self, uint64_t n, caf::actor done) {
  return {
      [=](atom::tick, uint64_t) {
        if (++self->state.seen == n)
          caf::anon_send(done, atom::tick_v, n);
      },
      [=](atom::status) -> std::string { return "{}"; },
  };
}

double ns_per_message(caf::actor_system& sys, bool measured, uint64_t n) {
  caf::scoped_actor self{sys};
  auto done = caf::actor_cast<caf::actor>(self);
  counter_actor c;
  if (measured)
    c = sys.spawn([n, done](measured_pointer<counter_actor, counter_state> self) {
      self->track("bench", "counter");
      return counter_behavior(self, n, done);
    });
  else
    c = sys.spawn([n, done](counter_actor::stateful_pointer<counter_state> self) {
      return counter_behavior(self, n, done);
    });
  auto t0 = steady::now();
  for (uint64_t i = 0; i < n; ++i)
    self->send(c, atom::tick_v, i);
  self->receive([](atom::tick, uint64_t) {});
  auto ns = std::chrono::duration<double, std::nano>(steady::now() - t0).count();
  self->send_exit(c, caf::exit_reason::user_shutdown);
  self->wait_for(c);
  return ns / static_cast<double>(n);
}

struct idle_state {
  static inline const char* name = "idle";
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t messages = 2'000'000;
  size_t actors = 10'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view k{argv[i]};
    if (k == "--messages")
      messages = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--actors")
      actors = std::strtoull(argv[i + 1], nullptr, 10);
  }
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{2});
  register_types(cfg);
  caf::actor_system sys{cfg};

  // 1. Bookkeeping per message, alternating runs so drift hits both.
  std::vector<double> plain, measured;
  for (int round = 0; round < 5; ++round) {
    plain.push_back(ns_per_message(sys, false, messages));
    measured.push_back(ns_per_message(sys, true, messages));
  }
  std::sort(plain.begin(), plain.end());
  std::sort(measured.begin(), measured.end());
  std::printf("status bookkeeping: %llu messages x 5 rounds; median ns/message: plain %.1f, "
              "measured %.1f, difference %.1f ns\n",
              static_cast<unsigned long long>(messages), plain[2], measured[2],
              measured[2] - plain[2]);

  // 2. A snapshot with `actors` session-like actors.
  std::vector<status_api> idle;
  idle.reserve(actors);
  for (size_t i = 0; i < actors; ++i)
    idle.push_back(sys.spawn([i](measured_pointer<status_api, idle_state> self)
                                 -> status_api::behavior_type {
      self->track("session", "user" + std::to_string(i) + "/s1");
      return {[=](atom::status) -> std::string {
        json_writer w;
        self->status_head(w);
        w.field("user_id", "user" + std::to_string(i))
            .field("session_id", "s1")
            .field("turns", uint64_t{3})
            .field("queued", uint64_t{0})
            .field("running", "")
            .end_object();
        return w.take();
      }};
    }));
  auto admin = spawn_admin(sys, admin_settings{});
  caf::scoped_actor self{sys};
  std::vector<double> ms;
  size_t bytes = 0;
  for (int round = 0; round < 5; ++round) {
    auto t0 = steady::now();
    self->request(admin, std::chrono::seconds(60), atom::snapshot_v, std::string{}, false)
        .receive([&](std::string& s) { bytes = s.size(); },
                 [&](caf::error& e) { std::printf("snapshot failed: %s\n", sys.render(e).c_str()); });
    ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("snapshot of %zu actors (+ the admin actor): median %.1f ms, %zu bytes (%.0f "
              "bytes/actor)\n",
              actors, ms[2], bytes, static_cast<double>(bytes) / static_cast<double>(actors));
  for (auto& a : idle)
    self->send_exit(a, caf::exit_reason::user_shutdown);
  self->send_exit(admin, caf::exit_reason::user_shutdown);
  for (auto& a : idle)
    self->wait_for(a);
  self->wait_for(admin);
  return 0;
}
