// Several ragtor nodes as one service (docs/cluster.md): real `ragtor serve`
// processes on loopback, talking BASP, sharing one PostgreSQL database.
// Each node's data dir holds the fixture KB (ingested per node). Waiting is
// on the nodes' logs (inotify), never on sleeps; every wait is bounded.
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/chat_client.hpp"
#include "tests/support/fake_openai.hpp"
#include "tests/support/pg_scratch.hpp"
#include "tests/support/os_util.hpp"
#include "tests/support/ragtor_process.hpp"

namespace ragtor::test {
namespace {

constexpr const char* question = "How long do the batteries of the Lumenlatch K7 last?";
constexpr int heartbeat_ms = 100;
constexpr int failure_timeout_ms = 500;

struct node_spec {
  std::string name;
  std::string roles;
  uint16_t basp = 0;
};

class cluster_test : public testing::Test {
protected:
  void SetUp() override {
    auto dsn = test_postgres_dsn();
    if (dsn.empty()) {
      if (auto* req = std::getenv("RAGTOR_REQUIRE_POSTGRES"); req && std::string{req} == "1")
        FAIL() << "RAGTOR_REQUIRE_POSTGRES=1 but RAGTOR_TEST_POSTGRES_DSN is not set";
      GTEST_SKIP() << "a cluster needs PostgreSQL: set RAGTOR_TEST_POSTGRES_DSN";
    }
    db_ = std::make_unique<scratch_database>(dsn);
  }

  // Declares a node (its BASP port is fixed, so a restart keeps its address).
  void add(const std::string& name, const std::string& roles) {
    specs_[name] = node_spec{name, roles, free_port()};
    auto dir = tmp_.path() / name;
    auto ingest = run_ingest(dir, "test", fixture_kb_files());
    ASSERT_TRUE(ingest.status.clean()) << ingest.output;
  }

  env_vars env_of(const node_spec& n) {
    std::string seeds;
    for (auto& [other, spec] : specs_)
      if (other != n.name)
        seeds += (seeds.empty() ? "" : ",") + std::string{"127.0.0.1:"} + std::to_string(spec.basp);
    env_vars env = extra_env_;
    env["RAGTOR_STORE__POSTGRES_DSN"] = db_->dsn();
    env["RAGTOR_CLUSTER__NODE_NAME"] = n.name;
    env["RAGTOR_CLUSTER__LISTEN"] = "127.0.0.1:" + std::to_string(n.basp);
    env["RAGTOR_CLUSTER__SEEDS"] = seeds;
    env["RAGTOR_CLUSTER__ROLES"] = n.roles;
    env["RAGTOR_CLUSTER__HEARTBEAT_MS"] = std::to_string(heartbeat_ms);
    env["RAGTOR_CLUSTER__FAILURE_TIMEOUT_MS"] = std::to_string(failure_timeout_ms);
    return env;
  }

  ragtor_process& start(const std::string& name) {
    auto& spec = specs_.at(name);
    nodes_[name] = std::make_unique<ragtor_process>(tmp_.path() / name, env_of(spec));
    return *nodes_[name];
  }

  ragtor_process& node(const std::string& name) { return *nodes_.at(name); }

  // Waits until `observer` logged that `peer` is `status` for the
  // `count`-th time.
  bool saw(const std::string& observer, const std::string& peer, const std::string& status,
           size_t count = 1, std::chrono::milliseconds timeout = 20s) {
    auto needle = "node " + peer + " (127.0.0.1:" + std::to_string(specs_.at(peer).basp)
                  + ") is " + status;
    return node(observer).wait_for_log(needle, count, timeout);
  }

  // One search through `via`; the node that served it ("" on failure).
  std::string search_served_by(const std::string& via) {
    auto r = request(node(via).port(), "POST", "/api/v1/kbs/test/search",
                     R"({"query":"Lumenlatch K7 battery life","top_k":3})");
    if (r.status != 200)
      return "";
    auto j = json::parse(r.body);
    if (j.items("/retrieval_results").empty())
      return "";
    return j.has("/served_by") ? j.str("/served_by") : "";
  }

