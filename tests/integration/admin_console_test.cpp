// The admin console's API and /metrics (docs/admin.md) against a live
// server: the actors, sessions and streams it lists are the ones the test
// started; stop and evict act on them; the token is enforced; logger levels
// change what is logged; /metrics passes `promtool check metrics` and its
// counters move by exactly what the test did.
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* admin_token = "console-secret-token";

std::string script() {
  // "slowly": 60 tokens 100 ms apart, long enough to be seen and stopped.
  std::string slow;
  for (int i = 0; i < 60; ++i)
    slow += "w" + std::to_string(i) + " ";
  // "glacially": 3,000 tokens 100 ms apart (5 minutes, well past a slow
  // browser start on a loaded machine), for the browser to find and stop.
  std::string glacial;
  for (int i = 0; i < 3000; ++i)
    glacial += "g" + std::to_string(i) + " ";
  // Anything else: three tokens 5 ms apart (apart, they come in separate
  // reads and count as inter-token gaps; together they would be one delta).
  return std::string{R"({"rules":[)"} + R"({"match":"glacially","reply":")" + glacial
         + R"(","token_delay_ms":100},)" + R"({"match":"slowly","reply":")" + slow
         + R"(","token_delay_ms":100},)" + R"({"match":".*","reply":"Hi there, friend.","token_delay_ms":5})" + "]}";
}

header_list bearer(const std::string& token = admin_token) {
  return {{"Authorization", "Bearer " + token}};
}

class admin_console_test : public ragtor_server_test {
protected:
  fake_openai fake_{script()};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_ADMIN__TOKEN"] = admin_token;
    env["RAGTOR_SERVER__DETACH_GRACE_MS"] = "0";
    return env;
  }

  json get_json(const std::string& path) {
    auto r = request(port(), "GET", path, {}, bearer());
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return json::parse(r.status == 200 ? r.body : "{}");
  }

  // The status objects of `path`'s array `key`.
  std::vector<json> list(const std::string& path, const std::string& key) {
    auto j = get_json(path);
    return j.has("/" + key) ? j.items("/" + key) : std::vector<json>{};
  }

  // Opens a slow turn and waits for its first token.
  sse_stream open_slow(const std::string& user, const std::string& request_id,
                       const std::string& how = "slowly") {
    auto s = open_sse(port(), chat_stream_path,
                      chat_body(user, "slow", "please answer " + how, "",
                                {{"request_id", request_id}}));
    EXPECT_EQ(s.status(), 200);
    for (int i = 0; i < 50; ++i) {
      auto ev = s.next_event(10s);
      if (!ev)
        break;
      if (!ev->is_comment && ev->data.find("\"token\"") != std::string::npos)
        break;
    }
    return s;
  }
};

bool has_session(const std::vector<json>& sessions, const std::string& user,
                 const std::string& session) {
  for (auto& s : sessions)
    if (s.str("/user_id") == user && s.str("/session_id") == session)
      return true;
  return false;
}

TEST_F(admin_console_test, the_token_is_enforced_on_every_admin_route_and_metrics) {
  for (std::string path : {"/admin/api/nodes", "/admin/api/actors", "/admin/api/sessions",
                           "/admin/api/streams", "/admin/api/loggers", "/metrics"}) {
    EXPECT_EQ(request(port(), "GET", path).status, 401) << path << " without a token";
    EXPECT_EQ(request(port(), "GET", path, {}, bearer("wrong-token")).status, 401)
        << path << " with a wrong token";
    EXPECT_EQ(request(port(), "GET", path, {}, bearer()).status, 200) << path;
  }
  EXPECT_EQ(request(port(), "POST", "/admin/api/streams/x/stop").status, 401);
  EXPECT_EQ(request(port(), "POST", "/admin/api/sessions/u/s/evict").status, 401);
  EXPECT_EQ(request(port(), "PUT", "/admin/api/loggers", R"({"name":"http","level":"off"})")
                .status,
            401);
  // The page itself holds no data: it asks for the token.
  auto page = request(port(), "GET", "/admin");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.header("content-type").find("text/html"), std::string::npos);
  EXPECT_NE(page.body.find("<html"), std::string::npos);
}

