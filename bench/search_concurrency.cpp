// Concurrent search on one KB: N clients POST /api/v1/kbs/{kb}/search
// against a real `ragtor serve` (started here on loopback, in a scratch
// directory) as fast as they can, each on its own keep-alive connection,
// all on the same KB and agent type. The KB is the SciFact corpus
// (../shared/data, 5,183 abstracts) and the queries are its 300 claims.
// Prints queries/s and client-side p50/p99 latency per client count, so
// one agent's concurrency shows directly. Bounded in time; never asserts.
//
//   build/bench/bench_search_concurrency [--clients 1,4,16] [--seconds 5]
//       [--agent hybrid_agent] [--docs 5183] [--ragtor PATH] [--workers N]
//
// --ragtor runs another server binary (e.g. one built from an older
// commit); --workers sets [retrieval] agent_workers (binaries that know it).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "bench/bench_proc.hpp"
#include "bench/bench_util.hpp"
#include "protocol/json_writer.hpp"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace fs = std::filesystem;
using tcp = net::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

struct client_stats {
  std::vector<double> latency_ms;
  size_t errors = 0;
};

// One client: searches in a loop on one connection until `until`,
// starting at query `first` (clients spread over the query set).
void run_client(uint16_t port, const std::string& kb, const std::string& agent,
                const std::vector<std::string>& queries, size_t first, steady::time_point until,
                client_stats& out) {
  net::io_context ioc;
  beast::tcp_stream s{ioc};
  s.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port});
  beast::flat_buffer buffer;
  for (size_t i = first; steady::now() < until; ++i) {
    ragtor::json_writer w;
    w.begin_object()
        .field("query", queries[i % queries.size()])
        .field("top_k", int64_t{10})
        .field("agent_type", agent)
        .end_object();
    http::request<http::string_body> req{http::verb::post, "/api/v1/kbs/" + kb + "/search", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = w.take();
    req.prepare_payload();
    auto t0 = steady::now();
    beast::error_code ec;
    http::write(s, req, ec);
    http::response<http::string_body> res;
    if (!ec)
      http::read(s, buffer, res, ec);
    if (ec) {
      ++out.errors;
      return;  // the connection is gone
    }
    if (res.result_int() != 200) {
      ++out.errors;
      continue;
    }
    out.latency_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> levels{1, 4, 16};
  double seconds = 5;
  std::string agent = "hybrid_agent", ragtor_bin, workers;
  size_t max_docs = 100000;
  std::string data = std::string{RAGTOR_SOURCE_DIR} + "/../shared/data";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--clients") {
      levels = ragtor::bench::parse_sizes(v);
    } else if (a == "--seconds") {
      seconds = std::stod(v);
    } else if (a == "--agent") {
      agent = v;
    } else if (a == "--docs") {
      max_docs = std::stoul(v);
    } else if (a == "--ragtor") {
      ragtor_bin = v;
    } else if (a == "--workers") {
      workers = v;
    } else if (a == "--data") {
      data = v;
    }
  }
  std::signal(SIGPIPE, SIG_IGN);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (ragtor_bin.empty())
    ragtor_bin = (bin_dir / "ragtor").string();
  auto scratch = fs::temp_directory_path() / ("ragtor-search-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  auto docs = ragtor::bench::write_scifact_corpus(data, (scratch / "scifact.jsonl").string(),
                                                 max_docs);
  std::vector<std::string> queries;
  for (auto& row : ragtor::bench::read_tsv(data + "/scifact/queries_test.tsv", false))
    if (row.size() >= 2)
      queries.push_back(row[1]);
  auto data_dir = scratch / "data";
  auto ingest = "'" + ragtor_bin + "' ingest --kb sci --data-dir '" + data_dir.string() + "' '"
                + (scratch / "scifact.jsonl").string() + "' > /dev/null";
  auto t_ingest = steady::now();
  if (std::system(ingest.c_str()) != 0) {
    std::fprintf(stderr, "ingest failed\n");
    return 1;
  }
  std::vector<std::string> env{"RAGTOR_LOG__LEVEL=warn"};
  if (!workers.empty())
    env.push_back("RAGTOR_RETRIEVAL__AGENT_WORKERS=" + workers);
  auto server =
      spawn({ragtor_bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir.string()},
            "ragtor listening on http://", env, scratch / "ragtor.log");
  std::printf(
      "server %s; KB: %zu SciFact abstracts (ingested in %.1f s); %zu queries; agent %s; "
      "%u cores; %.0f s per level\n",
      ragtor_bin.c_str(), docs, std::chrono::duration<double>(steady::now() - t_ingest).count(),
      queries.size(), agent.c_str(), std::thread::hardware_concurrency(), seconds);
  // Warm-up: the agent is spawned and every page touched once.
  {
    client_stats warm;
    run_client(server.port, "sci", agent, queries, 0,
               steady::now() + std::chrono::milliseconds(500), warm);
  }
  std::printf("| clients | queries/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (auto n : levels) {
    std::vector<client_stats> stats(n);
    std::vector<std::thread> threads;
    auto t0 = steady::now();
    auto until =
        t0 + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
    for (size_t c = 0; c < n; ++c)
      threads.emplace_back([&, c] {
        run_client(server.port, "sci", agent, queries, c * queries.size() / n, until, stats[c]);
      });
    for (auto& t : threads)
      t.join();
    auto secs = std::chrono::duration<double>(steady::now() - t0).count();
    std::vector<double> all;
    size_t errors = 0;
    for (auto& s : stats) {
      all.insert(all.end(), s.latency_ms.begin(), s.latency_ms.end());
      errors += s.errors;
    }
    std::printf("| %zu | %.0f | %.2f | %.2f | %zu |\n", n, static_cast<double>(all.size()) / secs,
                ragtor::bench::percentile(all, 0.5), ragtor::bench::percentile(all, 0.99), errors);
    std::fflush(stdout);
  }
  stop(server);
  fs::remove_all(scratch);
  return 0;
}