  // The log tails of `names`, each under its name (for failure messages).
  std::string logs_of(std::initializer_list<const char*> names) {
    std::string out;
    for (auto* n : names)
      out += std::string{n} + ":\n" + node(n).stderr_tail() + "\n";
    return out;
  }

  // Who serves once `n` searches in a row through `via` succeed, searching
  // again as soon as one answers, for up to `within` ("" if they never
  // do): for tests about who serves, not about the first instants after a
  // join. Two nodes that dial each other at once may lose one of the two
  // connections just after "up" (seen in a full suite on 2026-11-26:
  // "connection to node r1 lost" 17 ms after "r1 is up", the TLS test's 50
  // searches all failing within 0.4 s); the cluster dials again a
  // heartbeat later. The loss can come after a first search succeeded: a
  // clean-clone run on 11-26 saw the TLS test's chat turn, right after one
  // served search, find no documents. (Searches now wait for a lost replica
  // to come back: docs/cluster.md; pool_replicas.* test that.)
  std::string served_steadily(const std::string& via, int n = 3,
                              std::chrono::seconds within = std::chrono::seconds(20)) {
    auto until = std::chrono::steady_clock::now() + within;
    std::string who;
    int in_a_row = 0;
    while (in_a_row < n && std::chrono::steady_clock::now() < until) {
      who = search_served_by(via);
      in_a_row = who.empty() ? 0 : in_a_row + 1;
    }
    return in_a_row == n ? who : "";
  }

  // /readyz of `via` once it answers 200, or its last answer after
  // `within`: a node that just started may still be not ready (its store
  // ping waits up to 2 s; a clean-clone run on 11-26 saw it time out once
  // on a loaded machine right after the node came up).
  http_response ready_within(const std::string& via,
                             std::chrono::seconds within = std::chrono::seconds(20)) {
    auto until = std::chrono::steady_clock::now() + within;
    auto r = request(node(via).port(), "GET", "/readyz");
    while (r.status != 200 && std::chrono::steady_clock::now() < until)
      r = request(node(via).port(), "GET", "/readyz");
    return r;
  }

  // fe (frontend only) and two retrieval replicas r1, r2, all up in fe's view.
  void start_frontend_and_replicas() {
    add("fe", "frontend");
    add("r1", "retrieval");
    add("r2", "retrieval");
    start("r1");
    start("r2");
    start("fe");
    ASSERT_TRUE(saw("fe", "r1", "up")) << node("fe").stderr_tail();
    ASSERT_TRUE(saw("fe", "r2", "up")) << node("fe").stderr_tail();
  }

  // Frontends a and b, each hosting the KB too, up in each other's view.
  void start_two_frontends() {
    add("a", "frontend,retrieval");
    add("b", "frontend,retrieval");
    start("a");
    start("b");
    ASSERT_TRUE(saw("a", "b", "up")) << node("a").stderr_tail();
    ASSERT_TRUE(saw("b", "a", "up")) << node("b").stderr_tail();
  }

  json members(const std::string& via) {
    return json::parse(request(node(via).port(), "GET", "/api/v1/cluster").body);
  }

  std::string status_in(const json& m, const std::string& name) {
    for (auto& n : m.items("/nodes"))
      if (n.str("/name") == name)
        return n.str("/status");
    return "";
  }