TEST_F(admin_console_test, actors_sessions_and_streams_are_the_ones_running) {
  for (int i = 1; i <= 3; ++i)
    ASSERT_TRUE(well_formed_stream(
        chat_stream(port(), chat_body("user" + std::to_string(i), "s1", "hello", ""))));
  auto a = open_slow("runner-a", "rq-slow-a");
  auto b = open_slow("runner-b", "rq-slow-b");

  auto sessions = list("/admin/api/sessions", "sessions");
  for (int i = 1; i <= 3; ++i)
    EXPECT_TRUE(has_session(sessions, "user" + std::to_string(i), "s1"));
  EXPECT_TRUE(has_session(sessions, "runner-a", "slow"));
  EXPECT_EQ(sessions.size(), 5u);

  auto streams = list("/admin/api/streams", "streams");
  std::set<std::string> ids;
  for (auto& s : streams) {
    ids.insert(s.str("/request_id"));
    EXPECT_EQ(s.str("/kind"), "stream");
    EXPECT_EQ(s.str("/stage"), "generating");
    EXPECT_GE(s.integer("/tokens"), 1);
    EXPECT_EQ(s.integer("/subscribers"), 1);
  }
  EXPECT_EQ(ids, (std::set<std::string>{"rq-slow-a", "rq-slow-b"}));

  // The common fields, on every actor; the fixed actors are there.
  auto actors = list("/admin/api/actors", "actors");
  std::multiset<std::string> kinds;
  for (auto& x : actors) {
    kinds.insert(x.str("/kind"));
    for (auto* f : {"/name", "/node", "/last_error"})
      EXPECT_TRUE(x.is_string(f)) << f << " in " << x.dump();
    for (auto* f : {"/id", "/uptime_ms", "/messages", "/mailbox", "/errors"})
      EXPECT_GE(x.integer(f), 0) << f << " in " << x.dump();
    EXPECT_GE(x.number("/handler_ms/p99"), x.number("/handler_ms/p50")) << x.dump();
  }
  for (auto* k : {"router", "store", "agent_pool", "session_manager", "admin", "cluster", "llm",
                  "summarizer", "kb_admin"})
    EXPECT_EQ(kinds.count(k), 1u) << k;
  EXPECT_EQ(kinds.count("session"), 5u);
  EXPECT_EQ(kinds.count("stream"), 2u);

  auto routers = list("/admin/api/actors?kind=router", "actors");
  ASSERT_EQ(routers.size(), 1u);
  EXPECT_GE(routers[0].integer("/messages"), 5) << "five turns were routed";
  EXPECT_GE(routers[0].integer("/routed"), 5);
  auto node = routers[0].str("/node");
  EXPECT_EQ(list("/admin/api/actors?kind=router&node=" + node, "actors").size(), 1u);
  EXPECT_EQ(list("/admin/api/actors?kind=router&node=elsewhere", "actors").size(), 0u);

  // One actor's details.
  auto store = list("/admin/api/actors?kind=store", "actors").at(0);
  auto detail =
      get_json("/admin/api/actors/" + node + "/" + std::to_string(store.integer("/id")));
  EXPECT_EQ(detail.str("/kind"), "store");
  EXPECT_GT(detail.integer("/committed_jobs"), 0);
  EXPECT_EQ(request(port(), "GET", "/admin/api/actors/" + node + "/999999999", {}, bearer()).status,
            404);

  auto nodes = get_json("/admin/api/nodes");
  ASSERT_EQ(nodes.items("/nodes").size(), 1u);
  auto self = nodes.items("/nodes")[0];
  EXPECT_EQ(self.str("/name"), nodes.str("/self"));
  EXPECT_EQ(self.str("/status"), "up");
  EXPECT_EQ(self.integer("/streams"), 2);
  EXPECT_EQ(self.integer("/sessions"), 5);
  EXPECT_GT(self.integer("/rss_bytes"), 0);
  EXPECT_GT(self.integer("/threads"), 1);

  a.close();
  b.close();
}

TEST_F(admin_console_test, stop_ends_a_running_stream_with_error_and_done) {
  auto s = open_slow("stopper", "rq-stop-me");
  auto r = request(port(), "POST", "/admin/api/streams/rq-stop-me/stop", {}, bearer());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).str("/status"), "stopping");
  auto rest = read_stream(s, 20s);
  ASSERT_TRUE(rest.done) << rest.statuses();
  ASSERT_FALSE(rest.errors.empty()) << rest.statuses();
  EXPECT_EQ(rest.errors[0].str("/code"), "cancelled") << rest.errors[0].dump();
  EXPECT_TRUE(rest.done->boolean("/content/partial"));
  EXPECT_EQ(request(port(), "POST", "/admin/api/streams/rq-no-such/stop", {}, bearer()).status,
            404);
  // The partial answer was stored.
  auto rows = db().messages("stopper", "slow");
  ASSERT_EQ(rows.size(), 2u);
}

