// Several nodes (docs/cluster.md): what the cluster costs and how fast it
// heals. A throwaway PostgreSQL and real `ragtor serve` processes on
// loopback (each node's data dir holds the fixture KB), all on this
// machine's cores, so absolute numbers include everybody's CPU.
//  1. Search latency through a node that hosts the KB (local) and through a
//     frontend whose replica is another node (remote): p50 / p99 and the
//     difference.
//  2. Turn throughput (POST /api/v1/chat, extractive generator, `--clients`
//     at once) through a frontend with one and with two retrieval replicas.
//  3. Failure detection: SIGKILL and SIGSTOP of a replica, timed until the
//     frontend's /api/v1/cluster says down / suspect, with the share of
//     turns that failed under load meanwhile.
//  4. An ingested document: from the 200 of the ingest through the frontend
//     to a search served by a replica that finds it.
// Bounded; never asserts.
//
//   build/bench/bench_cluster [--searches 300] [--turns 200] [--clients 8]
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_http.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_util.hpp"
#include "tests/support/os_util.hpp"

using ragtor::bench::percentile;
using ragtor::test::free_port;
using ragtor::test::shell;

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using steady = std::chrono::steady_clock;

namespace {

constexpr int heartbeat_ms = 100;
constexpr int failure_timeout_ms = 500;

double ms_since(steady::time_point t) {
  return std::chrono::duration<double, std::milli>(steady::now() - t).count();
}

struct cluster {
  std::string bin;
  fs::path scratch;
  std::string dsn;
  std::map<std::string, uint16_t> basp;
  std::map<std::string, child> nodes;

  // Declares nodes first (so every node knows every seed), then starts them.
  void declare(const std::string& name) {
    basp[name] = free_port();
    auto dir = scratch / name;
    fs::create_directories(dir);
    shell(bin + " ingest --kb test --data-dir " + dir.string() + " " RAGTOR_SOURCE_DIR
                "/tests/data/kb >/dev/null 2>&1");
  }

  void start(const std::string& name, const std::string& roles) {
    std::string seeds;
    for (auto& [other, port] : basp)
      if (other != name)
        seeds += (seeds.empty() ? "" : ",") + std::string{"127.0.0.1:"} + std::to_string(port);
    std::vector<std::string> env{
        "RAGTOR_STORE__POSTGRES_DSN=" + dsn,
        "RAGTOR_CLUSTER__NODE_NAME=" + name,
        "RAGTOR_CLUSTER__LISTEN=127.0.0.1:" + std::to_string(basp[name]),
        "RAGTOR_CLUSTER__SEEDS=" + seeds,
        "RAGTOR_CLUSTER__ROLES=" + roles,
        "RAGTOR_CLUSTER__HEARTBEAT_MS=" + std::to_string(heartbeat_ms),
        "RAGTOR_CLUSTER__FAILURE_TIMEOUT_MS=" + std::to_string(failure_timeout_ms),
        "RAGTOR_LOG__LEVEL=warn",
        "RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS=0"};
    nodes[name] = spawn({bin, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                         (scratch / name).string()},
                        "ragtor listening on http://", env, scratch / (name + ".log"));
  }

  uint16_t port(const std::string& name) { return nodes.at(name).port; }

  // The status `peer` has in `via`'s /api/v1/cluster.
  std::string status(const std::string& via, const std::string& peer) {
    auto body = call(port(via), http::verb::get, "/api/v1/cluster", "").body;
    auto at = body.find("\"name\":\"" + peer + "\"");
    if (at == std::string::npos)
      return "";
    auto s = body.find("\"status\":\"", at);
    if (s == std::string::npos)
      return "";
    s += 10;
    return body.substr(s, body.find('"', s) - s);
  }