  std::unique_ptr<scratch_database> db_;
  temp_dir tmp_{"ragtor-cluster"};
  std::map<std::string, node_spec> specs_;
  std::map<std::string, std::unique_ptr<ragtor_process>> nodes_;
  env_vars extra_env_;
};

// A frontend and two retrieval replicas: searches and chat turns through
// the frontend are served by both replicas, and the membership API lists
// all three as up.
TEST_F(cluster_test, a_frontend_uses_both_retrieval_replicas) {
  ASSERT_NO_FATAL_FAILURE(start_frontend_and_replicas());

  auto m = members("fe");
  EXPECT_EQ(m.str("/self"), "fe");
  EXPECT_EQ(m.items("/nodes").size(), 3u) << m.dump();
  EXPECT_EQ(status_in(m, "r1"), "up");
  EXPECT_EQ(status_in(m, "r2"), "up");
  auto ready = ready_within("fe");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(json::parse(ready.body).str("/checks/cluster"), "joined") << ready.body;

  // Who serves once the cluster serves at all (a full suite of 2026-11-26,
  // the first run after a rebuild with a sanitizer build beside it, saw a
  // search fail right after "up", as the TLS test's did): then every
  // search must succeed.
  ASSERT_NE(served_steadily("fe"), "") << node("fe").stderr_tail();
  std::map<std::string, int> served;
  for (int i = 0; i < 6; ++i)
    ++served[search_served_by("fe")];
  EXPECT_EQ(served.count(""), 0u) << "a search failed";
  EXPECT_GE(served["r1"], 1);
  EXPECT_GE(served["r2"], 1);
  EXPECT_EQ(served.count("fe"), 0u) << "the frontend hosts no agents";

  for (int i = 0; i < 3; ++i) {
    auto r = chat_stream(node("fe").port(),
                         chat_body("u-remote", "s" + std::to_string(i), question, "test"));
    ASSERT_TRUE(well_formed_stream(r));
    EXPECT_TRUE(r.errors.empty()) << r.statuses();
    EXPECT_NE(r.answer().find("fourteen months"), std::string::npos) << r.answer();
  }
}

// BASP over TLS ([cluster] tls_*): the nodes join through caf_openssl with
// the test certificate (CN localhost, IP 127.0.0.1, its own CA) and a
// search through the frontend is served by the replica.
TEST_F(cluster_test, nodes_join_and_serve_over_tls) {
  auto tls = std::string{RAGTOR_SOURCE_DIR} + "/tests/data/tls/";
  extra_env_["RAGTOR_CLUSTER__TLS_CERTIFICATE"] = tls + "cert.pem";
  extra_env_["RAGTOR_CLUSTER__TLS_KEY"] = tls + "key.pem";
  extra_env_["RAGTOR_CLUSTER__TLS_CA"] = tls + "cert.pem";
  add("fe", "frontend");
  add("r1", "retrieval");
  start("r1");
  start("fe");
  ASSERT_TRUE(saw("fe", "r1", "up")) << node("fe").stderr_tail();
  EXPECT_TRUE(node("fe").wait_for_log("(TLS)", 1, 10s)) << node("fe").stderr_tail();
  EXPECT_EQ(served_steadily("fe"), "r1")
      << logs_of({"fe", "r1"});
  auto r = chat_stream(node("fe").port(), chat_body("u-tls", "s1", question, "test"));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_TRUE(r.errors.empty()) << r.statuses();
  EXPECT_NE(r.answer().find("fourteen months"), std::string::npos)
      << r.answer() << "\n" << logs_of({"fe", "r1"});
}

// KB content is shared through the store: a document ingested through the
// frontend is found by searches served by each replica, and a KB created
// through the frontend appears on the replicas. The replicas look at the
// store on their own only every ten minutes here: the new versions reach
// them because the frontend announces them over the cluster.
TEST_F(cluster_test, an_ingest_through_the_frontend_reaches_every_replica) {
  extra_env_["RAGTOR_CLUSTER__KB_SYNC_MS"] = "600000";
  ASSERT_NO_FATAL_FAILURE(start_frontend_and_replicas());

  auto ingested_at = std::chrono::steady_clock::now();
  auto ingest = request(node("fe").port(), "POST", "/api/v1/kbs/test/documents",
                        R"({"documents":[{"id":"quokka","title":"Quokka harbour light",)"
                        R"("text":"The Quokka harbour lighthouse flashes violet every nine seconds."}]})");
  ASSERT_EQ(ingest.status, 200) << ingest.body;
  // Each replica logs when it applied the store's version.
  for (auto r : {"r1", "r2"})
    ASSERT_TRUE(node(r).wait_for_log("knowledge base \"test\": synced to store version", 1, 20s))
        << node(r).stderr_tail();
  auto synced_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - ingested_at)
                       .count();
  std::printf("[ measure  ] ingested document searchable on both replicas after %lld ms\n",
              static_cast<long long>(synced_ms));
  std::map<std::string, int> found;
  for (int i = 0; i < 6; ++i) {
    auto r = request(node("fe").port(), "POST", "/api/v1/kbs/test/search",
                     R"({"query":"Quokka lighthouse violet","top_k":3})");
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body);
    auto hits = j.items("/retrieval_results");
    ASSERT_FALSE(hits.empty()) << r.body;
    EXPECT_EQ(hits[0].str("/metadata/doc_id"), "quokka") << r.body;
    ++found[j.str("/served_by")];
  }
  EXPECT_GE(found["r1"], 1);
  EXPECT_GE(found["r2"], 1);

