// Load generator: N concurrent SSE chat streams against a real `ragtor
// serve` answering with a model behind the fake OpenAI-compatible server
// (both started here on loopback, in a scratch directory, with the example
// KB ingested). Prints requests/s, client-side time to first token (p50,
// p99) minus the fake model's configured first-token delay — i.e. ragtor's
// own overhead —, and last its p99 turn by turn against the model's own
// first-token time for that turn's call (matched by the X-Request-Id the
// model saw), the p99 gap between tokens (and the fake model's own gap
// p99, GET /_fake/token_gaps, with the difference), tokens/s delivered, errors,
// (under each ragtor row) the median time its turns took to be routed, to
// read their context, to get their evidence, to call the model and to
// publish the first token, and the mean time of the store commits during
// the row (on disk, the fsync),
// ragtor's peak RSS, its CPU per completed turn, and the CPU each process
// (ragtor, the fake model, this client) used over the row, so the reader can
// see who was saturated. Bounded in count and time; never asserts.
//
//   build/bench/bench_load [--streams 1,100,1000] [--tokens 20]
//       [--first-token-ms 50] [--token-ms 10] [--rounds 1] [--ragtor PATH]
//       [--floor on]  (also the bare relay, bench_floor, row by row)
//       [--console on]  (also ragtor with the admin console's live feed
//                        /admin/api/events?view=actors open, row by row)
//       [--continue on]  (each stream continues one conversation across
//                         levels and rounds instead of a new one per turn)
//       [--seconds S]  (sustained: each of the N clients runs turns one
//                       after another for S seconds, instead of one turn
//                       each opened at the same instant; req/s is then the
//                       throughput at N concurrent streams)
//       [--kb demo]  (the requests' kb_prefix; "general" answers without
//                     retrieval, so the context read is on the first
//                     token's path)
//       [--kb-dir PATH]  (what is ingested into the KB "demo" instead of
//                         examples/kb: any file or directory `ragtor
//                         ingest` reads, e.g. a larger corpus)
//       [--scifact on]  (the KB is SciFact's 5,183 abstracts, 12,430
//                        chunks, from ../shared/data)
//       [--message TEXT]  (what every turn asks; "How do I run the tests?")
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "bench/bench_http.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_util.hpp"
#include "protocol/json_writer.hpp"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace fs = std::filesystem;
using tcp = net::ip::tcp;
using steady = std::chrono::steady_clock;
constexpr auto tuple_awaitable = net::as_tuple(net::use_awaitable);

