// Planning turns under concurrency: turns/s of the guided workflow (four
// structured model calls, a search) and the tool agent (two model calls, a
// search) at 1, 32 and 256 concurrent clients, each doing blocking
// POST /api/v1/chat, against a real `ragtor serve` and the fake model
// answering at once. Also samples the server's thread count while the
// turns run (peak), which is what planners-as-actors is about. Give
// several binaries to compare them in one run (e.g. the one of the
// previous commit kept aside). Bounded; never asserts.
//
//   build/bench/bench_planners [--binary PATH]... [--turns 256]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_http.hpp"
#include "bench/bench_locks.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_util.hpp"

namespace http = boost::beast::http;
namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

namespace {

int threads_of(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("Threads:"))
      return std::stoi(line.substr(8));
  return -1;
}

struct level_result {
  double turns_per_s = 0, p50_ms = 0, p99_ms = 0;
  int errors = 0;
  int peak_threads = 0;
};

// `total` turns on `kb` from `clients` threads at once.
level_result run_level(const child& server, const std::string& kb, int clients, int total) {
  std::atomic<int> next{0}, errors{0};
  std::mutex mx;
  std::vector<double> ms;
  std::atomic<bool> running{true};
  level_result out;
  std::thread sampler{[&] {
    while (running) {
      out.peak_threads = std::max(out.peak_threads, threads_of(server.pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }};
  auto t0 = steady::now();
  std::vector<std::thread> workers;
  for (int c = 0; c < clients; ++c)
    workers.emplace_back([&, c] {
      for (int t = next++; t < total; t = next++) {
        auto body = R"({"user_id":"bench)" + std::to_string(c) + R"(","session_id":")" + kb
                    + std::to_string(t) + R"(","kb_prefix":")" + kb
                    + R"(","message":"How long do the batteries of the K7 last?"})";
        auto s = steady::now();
        auto r = call(server.port, http::verb::post, "/api/v1/chat", body);
        auto d = std::chrono::duration<double, std::milli>(steady::now() - s).count();
        if (r.status != 200 || r.body.find("\"error\"") != std::string::npos)
          ++errors;
        std::lock_guard lock{mx};
        ms.push_back(d);
      }
    });
  for (auto& w : workers)
    w.join();
  auto secs = std::chrono::duration<double>(steady::now() - t0).count();
  running = false;
  sampler.join();
  out.turns_per_s = total / secs;
  out.p50_ms = ragtor::bench::percentile(ms, 0.5);
  out.p99_ms = ragtor::bench::percentile(ms, 0.99);
  out.errors = errors;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int turns = 256;
  std::vector<std::string> binaries;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--turns")
      turns = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--binary")
      binaries.push_back(argv[i + 1]);
  }
  std::signal(SIGPIPE, SIG_IGN);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (binaries.empty())
    binaries.push_back((bin_dir / "ragtor").string());
  auto scratch = fs::temp_directory_path() / ("ragtor-planners-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  auto fake = spawn_lock_model(bin_dir, scratch);
  const std::string docs = lock_documents;
  const std::string workflow = lock_workflow;
  std::printf("%d turns per level; the fake model answers without delay; limits raised so "
              "every turn is admitted (max_planner_turns 4096, llm max_concurrency 64, "
              "max_queue 4096)\n",
              turns);
  std::printf("| binary | KB | clients | turns/s | p50 ms | p99 ms | errors | peak threads |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  int n = 0;
  for (auto& bin : binaries) {
    std::vector<std::string> env{
        "RAGTOR_LLM__BASE_URL=http://127.0.0.1:" + std::to_string(fake.port) + "/v1",
        "RAGTOR_LLM__MODEL=fake-model", "RAGTOR_LOG__LEVEL=warn",
        "RAGTOR_SERVER__MAX_PLANNER_TURNS=4096", "RAGTOR_LLM__MAX_CONCURRENCY=64",
        "RAGTOR_LLM__MAX_QUEUE=4096", "RAGTOR_SESSION__IDLE_TIMEOUT_S=5"};
    auto data = scratch / ("data" + std::to_string(n++));
    auto server = spawn({bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data.string()},
                        "ragtor listening on http://", env, scratch / "ragtor.log");
    for (auto& [kb, settings] : std::vector<std::pair<std::string, std::string>>{
             {"workflow", R"("answer_mode":"workflow","workflow":)" + workflow},
             {"agent", R"("answer_mode":"tool_agent")"}}) {
      auto r = call(server.port, http::verb::post, "/api/v1/kbs",
                    R"({"name":")" + kb + "\"," + settings + "}");
      auto d = call(server.port, http::verb::post, "/api/v1/kbs/" + kb + "/documents", docs);
      if (r.status != 201 || d.status != 200) {
        std::fprintf(stderr, "setup of %s failed: %s %s\n", kb.c_str(), r.body.c_str(),
                     d.body.c_str());
        stop(server);
        stop(fake);
        return 1;
      }
      for (int clients : {1, 32, 256}) {
        auto res = run_level(server, kb, clients, std::max(turns, clients));
        std::printf("| %s | %s | %d | %.0f | %.1f | %.1f | %d | %d |\n",
                    fs::path{bin}.parent_path().filename().c_str(), kb.c_str(), clients,
                    res.turns_per_s, res.p50_ms, res.p99_ms, res.errors, res.peak_threads);
        std::fflush(stdout);
      }
    }
    stop(server);
  }
  stop(fake);
  fs::remove_all(scratch);
  return 0;
}