  auto created = request(node("fe").port(), "POST", "/api/v1/kbs",
                         R"({"name":"fresh","description":"made on the frontend"})");
  ASSERT_EQ(created.status, 201) << created.body;
  for (auto r : {"r1", "r2"})
    ASSERT_TRUE(node(r).wait_for_log("knowledge base \"fresh\" created from the store", 1, 20s))
        << node(r).stderr_tail();
}

// SIGKILL of a retrieval replica during a bounded load of turns: no turn
// fails (queries in flight there are retried on the other replica), the
// frontend marks it down, and after a restart under the same name it is
// up and serves searches again.
TEST_F(cluster_test, a_killed_replica_is_detected_and_rejoins) {
  ASSERT_NO_FATAL_FAILURE(start_frontend_and_replicas());

  constexpr int clients = 4;
  constexpr int turns_each = 10;
  std::atomic<int> completed{0}, failed{0}, malformed{0};
  std::atomic<bool> killed{false};
  auto port = node("fe").port();
  std::vector<std::thread> load;
  for (int c = 0; c < clients; ++c)
    load.emplace_back([&, c] {
      for (int i = 0; i < turns_each; ++i) {
        auto r = chat_stream(port, chat_body("u-load-" + std::to_string(c),
                                             "s" + std::to_string(i), question, "test"),
                             30s);
        if (!well_formed_stream(r))
          ++malformed;
        else if (!r.errors.empty())
          ++failed;
        else
          ++completed;
      }
    });
  // Kill once a quarter of the turns went through.
  while (completed.load() + failed.load() + malformed.load() < clients * turns_each / 4)
    std::this_thread::yield();
  auto killed_at = std::chrono::steady_clock::now();
  node("r1").kill9();
  killed = true;
  ASSERT_TRUE(saw("fe", "r1", "down", 1, std::chrono::milliseconds(failure_timeout_ms * 4)))
      << node("fe").stderr_tail();
  auto detected_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - killed_at)
                         .count();
  for (auto& t : load)
    t.join();
  EXPECT_EQ(malformed.load(), 0) << "every turn ends with done";
  EXPECT_EQ(failed.load(), 0) << "retried on the other replica";
  EXPECT_EQ(completed.load(), clients * turns_each);
  EXPECT_EQ(status_in(members("fe"), "r1"), "down");
  std::printf("[ measure  ] SIGKILL detected after %lld ms (failure_timeout %d ms)\n",
              static_cast<long long>(detected_ms), failure_timeout_ms);

  // Searches go to r2 alone meanwhile.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(search_served_by("fe"), "r2");

  start("r1");
  ASSERT_TRUE(saw("fe", "r1", "up", 2)) << node("fe").stderr_tail();
  EXPECT_EQ(status_in(members("fe"), "r1"), "up");
  std::set<std::string> served;
  for (int i = 0; i < 6; ++i)
    served.insert(search_served_by("fe"));
  EXPECT_TRUE(served.count("r1")) << "the restarted replica serves again";
  EXPECT_FALSE(served.count(""));
}