namespace {

struct stream_stats {
  bool ok = false;
  std::string why;  // a failed stream: what went wrong, first thing seen
  double ttft_ms = -1;
  std::vector<double> gaps_ms;
  size_t tokens = 0;
  // The id the model saw this turn's call under (its X-Request-Id): ragtor's
  // request id, from the events' "id: <request_id>:<seq>" lines; for a
  // server that sends none (the floor, which passes the client's header
  // on), the one this client sent.
  std::string request_id;
};

net::awaitable<void> one_stream(uint16_t port, std::string body, stream_stats& out) {
  static uint64_t turns_sent = 0;  // (one thread)
  out.request_id = "bench-" + std::to_string(++turns_sent);
  auto ex = co_await net::this_coro::executor;
  beast::tcp_stream s{ex};
  s.expires_after(std::chrono::seconds(120));
  auto [cec] = co_await s.async_connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port},
                                        tuple_awaitable);
  if (cec) {
    out.why = "connect: " + cec.message();
    co_return;
  }
  http::request<http::string_body> req{http::verb::post, "/api/v1/chat/stream", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.set("X-Request-Id", out.request_id);
  req.body() = std::move(body);
  req.prepare_payload();
  auto start = steady::now();
  auto [wec, wn] = co_await http::async_write(s, req, tuple_awaitable);
  if (wec) {
    out.why = "request write: " + wec.message();
    co_return;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> p;
  p.body_limit(boost::none);
  auto [hec, hn] = co_await http::async_read_header(s, buffer, p, tuple_awaitable);
  if (hec || p.get().result_int() != 200) {
    out.why = hec ? "response header: " + hec.message()
                  : "HTTP " + std::to_string(p.get().result_int());
    co_return;
  }
  std::array<char, 8192> buf;
  std::string pending;
  auto last = start;
  bool done = false, error = false, id_seen = false;
  while (!p.is_done() && !done) {
    p.get().body().data = buf.data();
    p.get().body().size = buf.size();
    auto [rec, n] = co_await http::async_read_some(s, buffer, p, tuple_awaitable);
    if (rec && rec != http::error::need_buffer) {
      out.why = "stream read: " + rec.message();
      break;
    }
    pending.append(buf.data(), buf.size() - p.get().body().size);
    for (auto end = pending.find("\n\n"); end != std::string::npos; end = pending.find("\n\n")) {
      auto event = pending.substr(0, end);
      pending.erase(0, end + 2);
      auto now = steady::now();
      if (!id_seen && event.starts_with("id: ")) {
        auto line = std::string_view{event}.substr(4, event.find('\n') - 4);
        out.request_id = std::string{line.substr(0, line.rfind(':'))};
        id_seen = true;
      }
      if (event.find("\"status\":\"token\"") != std::string::npos) {
        if (out.tokens == 0)
          out.ttft_ms = std::chrono::duration<double, std::milli>(now - start).count();
        else
          out.gaps_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
        ++out.tokens;
      } else if (event.find("\"status\":\"error\"") != std::string::npos) {
        if (!error) {
          // The error event's code ("code":"…").
          auto at = event.find("\"code\":\"");
          auto code = at == std::string::npos
                          ? std::string{"?"}
                          : event.substr(at + 8, event.find('"', at + 8) - (at + 8));
          out.why = "error event: " + code;
        }
        error = true;
      } else if (event.find("\"status\":\"done\"") != std::string::npos) {
        done = true;
      }
    }
  }
  out.ok = done && !error && out.tokens > 0;
  if (!out.ok && out.why.empty())
    out.why = !done ? "ended without done" : "no tokens";
}

// One client: a turn, or turns one after another until `until` (a
// sustained row); each turn's stats are appended to `out`.
net::awaitable<void> one_client(uint16_t port, std::string body,
                                std::optional<steady::time_point> until,
                                std::vector<stream_stats>& out) {
  do {
    out.emplace_back();
    co_await one_stream(port, body, out.back());
  } while (until && steady::now() < *until);
}

// Holds the admin console's live feed of the actor table open (what a
// browser on /admin does) until destroyed; counts the bytes it received.
class console_feed {
public:
  explicit console_feed(uint16_t port) {
    reader_ = std::thread{[this, port] {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return;
      }
      std::string req = "GET /admin/api/events?view=actors HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
      if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) < 0) {
        ::close(fd);
        return;
      }
      std::array<char, 65536> buf;
      while (!stop_) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0)
          continue;
        auto n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n <= 0)
          break;
        bytes_ += static_cast<size_t>(n);
      }
      ::close(fd);
    }};
  }
  ~console_feed() {
    stop_ = true;
    reader_.join();
  }
  size_t bytes() const { return bytes_; }

private:
  std::atomic<bool> stop_{false};
  std::atomic<size_t> bytes_{0};
  std::thread reader_;
};

// From ragtor's /metrics: the ragtor_turn_phase_seconds buckets (per
// phase, (upper bound, cumulative count) in the order of the exposition),
// the store's commits so far (their count and summed seconds: an on-disk
// commit is the fsync target 1 of issue 20 compares with), and the model
// connects that waited for a free descriptor (the open-file limit).
using phase_buckets = std::map<std::string, std::vector<std::pair<double, double>>>;
struct scraped {
  phase_buckets phases;
  double commits = 0, commit_seconds = 0;
  double descriptor_waits = 0;  // model connects that waited for a descriptor
  std::vector<std::pair<double, double>> commit_buckets;
};

scraped scrape_phases(uint16_t port) {
  scraped out;
  const std::string prefix = "ragtor_turn_phase_seconds_bucket{phase=\"";
  const std::string commit = "ragtor_store_commit_duration_seconds_";
  std::istringstream in{call(port, http::verb::get, "/metrics", "").body};
  auto value = [](const std::string& line) { return std::stod(line.substr(line.rfind(' ') + 1)); };
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(commit + "count "))
      out.commits = value(line);
    if (line.starts_with(commit + "sum "))
      out.commit_seconds = value(line);
    if (line.starts_with("ragtor_llm_descriptor_waits_total "))
      out.descriptor_waits = value(line);
    if (line.starts_with(commit + "bucket{le=\"")) {
      auto le_at = commit.size() + 11;
      auto le = line.substr(le_at, line.find('"', le_at) - le_at);
      out.commit_buckets.emplace_back(le == "+Inf" ? INFINITY : std::stod(le), value(line));
    }
    if (!line.starts_with(prefix))
      continue;
    auto name_end = line.find('"', prefix.size());
    auto le_at = line.find("le=\"", name_end) + 4;
    auto le = line.substr(le_at, line.find('"', le_at) - le_at);
    out.phases[line.substr(prefix.size(), name_end - prefix.size())].emplace_back(
        le == "+Inf" ? INFINITY : std::stod(le), value(line));
  }
  return out;
}