  // Polls (this is a bench) until `peer` is `want` in `via`'s view.
  double wait_status(const std::string& via, const std::string& peer, const std::string& want,
                     std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    auto t0 = steady::now();
    while (status(via, peer) != want) {
      if (steady::now() - t0 > limit)
        throw std::runtime_error(peer + " never became " + want + " in " + via + "'s view");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return ms_since(t0);
  }

  void stop_all() {
    for (auto& [name, c] : nodes) {
      kill(c.pid, SIGCONT);
      stop(c);
    }
    nodes.clear();
  }
};

std::string served_by(const std::string& body) {
  auto at = body.find("\"served_by\":\"");
  if (at == std::string::npos)
    return "";
  at += 13;
  return body.substr(at, body.find('"', at) - at);
}

const std::string search_body = R"({"query":"Lumenlatch K7 battery life","top_k":3})";

std::vector<double> search_latencies(uint16_t port, int n) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    auto t0 = steady::now();
    auto r = call(port, http::verb::post, "/api/v1/kbs/test/search", search_body);
    if (r.status == 200)
      ms.push_back(ms_since(t0));
  }
  return ms;
}

struct load_result {
  double turns_per_s = 0;
  int ok = 0, failed = 0;
};

// `clients` threads each sending turns (POST /api/v1/chat) until `total`
// were sent, or until `stop` is set.
load_result turn_load(uint16_t port, int clients, int total, std::atomic<bool>* stop = nullptr) {
  std::atomic<int> next{0}, ok{0}, failed{0};
  auto t0 = steady::now();
  std::vector<std::thread> ts;
  for (int c = 0; c < clients; ++c)
    ts.emplace_back([&, c] {
      int i;
      while ((i = next++) < total && !(stop && *stop)) {
        auto body = R"({"user_id":"bench-)" + std::to_string(c) + R"(","session_id":"s)"
                    + std::to_string(i) + R"(","message":"How long do the batteries of the )"
                    R"(Lumenlatch K7 last?","kb_prefix":"test"})";
        try {
          auto r = call(port, http::verb::post, "/api/v1/chat", body);
          // A turn that lost its search answers 200 without documents;
          // count it failed when the answer carries an error.
          if (r.status == 200 && r.body.find("\"error\"") == std::string::npos)
            ++ok;
          else
            ++failed;
        } catch (const std::exception&) {
          ++failed;
        }
      }
    });
  for (auto& t : ts)
    t.join();
  load_result r;
  r.ok = ok;
  r.failed = failed;
  r.turns_per_s = (ok + failed) / (ms_since(t0) / 1000.0);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int searches = 300, turns = 200, clients = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--searches")
      searches = std::max(10, std::stoi(argv[i + 1]));
    else if (a == "--turns")
      turns = std::max(10, std::stoi(argv[i + 1]));
    else if (a == "--clients")
      clients = std::max(1, std::stoi(argv[i + 1]));
  }
  std::signal(SIGPIPE, SIG_IGN);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  cluster c;
  c.bin = (bin_dir / "ragtor").string();
  c.scratch = fs::temp_directory_path() / ("ragtor-bench-cluster-" + std::to_string(getpid()));
  fs::create_directories(c.scratch);
  auto pg_script = std::string{RAGTOR_SOURCE_DIR} + "/tests/fixtures/pg_cluster";
  uint16_t pg_port = free_port();
  c.dsn = shell(pg_script + " start " + (c.scratch / "pg").string() + " "
                + std::to_string(pg_port));
  int rc = 0;
  try {
    for (auto n : {"fe", "r1", "r2"})
      c.declare(n);
    c.start("r1", "retrieval");
    c.start("fe", "frontend");
    c.wait_status("fe", "r1", "up");

    // 1. Local (r1 searches its own agent) versus remote (fe -> r1).
    search_latencies(c.port("r1"), 20);  // warm up
    search_latencies(c.port("fe"), 20);
    auto local = search_latencies(c.port("r1"), searches);
    auto remote = search_latencies(c.port("fe"), searches);
    std::printf("search latency, %d searches each (ms)\n", searches);
    std::printf("  local  (r1 itself)       p50 %.2f  p99 %.2f\n", percentile(local, 0.5),
                percentile(local, 0.99));
    std::printf("  remote (fe -> r1, BASP)  p50 %.2f  p99 %.2f\n", percentile(remote, 0.5),
                percentile(remote, 0.99));
    std::printf("  added by the hop         p50 %.2f  p99 %.2f\n",
                percentile(remote, 0.5) - percentile(local, 0.5),
                percentile(remote, 0.99) - percentile(local, 0.99));

    // 2. Throughput with one, then two replicas.
    auto one = turn_load(c.port("fe"), clients, turns);
    c.start("r2", "retrieval");
    c.wait_status("fe", "r2", "up");
    auto two = turn_load(c.port("fe"), clients, turns);
    std::printf("turn throughput through fe, %d clients, %d turns\n", clients, turns);
    std::printf("  one replica   %.1f turns/s (%d failed)\n", one.turns_per_s, one.failed);
    std::printf("  two replicas  %.1f turns/s (%d failed)\n", two.turns_per_s, two.failed);

    // 3. SIGKILL r1 under load.
    {
      std::atomic<bool> stop_load{false};
      load_result during;
      std::thread load{[&] { during = turn_load(c.port("fe"), clients, 1 << 30, &stop_load); }};
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      auto t0 = steady::now();
      kill(c.nodes["r1"].pid, SIGKILL);
      int st;
      waitpid(c.nodes["r1"].pid, &st, 0);
      c.nodes.erase("r1");
      c.wait_status("fe", "r1", "down");
      auto detected = ms_since(t0);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      stop_load = true;
      load.join();
      std::printf("SIGKILL of r1 under load: down after %.0f ms (failure_timeout %d ms, "
                  "heartbeat %d ms); %d of %d turns failed (%.2f %%)\n",
                  detected, failure_timeout_ms, heartbeat_ms, during.failed,
                  during.ok + during.failed,
                  100.0 * during.failed / std::max(1, during.ok + during.failed));
      auto t1 = steady::now();
      c.start("r1", "retrieval");
      c.wait_status("fe", "r1", "up");
      std::printf("  restarted r1 up again after %.0f ms (process start included)\n", ms_since(t1));
    }
    // SIGSTOP r2 under load.
    {
      std::atomic<bool> stop_load{false};
      load_result during;
      std::thread load{[&] { during = turn_load(c.port("fe"), clients, 1 << 30, &stop_load); }};
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      auto t0 = steady::now();
      kill(c.nodes["r2"].pid, SIGSTOP);
      c.wait_status("fe", "r2", "suspect");
      auto suspected = ms_since(t0);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      stop_load = true;
      load.join();
      auto t1 = steady::now();
      kill(c.nodes["r2"].pid, SIGCONT);
      c.wait_status("fe", "r2", "up");
      std::printf("SIGSTOP of r2 under load: suspect after %.0f ms; %d of %d turns failed "
                  "(%.2f %%); up %.0f ms after SIGCONT\n",
                  suspected, during.failed, during.ok + during.failed,
                  100.0 * during.failed / std::max(1, during.ok + during.failed), ms_since(t1));
    }

    // 4. Ingest through fe -> found on a replica.
    std::vector<double> visible;
    for (int i = 0; i < 5; ++i) {
      auto word = "zorblax" + std::to_string(i) + "quent";
      auto doc = R"({"documents":[{"id":"fresh-)" + std::to_string(i) + R"(","title":"Fresh",)"
                 R"("text":"The )" + word + R"( valve opens at dawn."}]})";
      auto r = call(c.port("fe"), http::verb::post, "/api/v1/kbs/test/documents", doc);
      if (r.status != 200)
        throw std::runtime_error("ingest failed: " + r.body);
      auto t0 = steady::now();
      for (;;) {
        auto s = call(c.port("fe"), http::verb::post, "/api/v1/kbs/test/search",
                      R"({"query":")" + word + R"(","top_k":1})");
        if (s.body.find("fresh-" + std::to_string(i)) != std::string::npos
            && !served_by(s.body).empty())
          break;
        if (ms_since(t0) > 20000)
          throw std::runtime_error("document never became searchable");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      visible.push_back(ms_since(t0));
    }
    std::printf("ingested document searchable through a replica after p50 %.0f ms, max %.0f ms "
                "([cluster] kb_sync_ms 1000)\n",
                percentile(visible, 0.5), percentile(visible, 1.0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cluster: %s (logs in %s)\n", e.what(), c.scratch.c_str());
    rc = 1;
  }
  c.stop_all();
  shell(pg_script + " stop " + (c.scratch / "pg").string() + " >/dev/null 2>&1 || true");
  if (rc == 0)
    fs::remove_all(c.scratch);
  return rc;
}