// SIGSTOP (a silent partition: the connection stays open, nothing answers):
// the heartbeat marks the replica suspect and traffic moves to the other;
// after SIGCONT it is up again.
TEST_F(cluster_test, a_stopped_replica_is_suspected_and_resumes) {
  ASSERT_NO_FATAL_FAILURE(start_frontend_and_replicas());

  ASSERT_EQ(::kill(node("r1").pid(), SIGSTOP), 0);
  bool suspected = saw("fe", "r1", "suspect", 1, std::chrono::milliseconds(failure_timeout_ms * 6));
  if (!suspected)
    ::kill(node("r1").pid(), SIGCONT);
  ASSERT_TRUE(suspected) << node("fe").stderr_tail();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(search_served_by("fe"), "r2");
  auto r = chat_stream(node("fe").port(), chat_body("u-stop", "s", question, "test"));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_TRUE(r.errors.empty()) << r.statuses();

  ASSERT_EQ(::kill(node("r1").pid(), SIGCONT), 0);
  ASSERT_TRUE(saw("fe", "r1", "up", 2)) << node("fe").stderr_tail();
  std::set<std::string> served;
  for (int i = 0; i < 6; ++i)
    served.insert(search_served_by("fe"));
  EXPECT_TRUE(served.count("r1"));
}

// Two frontends, one conversation: turns alternate between them (and some
// go to both at once); the conversation has one owner, so the stored
// messages are strictly ordered, each user message followed by its answer,
// with no duplicate and no gap.
TEST_F(cluster_test, two_frontends_keep_one_conversation_in_order) {
  // One model for both nodes, so each answer's prompt can be read; no
  // summaries, so the last chat request is always the answer's.
  fake_openai model;
  for (auto& [key, value] : model_env(model))
    extra_env_[key] = value;
  extra_env_["RAGTOR_SUMMARY__MODE"] = "off";
  ASSERT_NO_FATAL_FAILURE(start_two_frontends());

  int sent = 0;
  for (int i = 0; i < 6; ++i) {
    auto via = i % 2 ? "a" : "b";
    auto r = chat_stream(node(via).port(),
                         chat_body("u-both", "conv", "question " + std::to_string(sent++) + ": "
                                                         + question, "test"));
    ASSERT_TRUE(well_formed_stream(r));
    EXPECT_TRUE(r.errors.empty()) << r.statuses();
    // The turn before went through the other frontend; its question and
    // answer are in this answer's prompt history.
    if (i > 0) {
      auto prompt = model.stats().str("/last_chat_request");
      EXPECT_NE(prompt.find("question " + std::to_string(i) + ": "), std::string::npos);
      EXPECT_NE(prompt.find("question " + std::to_string(i - 1) + ": "), std::string::npos)
          << "turn " << i << " through " << via << " does not see the turn before: " << prompt;
    }
  }
  // Two at once, one through each frontend.
  std::thread other([&] {
    auto r = chat_stream(node("a").port(), chat_body("u-both", "conv", "question 6", "test"));
    EXPECT_TRUE(well_formed_stream(r));
  });
  auto r = chat_stream(node("b").port(), chat_body("u-both", "conv", "question 7", "test"));
  EXPECT_TRUE(well_formed_stream(r));
  other.join();
  sent += 2;

  for (auto via : {"a", "b"}) {
    auto list = json::parse(request(node(via).port(), "GET",
                                    "/api/v1/conversations?user_id=u-both")
                                .body);
    auto convs = list.items("/conversations");
    ASSERT_EQ(convs.size(), 1u) << "one conversation, seen the same from " << via;
    auto page = json::parse(request(node(via).port(), "GET",
                                    "/api/v1/conversations/" + convs[0].str("/conversation_id")
                                        + "/messages?user_id=u-both&limit=100")
                                .body);
    auto msgs = page.items("/messages");
    ASSERT_EQ(msgs.size(), static_cast<size_t>(2 * sent)) << page.dump();
    std::set<std::string> questions;
    for (size_t i = 0; i < msgs.size(); ++i) {
      EXPECT_EQ(msgs[i].str("/role"), i % 2 ? "assistant" : "user") << "message " << i;
      if (i % 2 == 0)
        questions.insert(msgs[i].str("/content"));
      if (i > 0)
        EXPECT_GT(msgs[i].integer("/seq"), msgs[i - 1].integer("/seq"));
    }
    EXPECT_EQ(questions.size(), static_cast<size_t>(sent)) << "no duplicate";
  }
}