// The quantile q in ms of what a histogram observed between two scrapes,
// interpolated inside its bucket; -1 when nothing was observed.
double histogram_ms(const std::vector<std::pair<double, double>>& before,
                    const std::vector<std::pair<double, double>>& after, double q = 0.5) {
  if (after.empty() || before.size() != after.size())
    return -1;
  double total = after.back().second - before.back().second;
  if (total <= 0)
    return -1;
  double lower = 0, below = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    double upto = after[i].second - before[i].second;
    if (upto >= total * q) {
      double upper = std::isinf(after[i].first) ? lower : after[i].first;
      double share = upto > below ? (total * q - below) / (upto - below) : 0;
      return 1000 * (lower + share * (upper - lower));
    }
    lower = after[i].first;
    below = upto;
  }
  return -1;
}

// The fake model's own first-token times (ms) from its n-th on
// (GET /_fake/first_tokens): the request read whole to the first content
// chunk handed to the socket: its configured delay plus its own lateness;
// with each one's X-Request-Id ("" without one).
struct model_first_token_times {
  std::vector<double> ms;
  std::vector<std::string> ids;  // ms[i]'s request id
};

model_first_token_times model_first_tokens(uint16_t port, long from) {
  auto target = "/_fake/first_tokens?from=" + std::to_string(from);
  auto body = call(port, http::verb::get, target, "").body;
  model_first_token_times out;
  auto at = body.find("\"us\":[");
  if (at == std::string::npos)
    return out;
  std::istringstream in{body.substr(at + 6)};
  for (double us; in >> us;) {
    out.ms.push_back(us / 1000);
    if (in.peek() == ',')
      in.get();
  }
  // The ids: plain strings (request ids need no escapes).
  at = body.find("\"ids\":[");
  if (at == std::string::npos)
    return out;
  for (auto i = at + 7; i < body.size() && body[i] != ']';) {
    auto open = body.find('"', i);
    auto close = open == std::string::npos ? open : body.find('"', open + 1);
    if (close == std::string::npos)
      break;
    out.ids.push_back(body.substr(open + 1, close - open - 1));
    i = close + 1;
  }
  return out;
}

std::string fmt_ms(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", ms);
  return b;
}

// Each turn's own overhead: its time to first token minus the model's own
// first-token time for that turn's call (matched by request id), for the
// turns the model saw under an id it listed.
std::vector<double> own_overheads(const std::vector<std::vector<stream_stats>>& stats,
                                  const model_first_token_times& model) {
  std::unordered_map<std::string_view, double> by_id;
  for (size_t i = 0; i < model.ms.size() && i < model.ids.size(); ++i)
    if (!model.ids[i].empty())
      by_id.emplace(model.ids[i], model.ms[i]);
  std::vector<double> out;
  for (auto& client : stats)
    for (auto& s : client)
      if (auto m = by_id.find(s.request_id); s.ok && m != by_id.end())
        out.push_back(s.ttft_ms - m->second);
  return out;
}

// The fake model's own gaps between content chunks, counted per ms
// (GET /_fake/token_gaps): what it has counted since it started.
std::map<long, double> model_token_gaps(uint16_t port) {
  auto body = call(port, http::verb::get, "/_fake/token_gaps", "").body;
  std::map<long, double> out;
  auto at = body.find("\"ms\":[");
  if (at == std::string::npos)
    return out;
  std::istringstream in{body.substr(at + 6)};
  char c;
  long ms;
  double n;
  while (in >> c && c == '[' && in >> ms >> c >> n >> c) {
    out[ms] += n;
    if (!(in >> c) || c != ',')
      break;
  }
  return out;
}