TEST_F(admin_console_test, evict_ends_a_session_and_the_next_turn_starts_a_new_one) {
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("evictee", "s9", "hello", ""))));
  ASSERT_TRUE(has_session(list("/admin/api/sessions", "sessions"), "evictee", "s9"));
  auto r = request(port(), "POST", "/admin/api/sessions/evictee/s9/evict", {}, bearer());
  ASSERT_EQ(r.status, 200) << r.body;
  // The session actor quits at once; the directory forgets it when it is gone.
  auto deadline = clock_type::now() + 10s;
  while (has_session(list("/admin/api/sessions", "sessions"), "evictee", "s9")
         && clock_type::now() < deadline)
    std::this_thread::yield();
  EXPECT_FALSE(has_session(list("/admin/api/sessions", "sessions"), "evictee", "s9"));
  EXPECT_EQ(request(port(), "POST", "/admin/api/sessions/evictee/s9/evict", {}, bearer()).status,
            404);
  // The conversation goes on in a new session.
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("evictee", "s9", "hello", ""))));
  EXPECT_EQ(db().messages("evictee", "s9").size(), 4u);
}

TEST_F(admin_console_test, logger_levels_change_what_is_logged) {
  auto loggers = list("/admin/api/loggers", "loggers");
  std::set<std::string> names;
  for (auto& l : loggers)
    names.insert(l.str("/name"));
  for (auto* n : {"http", "store", "stream", "session", "llm", "cluster"})
    EXPECT_TRUE(names.count(n)) << n;

  auto put = [&](const std::string& body) {
    return request(port(), "PUT", "/admin/api/loggers", body, bearer());
  };
  ASSERT_EQ(put(R"({"name":"http","level":"warn"})").status, 200);
  for (auto& l : list("/admin/api/loggers", "loggers"))
    if (l.str("/name") == "http")
      EXPECT_EQ(l.str("/level"), "warn");
  // An info line of the http logger is dropped at warn...
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("quiet", "q1", "hello", ""))));
  ASSERT_EQ(request(port(), "POST", "/admin/api/sessions/quiet/q1/evict", {}, bearer()).status,
            200);
  // ...and written at info (the PUT itself logs at info after the change).
  ASSERT_EQ(put(R"({"name":"http","level":"info"})").status, 200);
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("loud", "l1", "hello", ""))));
  ASSERT_EQ(request(port(), "POST", "/admin/api/sessions/loud/l1/evict", {}, bearer()).status,
            200);
  ASSERT_TRUE(server().wait_for_log("evicted session loud/l1", 1, 10s));
  EXPECT_EQ(server().stderr_tail(1 << 20).find("evicted session quiet/q1"), std::string::npos);

  auto bad_level = put(R"({"name":"http","level":"loud"})");
  EXPECT_EQ(bad_level.status, 400);
  EXPECT_EQ(json::parse(bad_level.body).str("/error/field"), "level");
  auto bad_name = put(R"({"name":"nobody","level":"info"})");
  EXPECT_EQ(bad_name.status, 400);
  EXPECT_EQ(json::parse(bad_name.body).str("/error/field"), "name");
}

TEST_F(admin_console_test, the_event_feed_sends_the_view_once_a_second) {
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("feed", "f1", "hello", ""))));
  auto feed = open_sse_get(port(), "/admin/api/events?view=sessions", bearer());
  ASSERT_EQ(feed.status(), 200);
  EXPECT_NE(feed.header("content-type").find("text/event-stream"), std::string::npos);
  int seen = 0;
  while (seen < 2) {
    auto ev = feed.next_event(5s);
    ASSERT_TRUE(ev) << "no event within 5 s";
    if (ev->is_comment)
      continue;
    auto j = json::parse(ev->data);
    EXPECT_TRUE(has_session(j.items("/sessions"), "feed", "f1")) << ev->data;
    ++seen;
  }
  feed.close();
  EXPECT_EQ(request(port(), "GET", "/admin/api/events?view=bogus", {}, bearer()).status, 400);
  EXPECT_EQ(request(port(), "GET", "/admin/api/events?view=actor&actor=x", {}, bearer()).status,
            400);
}