// A turn running on one frontend is stopped through the other.
TEST_F(cluster_test, stop_works_from_any_frontend) {
  extra_env_["RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS"] = "150";
  ASSERT_NO_FATAL_FAILURE(start_two_frontends());

  for (int i = 0; i < 4; ++i) {
    // Different conversations land on either owner; stop each through the
    // frontend the client did not use.
    auto via = i % 2 ? "a" : "b";
    auto other = i % 2 ? "b" : "a";
    auto rid = "stop-me-" + std::to_string(i);
    auto stream = open_sse(node(via).port(), chat_stream_path,
                           chat_body("u-stop", "conv-" + std::to_string(i), question, "test",
                                     {{"request_id", rid}}));
    ASSERT_EQ(stream.status(), 200);
    // Wait for the first token: the turn is generating.
    bool generating = false;
    while (auto ev = stream.next_event(10s)) {
      if (ev->data.find("\"status\":\"token\"") != std::string::npos) {
        generating = true;
        break;
      }
    }
    ASSERT_TRUE(generating);
    auto stop = request(node(other).port(), "POST", "/api/v1/chat/stop",
                        R"({"user_id":"u-stop","request_id":")" + rid + "\"}");
    ASSERT_EQ(stop.status, 200) << stop.body;
    EXPECT_NE(stop.body.find("\"stopped\""), std::string::npos) << stop.body;
    auto rest = read_stream(stream, 20s);
    ASSERT_TRUE(rest.done.has_value()) << rest.statuses();
    ASSERT_FALSE(rest.errors.empty()) << "a stopped turn ends with error + done";
    EXPECT_EQ(rest.errors.back().str("/code"), "cancelled");
    EXPECT_TRUE(rest.done->boolean("/content/partial"));
  }
}

// The owner of (user, session) among `nodes`, computed as the session
// managers do (rendezvous hashing with FNV-1a, docs/cluster.md).
std::string owner_among(const std::string& user, const std::string& session,
                        const std::vector<std::string>& nodes) {
  std::string best;
  uint64_t best_score = 0;
  for (auto& node : nodes) {
    uint64_t h = 1469598103934665603ull;
    for (auto part : {std::string_view{user}, std::string_view{"\x1f"}, std::string_view{session},
                      std::string_view{"\x1f"}, std::string_view{node}})
      for (unsigned char c : part)
        h = (h ^ c) * 1099511628211ull;
    if (best.empty() || h > best_score || (h == best_score && node < best)) {
      best = node;
      best_score = h;
    }
  }
  return best;
}

// A client that drops its stream re-attaches through the other frontend
// (GET /api/v1/chat/stream/{id} with Last-Event-ID): the events after the
// last one it saw, nothing lost or repeated, whichever node owns the turn.
TEST_F(cluster_test, a_stream_resumes_through_any_frontend) {
  extra_env_["RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS"] = "40";
  extra_env_["RAGTOR_SERVER__DETACH_GRACE_MS"] = "20000";
  ASSERT_NO_FATAL_FAILURE(start_two_frontends());

  for (int i = 0; i < 4; ++i) {
    auto via = i % 2 ? "a" : "b";
    auto other = i % 2 ? "b" : "a";
    auto rid = "resume-me-" + std::to_string(i);
    auto sid = "conv-" + std::to_string(i);
    auto first = open_sse(node(via).port(), chat_stream_path,
                          chat_body("u-resume", sid, question, "test", {{"request_id", rid}}));
    ASSERT_EQ(first.status(), 200);
    std::string head, last_id;
    int tokens = 0;
    while (tokens < 3) {
      auto ev = first.next_event(10s);
      ASSERT_TRUE(ev.has_value()) << "no token from " << via;
      if (ev->is_comment)
        continue;
      last_id = ev->id;
      auto j = json::parse(ev->data);
      ASSERT_NE(j.str("/status"), "done") << "the answer finished before it could be cut";
      if (j.str("/status") == "token") {
        head += j.str("/content");
        ++tokens;
      }
    }
    first.close();
    auto again = open_sse_get(node(other).port(),
                              "/api/v1/chat/stream/" + rid + "?user_id=u-resume",
                              {{"Last-Event-ID", last_id}});
    ASSERT_EQ(again.status(), 200) << "resumed through " << other;
    auto rest = read_stream(again, 30s);
    ASSERT_TRUE(rest.done.has_value()) << rest.statuses();
    EXPECT_TRUE(rest.errors.empty()) << rest.statuses();
    EXPECT_FALSE(rest.done->boolean("/content/partial"));
    EXPECT_EQ(head + rest.tokens, rest.done->str("/content/answer"))
        << "tokens lost or repeated across the re-attach through " << other;
  }
}