// The p-quantile (ms) of the gaps counted between two listings.
double gap_quantile(const std::map<long, double>& before, const std::map<long, double>& after,
                    double p) {
  std::vector<std::pair<long, double>> counts;
  double total = 0;
  for (auto& [ms, n] : after) {
    auto was = before.find(ms);
    double d = n - (was == before.end() ? 0 : was->second);
    if (d > 0) {
      counts.emplace_back(ms, d);
      total += d;
    }
  }
  double seen = 0;
  for (auto& [ms, n] : counts)
    if ((seen += n) >= p * total)
      return static_cast<double>(ms);
  return 0;
}

double pct(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> levels{1, 100, 1000};
  int tokens = 20, first_ms = 50, token_ms = 10, rounds = 1;
  std::string ragtor_bin;
  std::string kb = "demo";  // the chat requests' kb_prefix
  std::string kb_path = std::string{RAGTOR_SOURCE_DIR} + "/examples/kb";
  std::string message = "How do I run the tests?";
  bool scifact = false;
  bool floor = false;  // also measure bench_floor, the bare relay, in the same run
  bool console = false;  // also ragtor with the admin console's feed open
  // Each stream's turns continue one conversation across levels and rounds
  // (the session knows it: the commit runs beside the turn) instead of
  // opening a new one per turn.
  bool continued = false;
  double seconds = 0;  // > 0: sustained rows of this length
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--streams") {
      levels = ragtor::bench::parse_sizes(v);
    } else if (a == "--tokens") {
      tokens = std::stoi(v);
    } else if (a == "--first-token-ms") {
      first_ms = std::stoi(v);
    } else if (a == "--token-ms") {
      token_ms = std::stoi(v);
    } else if (a == "--rounds") {
      rounds = std::stoi(v);
    } else if (a == "--floor") {
      floor = v == "1" || v == "on" || v == "true";
    } else if (a == "--continue") {
      continued = v == "1" || v == "on" || v == "true";
    } else if (a == "--console") {
      console = v == "1" || v == "on" || v == "true";
    } else if (a == "--seconds") {
      seconds = std::stod(v);
    } else if (a == "--kb") {
      kb = v;  // "general": no retrieval, the turn's context read is on the first token's path
    } else if (a == "--kb-dir") {
      kb_path = v;
    } else if (a == "--scifact") {
      scifact = v == "1" || v == "on" || v == "true";
    } else if (a == "--message") {
      message = v;
    } else if (a == "--ragtor") {
      ragtor_bin = v;  // another build to measure (e.g. the previous commit's)
    }
  }
  // Sockets: each stream needs one client and one upstream connection.
  rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  std::signal(SIGPIPE, SIG_IGN);

  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (ragtor_bin.empty())
    ragtor_bin = (bin_dir / "ragtor").string();
  auto scratch = fs::temp_directory_path() / ("ragtor-load-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  std::string reply;
  for (int t = 0; t < tokens; ++t)
    reply += "word" + std::to_string(t) + (t + 1 < tokens ? " " : "");
  std::ofstream{scratch / "script.json"} << R"({"default":{"reply":")" << reply
                                         << R"(","first_token_delay_ms":)" << first_ms
                                         << R"(,"token_delay_ms":)" << token_ms << "}}";
  auto fake = spawn({(bin_dir / "tests/fake_openai").string(), "--port", "0", "--threads", "2",
                     "--script", (scratch / "script.json").string()},
                    "fake_openai listening on http://", {}, scratch / "fake.log");
  auto data = scratch / "data";
  if (scifact) {
    kb_path = (scratch / "scifact.jsonl").string();
    ragtor::bench::write_scifact_corpus(std::string{RAGTOR_SOURCE_DIR} + "/../shared/data", kb_path,
                                        SIZE_MAX);
  }
  auto ingest = "'" + ragtor_bin + "' ingest --kb demo --data-dir '"
                + data.string() + "' '" + kb_path + "' > /dev/null";
  if (std::system(ingest.c_str()) != 0) {
    std::fprintf(stderr, "ingest failed\n");
    stop(fake);
    fs::remove_all(scratch);
    return 1;
  }
  size_t max_level = *std::max_element(levels.begin(), levels.end());
  std::vector<std::string> env{
      "RAGTOR_LLM__BASE_URL=http://127.0.0.1:" + std::to_string(fake.port) + "/v1",
      // Model calls in flight and queued: at least the defaults (16, 64),
      // so that at one stream the summary the turn before asked for does
      // not hold the only slot while the next turn waits for it.
      "RAGTOR_LLM__MODEL=fake-model",
      "RAGTOR_LLM__MAX_CONCURRENCY=" + std::to_string(std::max<size_t>(max_level, 16)),
      "RAGTOR_LLM__MAX_QUEUE=" + std::to_string(std::max<size_t>(max_level, 64)),
      // Admission ([server] max_streams, max_connections) sized for the
      // largest level: this measures streams served, not streams refused.
      "RAGTOR_SERVER__MAX_STREAMS=" + std::to_string(std::max<size_t>(max_level, 1024)),
      "RAGTOR_SERVER__MAX_CONNECTIONS=" + std::to_string(std::max<size_t>(2 * max_level, 4096)),
      "RAGTOR_LOG__LEVEL=warn"};
  auto ragtor = spawn({ragtor_bin, "serve", "--listen", "127.0.0.1:0",
                       "--data-dir", data.string()},
                      "ragtor listening on http://", env, scratch / "ragtor.log");
  std::printf("fake model: %d tokens, first token after %d ms, %d ms between tokens\n", tokens,
              first_ms, token_ms);
  child floor_server;
  if (floor)
    floor_server = spawn({(bin_dir / "bench/bench_floor").string(), "--upstream",
                          std::to_string(fake.port)},
                         "floor listening on http://", {}, scratch / "floor.log");
  std::printf(
      "| server | streams | req/s | TTFT p50 ms | TTFT p99 ms | overhead p50 ms | overhead p99 ms "
      "| gap p99 ms | tokens/s | errors | server peak RSS MiB | KiB per stream | server CPU "
      "ms/turn "
      "| CPU %% server / model / client | model's own first token p50 ms | own overhead p50 ms "
      "| model's own gap p99 ms | gap p99 above the model's ms | own overhead p99 ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (auto n : levels) {
    for (int round = 0; round < rounds; ++round) {
     for (int pass = 0; pass < 3; ++pass) {
      // 0: ragtor; 1: ragtor with the console open; 2: the floor.
      auto* server = pass == 2 ? &floor_server : &ragtor;
      if (server->pid <= 0 || (pass == 1 && !console))
        continue;
      std::optional<console_feed> feed;
      if (pass == 1)
        feed.emplace(server->port);
      net::io_context ioc{1};
      std::vector<std::vector<stream_stats>> stats(n);
      std::optional<steady::time_point> until;
      if (seconds > 0)
        until = steady::now() + std::chrono::duration_cast<steady::duration>(
                                    std::chrono::duration<double>(seconds));
      for (size_t i = 0; i < n; ++i) {
        auto session = continued ? "c" + std::to_string(pass)
                                 : "r" + std::to_string(n) + "_" + std::to_string(round) + "_"
                                       + std::to_string(pass);
        ragtor::json_writer w;
        w.begin_object()
            .field("user_id", "load" + std::to_string(i))
            .field("session_id", session)
            .field("kb_prefix", kb)
            .field("message", message)
            .end_object();
        auto body = w.take();
        net::co_spawn(ioc, one_client(server->port, body, until, stats[i]), net::detached);
      }
      // Who was saturated: each process's CPU over the row (100 % = one
      // core), and the server's CPU per completed turn.
      auto self_cpu = [] {
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        auto s = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
        return s(ru.ru_utime) + s(ru.ru_stime);
      };
      // Memory per open stream: the peak over the row less what the server
      // held before it (meaningful when the streams are open together).
      scraped phases_before;
      if (pass != 2)
        phases_before = scrape_phases(server->port);
      reset_peak_rss(server->pid);
      auto rss_before = rss_kib(server->pid);
      double server_cpu0 = cpu_seconds(server->pid), model_cpu0 = cpu_seconds(fake.pid),
             client_cpu0 = self_cpu();
      auto model_from =
          counter(call(fake.port, http::verb::get, "/_fake/stats", "").body, "first_tokens");
      auto model_gaps_before = model_token_gaps(fake.port);
      auto t0 = steady::now();
      ioc.run();
      auto secs = std::chrono::duration<double>(steady::now() - t0).count();
      double server_cpu = cpu_seconds(server->pid) - server_cpu0,
             model_cpu = cpu_seconds(fake.pid) - model_cpu0, client_cpu = self_cpu() - client_cpu0;
      std::vector<double> ttft, gaps;
      size_t ok = 0, delivered = 0, turns = 0;
      std::map<std::string, size_t> failures;  // why streams failed, counted
      for (auto& client : stats)
        for (auto& s : client) {
          ++turns;
          if (!s.ok)
            ++failures[s.why];
          if (s.ok) {
            ++ok;
            ttft.push_back(s.ttft_ms);
            gaps.insert(gaps.end(), s.gaps_ms.begin(), s.gaps_ms.end());
          }
          delivered += s.tokens;
        }
      auto peak = peak_rss_kib(server->pid);
      // ragtor's own overhead against what the model itself took to its
      // first token, rather than against its configured delay.
      auto model_times = model_first_tokens(fake.port, model_from);
      auto model_p50 = pct(model_times.ms, 0.5);
      // Turn by turn: what the issue's target 3 measures, without the
      // model's own lateness on a saturated machine.
      auto own = own_overheads(stats, model_times);
      // The client's gaps against the model's own, likewise: a model that
      // falls behind its configured pace (on a saturated machine) widens
      // both.
      auto model_gap_p99 = gap_quantile(model_gaps_before, model_token_gaps(fake.port), 0.99);
      std::printf(
          "| %s | %zu | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f | %.0f | %zu | %.0f | %.1f "
          "| %.2f | %.0f / %.0f / %.0f | %.2f | %.2f | %.0f | %.1f | %s |\n",
          pass == 0   ? "ragtor"
          : pass == 1 ? "ragtor+console"
                      : "floor",
          n, static_cast<double>(ok) / secs, pct(ttft, 0.5), pct(ttft, 0.99),
          pct(ttft, 0.5) - first_ms, pct(ttft, 0.99) - first_ms, pct(gaps, 0.99),
          static_cast<double>(delivered) / secs, turns - ok, static_cast<double>(peak) / 1024,
          peak > rss_before ? static_cast<double>(peak - rss_before) / static_cast<double>(n) : 0.0,
          ok > 0 ? 1000 * server_cpu / static_cast<double>(ok) : 0.0, 100 * server_cpu / secs,
          100 * model_cpu / secs, 100 * client_cpu / secs, model_p50, pct(ttft, 0.5) - model_p50,
          model_gap_p99, gaps.empty() ? 0.0 : pct(gaps, 0.99) - model_gap_p99,
          own.size() == ok && ok > 0 ? fmt_ms(pct(own, 0.99)).c_str() : "-");
      if (pass != 2) {
        // Where ragtor's turns spent their time before the first token
        // (ragtor_turn_phase_seconds, from each turn's start in its stream).
        auto phases_after = scrape_phases(server->port);
        std::printf("(phases, p50 ms from the turn's start:");
        for (auto name : {"routed", "context", "evidence", "model_called", "first_token"})
          std::printf(" %s %.2f", name,
                      histogram_ms(phases_before.phases[name], phases_after.phases[name]));
        auto commits = phases_after.commits - phases_before.commits;
        if (commits > 0)
          std::printf("; store commits: %.0f, mean %.2f ms, p99 %.2f ms", commits,
                      1000 * (phases_after.commit_seconds - phases_before.commit_seconds) / commits,
                      histogram_ms(phases_before.commit_buckets, phases_after.commit_buckets, 0.99));
        if (auto waits = phases_after.descriptor_waits - phases_before.descriptor_waits; waits > 0)
          std::printf("; model connects that waited for a free descriptor: %.0f", waits);
        std::printf(")\n");
      }
      if (!failures.empty()) {
        std::printf("(failed streams:");
        const char* sep = " ";
        for (auto& [why, count] : failures) {
          std::printf("%s%zu %s", sep, count, why.c_str());
          sep = "; ";
        }
        std::printf(")\n");
      }
      if (feed)
        std::printf("(the console feed received %zu bytes during that run)\n", feed->bytes());
      std::fflush(stdout);
     }
    }
  }
  stop(floor_server);
  stop(ragtor);
  stop(fake);
  if (std::getenv("RAGTOR_BENCH_KEEP"))
    std::printf("kept %s (ragtor.log, fake.log)\n", scratch.c_str());
  else
    fs::remove_all(scratch);
  return 0;
}
