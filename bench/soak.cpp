// Soak (issue 18): minutes of mixed load against a real `ragtor serve` and
// the fake model, printing the server's RSS, open file descriptors,
// threads and completed turns per second once a minute, so a leak shows as
// a column that only grows. Not part of `make test`: `make soak` runs it
// for ten minutes. Never asserts; errors (unexpected answers) are counted.
//
// Each client loops over a weighted mix: a whole chat stream; a stream
// dropped after two tokens (detached, then cancelled after the grace);
// a stream stopped with POST /api/v1/chat/stop; a dropped stream that
// re-attaches with Last-Event-ID; a slow reader; a search; a small ingest;
// bad requests (malformed JSON, unknown route, oversized body, bad method).
//
//   build/bench/bench_soak [--minutes 10] [--clients 8] [--interval-s 60] [--binary PATH]
//       [--mix all|chat|nochat|search|ingest|bad]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_http.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_sse.hpp"

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using steady = std::chrono::steady_clock;

namespace {

struct proc_sample {
  size_t rss_kib = 0;
  size_t fds = 0;
  int threads = 0;
  double cpu_s = 0;  // user + system so far
};

proc_sample sample(pid_t pid) {
  proc_sample s;
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:"))
      s.rss_kib = std::stoul(line.substr(6));
    else if (line.starts_with("Threads:"))
      s.threads = std::stoi(line.substr(8));
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator{"/proc/" + std::to_string(pid) + "/fd", ec};
       !ec && it != fs::directory_iterator{}; it.increment(ec))
    ++s.fds;
  s.cpu_s = cpu_seconds(pid);
  return s;
}

struct counters {
  std::atomic<long> turns{0}, dropped{0}, stopped{0}, reattached{0}, slow{0}, searches{0},
      ingests{0}, bad{0}, errors{0};
};

std::string chat_body(const std::string& user, const std::string& session, const std::string& rid,
                      const std::string& message) {
  return R"({"user_id":")" + user + R"(","session_id":")" + session + R"(","kb_prefix":"docs",)"
         + R"("request_id":")" + rid + R"(","message":")" + message + R"("})";
}

// Which requests the clients send: "all" (the mix below), "chat" (whole
// turns only), "nochat" (searches, ingests and bad requests only), or one
// kind alone ("search", "ingest", "bad"), to tell which kind of work
// memory growth follows.
std::string mix = "all";

void client(int id, uint16_t port, steady::time_point until, counters& c) {
  std::mt19937 rng{static_cast<unsigned>(id * 7919 + 17)};
  std::uniform_int_distribution<int> pick{0, 99};
  long n = 0;
  auto user = "soak" + std::to_string(id);
  while (steady::now() < until) {
    auto rid = user + "-" + std::to_string(++n);
    auto session = "s" + std::to_string(n % 5);
    int p = pick(rng);
    if (mix == "chat")
      p = 0;
    else if (mix == "nochat" && p < 63)
      p = 63 + p % 37;
    else if (mix == "search")
      p = 63;
    else if (mix == "ingest")
      p = 80;
    else if (mix == "bad")
      p = 90;
    try {
      if (p < 40) {  // a whole turn
        sse_conn s{port, http_request("POST", "/api/v1/chat/stream",
                                      chat_body(user, session, rid, "Tell me about the harbour."))};
        if (s.wait_for("\"status\":\"done\""))
          ++c.turns;
        else
          ++c.errors;
      } else if (p < 48) {  // dropped after two tokens: detached, then cancelled
        sse_conn s{port, http_request("POST", "/api/v1/chat/stream",
                                      chat_body(user, session, rid, "Tell me about the harbour."))};
        s.wait_for("\"status\":\"token\"", 2);
        ++c.dropped;
      } else if (p < 54) {  // stopped
        sse_conn s{port, http_request("POST", "/api/v1/chat/stream",
                                      chat_body(user, session, rid, "Tell me about the harbour."))};
        s.wait_for("\"status\":\"token\"", 1);
        auto r = call(port, http::verb::post, "/api/v1/chat/stop",
                      R"({"request_id":")" + rid + R"(","user_id":")" + user + "\"}");
        if (r.status == 200 && s.wait_for("\"status\":\"done\""))
          ++c.stopped;
        else
          ++c.errors;
      } else if (p < 60) {  // dropped, then re-attached
        std::string last;
        {
          sse_conn s{port, http_request("POST", "/api/v1/chat/stream",
                                        chat_body(user, session, rid, "Tell me about the harbour."))};
          s.wait_for("\"status\":\"token\"", 2);
          last = s.last_id();
        }
        sse_conn again{port, http_request("GET", "/api/v1/chat/stream/" + rid + "?user_id=" + user,
                                          "", "Last-Event-ID: " + last + "\r\n")};
        if (again.wait_for("\"status\":\"done\""))
          ++c.reattached;
        else
          ++c.errors;
      } else if (p < 63) {  // a slow reader
        sse_conn s{port, http_request("POST", "/api/v1/chat/stream",
                                      chat_body(user, session, rid, "Tell me about the harbour."))};
        while (s.read_more() && s.buf.find("\"status\":\"done\"") == std::string::npos)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        ++c.slow;
      } else if (p < 80) {  // search
        auto r = call(port, http::verb::post, "/api/v1/kbs/docs/search",
                      R"({"query":"lantern festival harbour","top_k":5})");
        r.status == 200 ? ++c.searches : ++c.errors;
      } else if (p < 83) {  // ingest a small document (replaces by id)
        auto r = call(port, http::verb::post, "/api/v1/kbs/docs/documents",
                      R"({"documents":[{"id":"soak-)" + std::to_string(id) + R"(","text":"Soak note )"
                          + std::to_string(n) + R"(: the ferry leaves the harbour at dawn."}]})");
        r.status == 200 ? ++c.ingests : ++c.errors;
      } else {  // bad requests: each must be refused with a 4xx
        static const char* bodies[] = {"{not json", R"({"user_id":""})", "[]"};
        auto r = call(port, http::verb::post, "/api/v1/chat", bodies[n % 3]);
        auto u = call(port, http::verb::get, "/api/v1/no-such-route", "");
        auto m = call(port, http::verb::delete_, "/api/v1/chat/stream", "");
        auto big = call(port, http::verb::post, "/api/v1/chat", std::string(2 << 20, 'x'));
        bool ok = r.status >= 400 && r.status < 500 && u.status == 404 && m.status == 405
                  && big.status == 413;
        ok ? ++c.bad : ++c.errors;
      }
    } catch (const std::exception&) {
      ++c.errors;
    }
  }
}

