// Answer modes side by side: the same question and documents on five KBs
// — "pipeline" (plain; rewrite on; rerank on, by the fake's /v1/rerank
// endpoint), "workflow" (intent, slots, evaluate, verify) and
// "tool_agent" (one vector_retrieve, then READY) — against a real
// `ragtor serve` with the fake OpenAI-compatible model answering at once
// (so the numbers are ragtor's orchestration plus loopback HTTP, not model
// time). Prints per mode the median and p90 of a whole turn (POST
// /api/v1/chat) and the model calls per turn. Sequential, bounded; never
// asserts.
//
//   build/bench/bench_pipelines [--turns 30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_http.hpp"
#include "bench/bench_locks.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_util.hpp"

namespace http = boost::beast::http;
namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;


int main(int argc, char** argv) {
  int turns = 30;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string{argv[i]} == "--turns")
      turns = std::max(1, std::stoi(argv[i + 1]));
  std::signal(SIGPIPE, SIG_IGN);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  auto scratch = fs::temp_directory_path() / ("ragtor-pipelines-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  auto fake = spawn_lock_model(bin_dir, scratch);
  std::vector<std::string> env{
      "RAGTOR_LLM__BASE_URL=http://127.0.0.1:" + std::to_string(fake.port) + "/v1",
      "RAGTOR_LLM__MODEL=fake-model", "RAGTOR_LOG__LEVEL=warn",
      "RAGTOR_RETRIEVAL__RERANK_BASE_URL=http://127.0.0.1:" + std::to_string(fake.port) + "/v1",
      "RAGTOR_RETRIEVAL__RERANK_MODEL=fake-reranker"};
  auto ragtor = spawn({(bin_dir / "ragtor").string(), "serve", "--listen", "127.0.0.1:0",
                       "--data-dir", (scratch / "data").string()},
                      "ragtor listening on http://", env, scratch / "ragtor.log");
  const std::string docs = lock_documents;
  const std::string workflow = lock_workflow;
  struct mode {
    std::string kb, settings;
  };
  std::vector<mode> modes{
      {"plain", R"("answer_mode":"pipeline")"},
      {"rewrite", R"("answer_mode":"pipeline","enable_query_rewrite":true)"},
      {"reranked", R"("answer_mode":"pipeline","enable_rerank":true)"},
      {"workflow", R"("answer_mode":"workflow","workflow":)" + workflow},
      {"agent", R"("answer_mode":"tool_agent")"}};
  for (auto& m : modes) {
    auto r = call(ragtor.port, http::verb::post, "/api/v1/kbs",
                  R"({"name":")" + m.kb + "\"," + m.settings + "}");
    auto d = call(ragtor.port, http::verb::post, "/api/v1/kbs/" + m.kb + "/documents", docs);
    if (r.status != 201 || d.status != 200) {
      std::fprintf(stderr, "setup of %s failed: %s %s\n", m.kb.c_str(), r.body.c_str(),
                   d.body.c_str());
      stop(ragtor);
      stop(fake);
      return 1;
    }
  }
  std::printf("%d sequential turns per mode; the fake model answers without delay\n", turns);
  std::printf("| KB (answer mode) | turn p50 ms | turn p90 ms | model calls / turn | rerank calls / turn | errors |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (auto& m : modes) {
    std::vector<double> ms;
    int errors = 0;
    auto stats = call(fake.port, http::verb::get, "/_fake/stats", "").body;
    auto before = counter(stats, "chat_requests");
    auto reranks_before = counter(stats, "rerank_requests");
    for (int t = 0; t < turns; ++t) {
      auto body = R"({"user_id":"bench","session_id":")" + m.kb + std::to_string(t)
                  + R"(","kb_prefix":")" + m.kb
                  + R"(","message":"How long do the batteries of the K7 last?"})";
      auto t0 = steady::now();
      auto r = call(ragtor.port, http::verb::post, "/api/v1/chat", body);
      ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
      if (r.status != 200 || r.body.find("\"error\"") != std::string::npos)
        ++errors;
    }
    stats = call(fake.port, http::verb::get, "/_fake/stats", "").body;
    auto after = counter(stats, "chat_requests");
    auto reranks = counter(stats, "rerank_requests") - reranks_before;
    std::printf("| %s (%s) | %.1f | %.1f | %.1f | %.1f | %d |\n", m.kb.c_str(),
                m.settings.substr(15, m.settings.find('"', 15) - 15).c_str(),
                ragtor::bench::percentile(ms, 0.5), ragtor::bench::percentile(ms, 0.9),
                static_cast<double>(after - before) / turns,
                static_cast<double>(reranks) / turns, errors);
    std::fflush(stdout);
  }
  stop(ragtor);
  stop(fake);
  fs::remove_all(scratch);
  return 0;
}
