// Resumable generations (docs/streams.md): what a dropped client costs.
//  1. Re-attach latency: a turn streams from the fake model (tokens 10 ms
//     apart); the client reads three tokens, drops the connection, waits
//     50 ms (missing ~5 tokens) and re-attaches with GET
//     /api/v1/chat/stream/{id} + Last-Event-ID. Timed from connecting for
//     the GET to the first replayed event (median, p99).
//  2. Memory of detached turns: `--detached` turns of `--tokens` tokens each
//     are started and dropped at once; they finish detached and are kept for
//     the grace period. RSS after / before, per turn and per 1,000 tokens.
// Bounded; never asserts.
//
//   build/bench/bench_resume [--binary PATH] [--rounds 30] [--detached 200] [--tokens 1000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "bench/bench_http.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_sse.hpp"

namespace net = boost::asio;
namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

namespace {

std::string post_stream(const std::string& user, const std::string& session, const std::string& rid,
                        const std::string& message = "Tell me everything about the harbour.") {
  std::string body = R"({"user_id":")" + user + R"(","session_id":")" + session
                     + R"(","kb_prefix":"docs","request_id":")" + rid + R"(","message":")" + message
                     + R"("})";
  return http_request("POST", "/api/v1/chat/stream", body);
}

double pct(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 30, detached = 200, tokens = 1000;
  std::string bin;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rounds")
      rounds = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--detached")
      detached = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--tokens")
      tokens = std::max(10, std::stoi(argv[i + 1]));
    else if (a == "--binary")
      bin = argv[i + 1];
  }
  std::signal(SIGPIPE, SIG_IGN);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (bin.empty())
    bin = (bin_dir / "ragtor").string();
  auto scratch = fs::temp_directory_path() / ("ragtor-resume-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  std::string slow, fast;
  for (int i = 0; i < 200; ++i)
    slow += "word" + std::to_string(i) + " ";
  for (int i = 0; i < tokens; ++i)
    fast += "w" + std::to_string(i % 100) + " ";
  std::ofstream{scratch / "script.json"}
      << R"({"default":{"reply":")" << slow << R"(","token_delay_ms":10},"rules":[{"match":"MANY","reply":")"
      << fast << R"(","token_delay_ms":1}]})";
  auto fake = spawn({(bin_dir / "tests/fake_openai").string(), "--port", "0", "--threads", "2",
                     "--script", (scratch / "script.json").string()},
                    "fake_openai listening on http://", {}, scratch / "fake.log");
  std::vector<std::string> env{
      "RAGTOR_LLM__BASE_URL=http://127.0.0.1:" + std::to_string(fake.port) + "/v1",
      "RAGTOR_LLM__MODEL=fake-model", "RAGTOR_LOG__LEVEL=warn",
      "RAGTOR_SERVER__DETACH_GRACE_MS=60000", "RAGTOR_LLM__MAX_CONCURRENCY=256",
      "RAGTOR_LLM__MAX_QUEUE=4096", "RAGTOR_SESSION__IDLE_TIMEOUT_S=5"};
  auto server = spawn({bin, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                       (scratch / "data").string()},
                      "ragtor listening on http://", env, scratch / "ragtor.log");
  namespace http = boost::beast::http;
  auto kb = call(server.port, http::verb::post, "/api/v1/kbs", R"({"name":"docs"})");
  auto docs = call(server.port, http::verb::post, "/api/v1/kbs/docs/documents",
                   R"({"documents":[{"id":"h","text":"The harbour of Port Quellin holds a lantern festival every spring."}]})");
  if (kb.status != 201 || docs.status != 200) {
    std::fprintf(stderr, "setup failed: %s %s\n", kb.body.c_str(), docs.body.c_str());
    return 1;
  }

  // 1. Re-attach latency.
  std::vector<double> ms;
  int lost = 0;
  for (int i = 0; i < rounds; ++i) {
    auto rid = "rq-" + std::to_string(i);
    std::string last;
    {
      sse_conn first{server.port, post_stream("u", "s" + std::to_string(i), rid)};
      if (!first.wait_for("\"status\":\"token\"", 3)) {
        ++lost;
        continue;
      }
      last = first.last_id();
    }  // closed: the turn detaches
    // Miss a few tokens (10 ms apart), so the first event is a replay.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto t0 = steady::now();
    sse_conn again{server.port, "GET /api/v1/chat/stream/" + rid
                                    + "?user_id=u HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: "
                                    + last + "\r\n\r\n"};
    if (!again.wait_for("data: ", 1)) {
      ++lost;
      continue;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
    again.wait_for("\"status\":\"done\"", 1);
  }
  std::printf("re-attach: %zu rounds, first replayed event after p50 %.2f ms, p99 %.2f ms "
              "(%d failed)\n",
              ms.size(), pct(ms, 0.5), pct(ms, 0.99), lost);

  // 2. Detached turns kept for the grace period.
  auto streams_done = [&] {
    return counter(call(fake.port, http::verb::get, "/_fake/stats", "").body, "streams_completed");
  };
  auto done_before = streams_done();
  auto before = rss_kib(server.pid);
  for (int i = 0; i < detached; ++i) {
    sse_conn c{server.port, post_stream("m" + std::to_string(i), "s", "many-" + std::to_string(i),
                                        "MANY words please")};
    c.wait_for("\"status\":\"start\"", 1);
  }  // each connection closed right after start: every turn runs detached
  auto deadline = steady::now() + std::chrono::seconds(120);
  while (streams_done() < done_before + detached && steady::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last answers stored
  auto after = rss_kib(server.pid);
  auto grown = after > before ? after - before : 0;
  std::printf("detached: %d turns of %d tokens finished while detached (%ld streams); RSS %zu -> "
              "%zu KiB: %.1f KiB per detached turn, %.1f KiB per 1,000 tokens kept\n",
              detached, tokens, streams_done() - done_before, before, after,
              static_cast<double>(grown) / detached,
              static_cast<double>(grown) / detached * 1000.0 / tokens);
  stop(server);
  stop(fake);
  fs::remove_all(scratch);
  return 0;
}
