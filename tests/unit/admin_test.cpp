// The admin console's parts without HTTP (docs/admin.md): the Prometheus
// text of the metrics registry, named logger levels, the per-actor
// bookkeeping of measured actors with the node's actor directory, and the
// admin actor gathering status — listing an actor that does not answer as
// stuck instead of waiting for it, and stopping a stream by request id.
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/admin/admin.hpp"
#include "actors/admin/measured.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"
#include "protocol/type_ids.hpp"
#include "tests/support/json.hpp"

using namespace ragtor;
using ragtor::test::json;

namespace {

TEST(admin_metrics, histogram_buckets_are_cumulative_and_le_is_inclusive) {
  metrics::histogram h{{0.1, 1.0}};
  for (double x : {0.05, 0.1, 0.5, 1.0, 3.0})
    h.observe(x);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{2, 2, 1}));
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 4.65);
  metrics::registry r;
  r.turn(metrics::turn_outcome::completed);
  r.turn(metrics::turn_outcome::completed);
  r.turn(metrics::turn_outcome::client_gone);
  r.time_to_first_token.observe(0.003);
  r.phase(metrics::turn_phase::context, 0.0015);
  r.retrieval_duration.with("bm25_agent").observe(0.002);
  r.http_requests.with("chat_stream 200").inc(3);
  auto text = metrics::render(r, "# HELP x_extra y\n# TYPE x_extra gauge\nx_extra 7\n");
  EXPECT_NE(text.find("ragtor_turns_total{outcome=\"completed\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("ragtor_turns_total{outcome=\"client_gone\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ragtor_turns_total{outcome=\"failed\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("ragtor_time_to_first_token_seconds_bucket{le=\"0.001\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("ragtor_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ragtor_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ragtor_time_to_first_token_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(
      text.find("ragtor_retrieval_duration_seconds_bucket{agent=\"bm25_agent\",le=\"0.0025\"} 1\n"),
      std::string::npos);
  EXPECT_NE(text.find("ragtor_http_requests_total{route=\"chat_stream\",code=\"200\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE ragtor_turn_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("ragtor_turn_phase_seconds_bucket{phase=\"context\",le=\"0.001\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("ragtor_turn_phase_seconds_bucket{phase=\"context\",le=\"0.002\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ragtor_turn_phase_seconds_count{phase=\"routed\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("x_extra 7\n"), std::string::npos);
  // Every sample line belongs to a metric declared by a TYPE line before it.
  std::istringstream lines{text};
  std::set<std::string> declared;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# TYPE ")) {
      declared.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.starts_with("#"))
      continue;
    auto name = line.substr(0, line.find_first_of("{ "));
    bool ok = declared.count(name) > 0;
    for (auto* suffix : {"_bucket", "_sum", "_count"})
      if (name.ends_with(suffix))
        ok = ok || declared.count(name.substr(0, name.size() - std::string{suffix}.size())) > 0;
    EXPECT_TRUE(ok) << line;
  }
}

TEST(admin_loggers, levels_are_set_per_component_and_bad_names_are_refused) {
  auto level_of = [](const std::string& name) {
    for (auto& [n, l] : log::levels())
      if (n == name)
        return l;
    return std::string{"?"};
  };
  ASSERT_FALSE(log::set_level("store", "debug"));
  EXPECT_EQ(level_of("store"), "debug");
  EXPECT_EQ(log::get("store").level(), spdlog::level::debug);
  ASSERT_FALSE(log::set_level("http", "error"));
  EXPECT_EQ(level_of("http"), "error");
  EXPECT_EQ(level_of("store"), "debug") << "one logger's level leaves the others alone";
  auto bad_level = log::set_level("store", "verbose");
  ASSERT_TRUE(bad_level);
  EXPECT_NE(bad_level->find("unknown level"), std::string::npos);
  EXPECT_TRUE(log::set_level("nobody", "info"));
  ASSERT_FALSE(log::set_level("*", "info"));
  for (auto& [n, l] : log::levels())
    EXPECT_EQ(l, "info") << n;
  EXPECT_EQ(log::levels().size(), log::components.size());
}

// A measured test actor: answers `status`, or (stuck) never does.
struct probe_state {
  static inline const char* name = "probe";
  bool stuck = false;
};

// `ping` answers once the probe runs (and so is in the directory).
using probe_actor =
    caf::typed_actor<caf::replies_to<atom::ping>::with<bool>>::extend_with<status_api>;
using probe_ptr = measured_pointer<probe_actor, probe_state>;

probe_actor spawn_probe(caf::actor_system& sys, std::string name, bool stuck) {
  return sys.spawn([name, stuck](probe_ptr self) -> probe_actor::behavior_type {
    self->state.stuck = stuck;
    self->track("probe", name);
    return {
        [=](atom::ping) { return true; },
        [=](atom::status) -> caf::result<std::string> {
          if (self->state.stuck)
            return self->make_response_promise<std::string>();  // never delivered
          json_writer w;
          self->status_head(w);
          w.field("probe", true).end_object();
          return w.take();
        },
    };
  });
}

class admin_actor_test : public ::testing::Test {
protected:
  caf::actor_system_config cfg_ = [] {
    caf::actor_system_config c;
    c.set("scheduler.max-threads", size_t{2});
    register_types(c);
    return c;
  }();
  caf::actor_system sys_{cfg_};

  std::string ask(const probe_actor& a) {
    caf::scoped_actor self{sys_};
    std::string out;
    self->request(a, std::chrono::seconds(30), atom::status_v)
        .receive([&](std::string& s) { out = std::move(s); },
                 [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
    return out;
  }

  ~admin_actor_test() override { actor_directory::instance().forget(sys_); }
};

TEST_F(admin_actor_test, a_measured_actor_counts_its_messages_and_leaves_the_directory_on_exit) {
  auto p = spawn_probe(sys_, "p1", false);
  for (int i = 0; i < 10; ++i)
    ask(p);
  auto j = json::parse(ask(p));
  EXPECT_EQ(j.str("/kind"), "probe");
  EXPECT_EQ(j.str("/name"), "p1");
  EXPECT_EQ(j.str("/node"), "local");
  EXPECT_EQ(j.integer("/id"), static_cast<int64_t>(p->id()));
  // The eleventh status is being handled while it is written: ten before it.
  EXPECT_EQ(j.integer("/messages"), 10);
  EXPECT_EQ(j.integer("/mailbox"), 0);
  EXPECT_GE(j.number("/handler_ms/p99"), j.number("/handler_ms/p50"));
  EXPECT_GT(j.number("/handler_ms/p99"), 0.0);
  EXPECT_TRUE(j.boolean("/probe"));
  auto& dir = actor_directory::instance();
  ASSERT_EQ(dir.count(sys_, "probe"), 1u);
  EXPECT_TRUE(dir.find_named(sys_, "probe", "p1"));
  {
    caf::scoped_actor self{sys_};
    self->send_exit(p, caf::exit_reason::user_shutdown);
    self->wait_for(p);
  }
  // The actor leaves the directory in cleanup, before wait_for is told.
  EXPECT_EQ(dir.count(sys_, "probe"), 0u);
}

TEST_F(admin_actor_test, a_snapshot_lists_every_actor_and_a_stuck_one_as_stuck) {
  admin_settings as;
  as.node = "n1";
  as.status_timeout = std::chrono::milliseconds(100);
  auto admin = spawn_admin(sys_, as);
  auto ok = spawn_probe(sys_, "fine", false);
  auto stuck = spawn_probe(sys_, "stuck", true);
  caf::scoped_actor self{sys_};
  // Actors initialize on a scheduler thread: wait until all three run.
  for (auto& p : {ok, stuck})
    self->request(p, std::chrono::seconds(30), atom::ping_v)
        .receive([](bool) {}, [&](caf::error& e) { FAIL() << sys_.render(e); });
  self->request(admin, std::chrono::seconds(30), atom::status_v)
      .receive([](std::string&) {}, [&](caf::error& e) { FAIL() << sys_.render(e); });
  std::string arr;
  self->request(admin, std::chrono::seconds(30), atom::snapshot_v, std::string{}, false)
      .receive([&](std::string& s) { arr = std::move(s); },
               [&](caf::error& e) { FAIL() << sys_.render(e); });
  auto items = json::parse(arr).items();
  std::map<std::string, json> by_name;
  for (auto& x : items)
    by_name.emplace(x.str("/name"), x);
  ASSERT_EQ(items.size(), 3u) << arr;
  EXPECT_EQ(by_name.at("fine").str("/node"), "n1");
  EXPECT_TRUE(by_name.at("fine").boolean("/probe"));
  EXPECT_TRUE(by_name.at("stuck").boolean("/stuck"));
  EXPECT_EQ(by_name.at("admin").str("/kind"), "admin");
  // Kind filter, one actor by id, and an unknown id.
  self->request(admin, std::chrono::seconds(30), atom::snapshot_v, std::string{"admin"}, true)
      .receive([&](std::string& s) { EXPECT_EQ(json::parse(s).items().size(), 1u) << s; },
               [&](caf::error& e) { FAIL() << sys_.render(e); });
  self->request(admin, std::chrono::seconds(30), atom::status_v, std::string{"n1"},
                static_cast<uint64_t>(ok->id()))
      .receive([&](std::string& s) { EXPECT_EQ(json::parse(s).str("/name"), "fine"); },
               [&](caf::error& e) { FAIL() << sys_.render(e); });
  self->request(admin, std::chrono::seconds(30), atom::status_v, std::string{"n1"},
                uint64_t{987654321})
      .receive([&](std::string&) { ADD_FAILURE() << "an unknown actor answered"; },
               [&](caf::error&) {});
  self->request(admin, std::chrono::seconds(30), atom::stop_v, std::string{"rq-none"}, false)
      .receive([&](bool found) { EXPECT_FALSE(found); },
               [&](caf::error& e) { FAIL() << sys_.render(e); });
  for (auto& a : {caf::actor_cast<caf::actor>(admin), caf::actor_cast<caf::actor>(ok),
                  caf::actor_cast<caf::actor>(stuck)})
    self->send_exit(a, caf::exit_reason::user_shutdown);
  self->wait_for(admin, ok, stuck);
}

}  // namespace