// SIGKILL of the frontend owning conversations mid-turn: clients that
// followed those turns through the other frontend get error + done, every
// acknowledged user message is stored exactly once, and the conversations
// go on through the surviving frontend.
TEST_F(cluster_test, the_owner_dies_mid_turn_and_the_conversation_goes_on) {
  // About 80 tokens an answer: a turn lasts ~2 s, long enough to be cut.
  extra_env_["RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS"] = "25";
  ASSERT_NO_FATAL_FAILURE(start_two_frontends());

  // Four conversations owned by a and two by b, all sent through b.
  std::vector<std::string> on_a, on_b;
  for (int i = 0; on_a.size() < 4 || on_b.size() < 2; ++i) {
    auto sid = "conv-" + std::to_string(i);
    auto& list = owner_among("u-owner", sid, {"a", "b"}) == "a" ? on_a : on_b;
    if (list.size() < (&list == &on_a ? 4u : 2u))
      list.push_back(sid);
  }
  std::vector<std::string> sessions = on_a;
  sessions.insert(sessions.end(), on_b.begin(), on_b.end());
  std::vector<sse_stream> streams;
  for (auto& sid : sessions) {
    streams.push_back(open_sse(node("b").port(), chat_stream_path,
                               chat_body("u-owner", sid, "first: " + std::string{question}, "test")));
    ASSERT_EQ(streams.back().status(), 200);
  }
  // Every turn acknowledged (start) and generating (a token).
  for (auto& stream : streams) {
    bool generating = false;
    while (auto ev = stream.next_event(10s))
      if (ev->data.find("\"status\":\"token\"") != std::string::npos) {
        generating = true;
        break;
      }
    ASSERT_TRUE(generating);
  }
  node("a").kill9();
  for (size_t i = 0; i < streams.size(); ++i) {
    auto rest = read_stream(streams[i], 30s);
    ASSERT_TRUE(rest.done.has_value()) << sessions[i] << ": " << rest.statuses();
    bool owned_by_a = i < on_a.size();
    if (owned_by_a) {
      ASSERT_FALSE(rest.errors.empty()) << sessions[i];
      EXPECT_NE(rest.errors.back().str("/message").find("went down"), std::string::npos)
          << rest.errors.back().dump();
    } else {
      EXPECT_TRUE(rest.errors.empty()) << sessions[i] << ": " << rest.statuses();
    }
  }
  ASSERT_TRUE(saw("b", "a", "down"));
  // The conversations go on through b, which now owns them all.
  for (auto& sid : sessions) {
    auto r = chat_stream(node("b").port(),
                         chat_body("u-owner", sid, "second: " + std::string{question}, "test"));
    ASSERT_TRUE(well_formed_stream(r));
    EXPECT_TRUE(r.errors.empty()) << sid << ": " << r.statuses();
  }
  auto list = json::parse(
      request(node("b").port(), "GET", "/api/v1/conversations?user_id=u-owner&limit=50").body);
  auto convs = list.items("/conversations");
  ASSERT_EQ(convs.size(), sessions.size());
  for (auto& c : convs) {
    auto page = json::parse(request(node("b").port(), "GET",
                                    "/api/v1/conversations/" + c.str("/conversation_id")
                                        + "/messages?user_id=u-owner&limit=50")
                                .body);
    std::vector<std::string> users;
    int64_t last_seq = -1;
    for (auto& m : page.items("/messages")) {
      EXPECT_GT(m.integer("/seq"), last_seq);
      last_seq = m.integer("/seq");
      if (m.str("/role") == "user")
        users.push_back(m.str("/content").substr(0, 6));
    }
    EXPECT_EQ(users, (std::vector<std::string>{"first:", "second"})) << page.dump();
  }
}