// One gauge's value from the server's /metrics text (0 when absent).
double gauge(const std::string& text, const std::string& name) {
  auto at = text.find("\n" + name + " ");
  if (at == std::string::npos)
    return 0;
  return std::strtod(text.c_str() + at + name.size() + 2, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  double minutes = 10;
  int clients = 8, interval_s = 60;
  std::string bin;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--minutes")
      minutes = std::stod(argv[i + 1]);
    else if (a == "--clients")
      clients = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--interval-s")
      interval_s = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--binary")
      bin = argv[i + 1];
    else if (a == "--mix")
      mix = argv[i + 1];
  }
  std::signal(SIGPIPE, SIG_IGN);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (bin.empty())
    bin = (bin_dir / "ragtor").string();
  auto scratch = fs::temp_directory_path() / ("ragtor-soak-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  std::string reply;
  for (int i = 0; i < 40; ++i)
    reply += "word" + std::to_string(i) + " ";
  std::ofstream{scratch / "script.json"}
      << R"({"default":{"reply":")" << reply << R"(","token_delay_ms":5},"rules":[]})";
  auto fake = spawn({(bin_dir / "tests/fake_openai").string(), "--port", "0", "--threads", "2",
                     "--script", (scratch / "script.json").string()},
                    "fake_openai listening on http://", {}, scratch / "fake.log");
  std::vector<std::string> env{
      "RAGTOR_LLM__BASE_URL=http://127.0.0.1:" + std::to_string(fake.port) + "/v1",
      "RAGTOR_LLM__MODEL=fake-model", "RAGTOR_LOG__LEVEL=warn",
      "RAGTOR_SERVER__DETACH_GRACE_MS=1000", "RAGTOR_SESSION__IDLE_TIMEOUT_S=5"};
  auto server = spawn({bin, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                       (scratch / "data").string()},
                      "ragtor listening on http://", env, scratch / "ragtor.log");
  auto kb = call(server.port, http::verb::post, "/api/v1/kbs", R"({"name":"docs"})");
  auto docs = call(server.port, http::verb::post, "/api/v1/kbs/docs/documents",
                   R"({"documents":[{"id":"h","text":"The harbour of Port Quellin holds a lantern festival every spring."}]})");
  if (kb.status != 201 || docs.status != 200) {
    std::fprintf(stderr, "setup failed: %s %s\n", kb.body.c_str(), docs.body.c_str());
    return 1;
  }
  std::printf("soak: %.1f min, %d clients, the fake model at 40 tokens x 5 ms; one row per %d s\n",
              minutes, clients, interval_s);
  std::printf("| t s | RSS MiB | heap in use MiB | heap free MiB | SQLite MiB | fds | threads "
              "| CPU %% | turns/s | dropped | stopped | re-attached | slow | searches | ingests "
              "| bad | errors |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  counters c;
  auto start = steady::now();
  auto until = start + std::chrono::milliseconds(static_cast<long>(minutes * 60000));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back(client, i, server.port, until, std::ref(c));
  auto prev = sample(server.pid);
  long prev_turns = 0;
  auto prev_t = start;
  auto print_row = [&] {
    auto now = steady::now();
    auto s = sample(server.pid);
    auto metrics = call(server.port, http::verb::get, "/metrics", "").body;
    constexpr double mib = 1024.0 * 1024.0;
    double dt = std::chrono::duration<double>(now - prev_t).count();
    long turns = c.turns.load();
    std::printf("| %.0f | %.1f | %.1f | %.1f | %.1f | %zu | %d | %.0f | %.1f | %ld | %ld | %ld | "
                "%ld | %ld | %ld | %ld | %ld |\n",
                std::chrono::duration<double>(now - start).count(), s.rss_kib / 1024.0,
                gauge(metrics, "ragtor_heap_in_use_bytes") / mib,
                gauge(metrics, "ragtor_heap_free_bytes") / mib,
                gauge(metrics, "ragtor_sqlite_memory_bytes") / mib, s.fds,
                s.threads, 100.0 * (s.cpu_s - prev.cpu_s) / dt,
                static_cast<double>(turns - prev_turns) / dt, c.dropped.load(), c.stopped.load(),
                c.reattached.load(), c.slow.load(), c.searches.load(), c.ingests.load(),
                c.bad.load(), c.errors.load());
    std::fflush(stdout);
    prev = s;
    prev_turns = turns;
    prev_t = now;
  };
  print_row();
  while (steady::now() < until) {
    auto next = std::min(until, prev_t + std::chrono::seconds(interval_s));
    std::this_thread::sleep_until(next);
    print_row();
  }
  for (auto& t : threads)
    t.join();
  // Detached turns are cancelled after the grace period; idle sessions go.
  std::this_thread::sleep_for(std::chrono::seconds(7));
  std::printf("after the load (grace and idle timeouts passed):\n");
  print_row();
  stop(server);
  stop(fake);
  fs::remove_all(scratch);
  return 0;
}