// One sample's value in Prometheus text (0 when absent: a labelled series
// appears with its first event).
double sample(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos)
    return 0;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

TEST_F(admin_console_test, metrics_pass_promtool_and_move_by_what_the_test_did) {
  auto scrape = [&] {
    auto r = request(port(), "GET", "/metrics", {}, bearer());
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.header("content-type").find("text/plain"), std::string::npos);
    return r.body;
  };
  auto before = scrape();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(well_formed_stream(
        chat_stream(port(), chat_body("metered", "m" + std::to_string(i), "hello", ""))));
  auto s = open_slow("metered", "rq-metered");
  ASSERT_EQ(request(port(), "POST", "/admin/api/streams/rq-metered/stop", {}, bearer()).status,
            200);
  ASSERT_TRUE(read_stream(s, 20s).done);
  auto after = scrape();
  auto moved = [&](const std::string& series) { return sample(after, series) - sample(before, series); };
  // The same for one labelled series: name{key="value"}.
  auto moved_with = [&](const std::string& name, const std::string& key, const std::string& value) {
    return moved(name + "{" + key + "=\"" + value + "\"}");
  };
  // A request is counted when its handler returns, just after its last
  // bytes went out: the client can read `done` first. Scraped again (each
  // scrape one round trip, at most 100) until the fourth stream is counted.
  const std::string streams = "ragtor_http_requests_total{route=\"chat_stream\",code=\"200\"}";
  for (int i = 0; i < 100 && moved(streams) < 4; ++i)
    after = scrape();
  EXPECT_EQ(moved("ragtor_turns_total{outcome=\"completed\"}"), 3);
  EXPECT_EQ(moved("ragtor_turns_total{outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(moved("ragtor_turns_total{outcome=\"failed\"}"), 0);
  EXPECT_EQ(moved("ragtor_time_to_first_token_seconds_count"), 4);
  EXPECT_EQ(moved("ragtor_turn_duration_seconds_count"), 4);
  // Every turn was routed, read its context and called the model; none
  // named a KB, so none searched.
  auto phase = [&](const char* p) { return moved_with("ragtor_turn_phase_seconds_count", "phase", p); };
  EXPECT_EQ(phase("routed"), 4);
  EXPECT_EQ(phase("context"), 4);
  EXPECT_EQ(phase("model_called"), 4);
  EXPECT_EQ(phase("first_token"), 4);
  EXPECT_EQ(phase("evidence"), 0);
  EXPECT_EQ(sample(after, "ragtor_turn_phase_seconds_bucket{phase=\"context\",le=\"+Inf\"}"),
            sample(after, "ragtor_turn_phase_seconds_count{phase=\"context\"}"));
  EXPECT_GE(moved("ragtor_inter_token_latency_seconds_count"), 3);
  EXPECT_GE(moved("ragtor_tokens_streamed_total"), 4);
  EXPECT_EQ(moved("ragtor_http_requests_total{route=\"chat_stream\",code=\"200\"}"), 4);
  EXPECT_EQ(moved("ragtor_llm_requests_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(moved("ragtor_llm_requests_total{outcome=\"cancelled\"}"), 1);
  EXPECT_GE(moved("ragtor_store_commit_duration_seconds_count"), 1);
  EXPECT_EQ(sample(after, "ragtor_time_to_first_token_seconds_bucket{le=\"+Inf\"}"),
            sample(after, "ragtor_time_to_first_token_seconds_count"));
  EXPECT_EQ(sample(after, "ragtor_actors{kind=\"router\"}"), 1);
  EXPECT_GE(sample(after, "ragtor_active_sessions"), 4);
  // Each turn recalled memories and episodes through the store's index:
  // the user's first read them whole, later ones only what was new.
  auto lookups = [&](const char* served) {
    return moved_with("ragtor_recall_lookups_total", "served", served);
  };
  EXPECT_EQ(lookups("held") + lookups("added") + lookups("read"), 8);
  EXPECT_GE(lookups("read"), 2);
  EXPECT_GE(sample(after, "ragtor_recall_index_users"), 2);
  EXPECT_GT(sample(after, "ragtor_recall_index_bytes"), 0);
  // The actor clock: every turn's requests set timeouts on it, and most of
  // them fall after the deadline its thread already sleeps until (CAF's own
  // clock was woken for each one).
  auto clock_ops = moved("ragtor_actor_clock_operations_total");
  auto clock_wakeups = moved("ragtor_actor_clock_wakeups_total");
  EXPECT_GE(clock_ops, 4 * 4) << "a turn makes several requests";
  EXPECT_LT(clock_wakeups * 2, clock_ops) << clock_wakeups << " wake-ups for " << clock_ops;
  // The heap, read on the sampler's thread: a live server has some in use.
  EXPECT_GT(sample(after, "ragtor_heap_in_use_bytes"), 1 << 20);
  EXPECT_GE(sample(after, "ragtor_heap_free_bytes"), 0);
  // SQLite's part, as the store's connections published it after their
  // jobs: the turns' reads and writes filled their page caches.
  EXPECT_GT(moved("ragtor_sqlite_memory_bytes"), 0);

  // Valid exposition format, per Prometheus' own checker.
  temp_dir tmp{"metrics"};
  auto file = tmp.path() / "metrics.txt";
  {
    std::ofstream out{file};
    out << after;
  }
  auto check = run_command({"/bin/sh", "-c", "promtool check metrics < " + file.string()});
  EXPECT_TRUE(check.status.exited && check.status.code == 0) << check.output;
}

// The console in a real browser (Debian's Chromium, headless, driven by
// puppeteer-core: tests/browser/admin_console.mjs): the actor table lists
// the router, the store, an agent pool and the sessions; it sorts by
// mailbox; an actor's details refresh live; Stop on a running stream ends
// it, and its client receives error + done. Screenshots of every step go
// to the test's output directory (kept under $RAGTOR_TEST_ARTIFACTS when
// set, e.g. for CI).
TEST_F(admin_console_test, the_console_works_in_a_real_browser) {
  auto node = find_node();
  ASSERT_FALSE(node.empty()) << "node is not installed (scripts/install-sdk-deps installs it)";
  auto dir = source_dir() / "tests" / "browser";
  ASSERT_TRUE(std::filesystem::exists(dir / "node_modules" / "puppeteer-core"))
      << "puppeteer-core is not installed: run scripts/install-sdk-deps";
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/chromium"))
      << "chromium is not installed: run scripts/install-sdk-deps";
  // Light load: a few sessions, and the stream the browser stops.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(well_formed_stream(
        chat_stream(port(), chat_body("browser" + std::to_string(i), "s1", "hello", ""))));
  auto stream = open_slow("browser-stop", "rq-browser", "glacially");
  temp_dir out{"admin-browser"};
  auto shots = out.path();
  if (auto* keep = std::getenv("RAGTOR_TEST_ARTIFACTS"))
    shots = std::filesystem::path{keep} / "admin_console";
  auto run = run_command({node, (dir / "admin_console.mjs").string(), "--url",
                          "http://127.0.0.1:" + std::to_string(port()), "--token", admin_token,
                          "--out", shots.string(), "--stream", "rq-browser"},
                         {}, 120s);
  ASSERT_TRUE(run.status.clean()) << run.status.describe() << "\n" << run.output;
  EXPECT_NE(run.output.find("stream rq-browser stopped"), std::string::npos) << run.output;
  for (auto* shot : {"01-actors.png", "02-sorted.png", "03-detail.png", "04-streams.png",
                     "05-stopped.png"})
    EXPECT_GT(std::filesystem::file_size(shots / shot), 1000u) << shot;
  auto rest = read_stream(stream, 20s);
  ASSERT_TRUE(rest.done) << rest.statuses();
  ASSERT_FALSE(rest.errors.empty()) << rest.statuses();
  EXPECT_EQ(rest.errors[0].str("/code"), "cancelled");
}

// The console shows every user's sessions: a listen address beyond this
// machine without a token is refused at start, before anything listens
// (192.0.2.1 is TEST-NET: it could not be bound here anyway).
TEST(admin_console_start, a_non_loopback_address_without_a_token_refuses_to_start) {
  temp_dir tmp{"admin-start"};
  auto run = run_ragtor({"serve", "--listen", "192.0.2.1:8080", "--data-dir",
                         (tmp.path() / "data").string()},
                        {{"RAGTOR_AUTH__ALLOW_UNAUTHENTICATED", "true"}}, 30s);
  EXPECT_TRUE(run.status.exited && run.status.code == 2) << run.status.describe() << run.output;
  EXPECT_NE(run.output.find("[admin] token"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("listening"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace ragtor::test