// The admin console of either node shows the whole cluster: both nodes,
// each node's actors (details fetched from the node that runs them), and a
// stream running on the other node is stopped through this one's console.
TEST_F(cluster_test, the_console_of_one_node_shows_and_acts_on_the_whole_cluster) {
  extra_env_["RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS"] = "150";
  ASSERT_NO_FATAL_FAILURE(start_two_frontends());
  auto get = [&](const std::string& via, const std::string& path) {
    auto r = request(node(via).port(), "GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return json::parse(r.status == 200 ? r.body : "{}");
  };
  auto nodes = get("a", "/admin/api/nodes");
  EXPECT_EQ(nodes.str("/self"), "a");
  std::map<std::string, std::string> status;
  for (auto& n : nodes.items("/nodes"))
    status[n.str("/name")] = n.str("/status");
  EXPECT_EQ(status, (std::map<std::string, std::string>{{"a", "up"}, {"b", "up"}}));

  std::set<std::string> pool_nodes;
  uint64_t b_pool = 0;
  for (auto& p : get("a", "/admin/api/actors?kind=agent_pool").items("/actors")) {
    pool_nodes.insert(p.str("/node"));
    if (p.str("/node") == "b")
      b_pool = static_cast<uint64_t>(p.integer("/id"));
  }
  EXPECT_EQ(pool_nodes, (std::set<std::string>{"a", "b"}));
  auto detail = get("a", "/admin/api/actors/b/" + std::to_string(b_pool));
  EXPECT_EQ(detail.str("/kind"), "agent_pool");
  EXPECT_EQ(detail.str("/node"), "b");
  EXPECT_EQ(get("a", "/admin/api/actors?kind=agent_pool&node=b").items("/actors").size(), 1u);

  // A conversation owned by b, opened and stopped through a.
  std::string session;
  for (int i = 0; session.empty(); ++i)
    if (owner_among("u-console", "c" + std::to_string(i), {"a", "b"}) == "b")
      session = "c" + std::to_string(i);
  auto stream = open_sse(node("a").port(), chat_stream_path,
                         chat_body("u-console", session, question, "test",
                                   {{"request_id", "rq-console"}}));
  ASSERT_EQ(stream.status(), 200);
  bool generating = false;
  while (auto ev = stream.next_event(10s))
    if (ev->data.find("\"status\":\"token\"") != std::string::npos) {
      generating = true;
      break;
    }
  ASSERT_TRUE(generating);
  std::string on;
  for (auto& s : get("a", "/admin/api/streams").items("/streams"))
    if (s.str("/request_id") == "rq-console")
      on = s.str("/node");
  EXPECT_EQ(on, "b") << "the stream runs on the conversation's owner";
  auto stop = request(node("a").port(), "POST", "/admin/api/streams/rq-console/stop");
  ASSERT_EQ(stop.status, 200) << stop.body;
  auto rest = read_stream(stream, 20s);
  ASSERT_TRUE(rest.done.has_value()) << rest.statuses();
  ASSERT_FALSE(rest.errors.empty());
  EXPECT_EQ(rest.errors.back().str("/code"), "cancelled");

  // A node that goes away shows as down.
  node("b").kill9();
  ASSERT_TRUE(saw("a", "b", "down"));
  status.clear();
  for (auto& n : get("a", "/admin/api/nodes").items("/nodes"))
    status[n.str("/name")] = n.str("/status");
  EXPECT_EQ(status, (std::map<std::string, std::string>{{"a", "up"}, {"b", "down"}}));
}

}  // namespace
}  // namespace ragtor::test
