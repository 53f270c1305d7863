// What API keys cost per request (docs/security.md): first in process —
// hashing a key, the cache lookup, the token bucket (alone and with
// threads on one key), the user-prefix/KB check of a chat body — then over
// HTTP against two `ragtor serve` processes of the same build, auth off
// and auth on, in the same run: requests/s of a cheap route and turns/s of
// /api/v1/chat, sequential (one client, so the difference is per-request
// latency, not contention). Prints numbers; asserts nothing.
//
//   bench_auth [--ops N] [--requests N] [--turns N] [--binary PATH]
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "bench/bench_proc.hpp"
#include "http/auth.hpp"

namespace fs = std::filesystem;
using namespace ragtor;
using namespace ragtor::http;
using bench_clock = std::chrono::steady_clock;

namespace {

template <class F>
double us_per_op(size_t ops, F f) {
  auto t0 = bench_clock::now();
  for (size_t i = 0; i < ops; ++i)
    f(i);
  return std::chrono::duration<double, std::micro>(bench_clock::now() - t0).count()
         / static_cast<double>(ops);
}

std::atomic<size_t> sink{0};

void in_process(size_t ops) {
  std::printf("in process (%zu operations each)\n", ops);
  auto key = generate_api_key();
  std::printf("  %-44s %8.3f us\n", "generate_api_key",
              us_per_op(ops / 10, [&](size_t) { sink += generate_api_key().size(); }));
  std::printf("  %-44s %8.3f us\n", "hash_api_key (SHA-256)",
              us_per_op(ops, [&](size_t) { sink += hash_api_key(key).size(); }));
  key_cache cache;
  std::vector<api_key_record> records;
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back(generate_api_key());
    api_key_record r;
    r.id = std::to_string(i);
    r.name = "k" + std::to_string(i);
    r.hash = hash_api_key(keys.back());
    r.scopes = "chat,kb:read";
    r.rate = 1e6;
    r.burst = 1000000;
    records.push_back(r);
  }
  cache.replace(records, auth_clock::now());
  std::printf("  %-44s %8.3f us\n", "key_cache::find, hit (1000 keys)",
              us_per_op(ops, [&](size_t i) { sink += cache.find(keys[i % 1000]) != nullptr; }));
  std::printf("  %-44s %8.3f us\n", "key_cache::find, miss",
              us_per_op(ops, [&](size_t) { sink += cache.find(key) != nullptr; }));
  auto entry = cache.find(keys[0]);
  auto now = auth_clock::now();
  std::printf("  %-44s %8.3f us\n", "token_bucket::take, one thread",
              us_per_op(ops, [&](size_t) {
                sink += entry->bucket.take(1e6, 1e6, auth_clock::now());
              }));
  for (int threads : {2, 4}) {
    std::vector<std::thread> ts;
    auto t0 = bench_clock::now();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (size_t i = 0; i < ops; ++i)
          sink += entry->bucket.take(1e6, 1e6, auth_clock::now());
      });
    for (auto& t : ts)
      t.join();
    auto us = std::chrono::duration<double, std::micro>(bench_clock::now() - t0).count();
    std::printf("  token_bucket::take, %d threads on one key        %8.3f us (wall per take)\n",
                threads, us / static_cast<double>(ops * threads));
  }
  (void)now;
  api_key_record limited = records[0];
  limited.user_prefix = "acme:";
  limited.kbs = "test,faq";
  key_entry k{limited};
  std::string body =
      R"({"user_id":"acme:ann","session_id":"s1","message":"How long do the batteries of the K7 last?","kb_prefix":"test"})";
  path_params none;
  std::printf("  %-44s %8.3f us\n", "subjects_of + check_subjects (chat body)",
              us_per_op(ops, [&](size_t) {
                sink += check_subjects(k, "POST", true, subjects_of("chat_json", none, "", body))
                            .status;
              }));
  std::printf("  => per authenticated request: hash + find + take = %.3f us\n",
              us_per_op(ops, [&](size_t i) {
                auto e = cache.find(keys[i % 1000]);
                sink += e->bucket.take(1e6, 1e6, auth_clock::now());
              }));
}

struct reply {
  unsigned status = 0;
  std::string body;
};

reply call(uint16_t port, boost::beast::http::verb verb, const std::string& target,
           const std::string& body, const std::string& bearer) {
  namespace net = boost::asio;
  namespace beast = boost::beast;
  namespace bhttp = beast::http;
  net::io_context ioc;
  beast::tcp_stream s{ioc};
  s.expires_after(std::chrono::seconds(120));
  s.connect(net::ip::tcp::endpoint{net::ip::make_address("127.0.0.1"), port});
  bhttp::request<bhttp::string_body> req{verb, target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  req.set(bhttp::field::content_type, "application/json");
  if (!bearer.empty())
    req.set(bhttp::field::authorization, "Bearer " + bearer);
  req.body() = body;
  req.prepare_payload();
  bhttp::write(s, req);
  beast::flat_buffer buf;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(s, buf, res);
  return {res.result_int(), res.body()};
}

struct http_numbers {
  double requests_per_s = 0;
  double turns_per_s = 0;
  size_t failures = 0;
};

http_numbers over_http(const std::string& bin, const fs::path& scratch, bool auth, int requests,
                       int turns) {
  namespace bhttp = boost::beast::http;
  std::string token = "bench-admin-token";
  std::vector<std::string> env{"RAGTOR_LOG__LEVEL=warn"};
  if (auth) {
    env.push_back("RAGTOR_AUTH__MODE=api_key");
    env.push_back("RAGTOR_AUTH__ADMIN_TOKEN=" + token);
  }
  auto dir = scratch / (auth ? "on" : "off");
  fs::create_directories(dir);
  auto server = spawn({bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", (dir / "data").string()},
                      "ragtor listening on http://", env, dir / "ragtor.log");
  std::string key;
  if (auth) {
    auto created = call(server.port, bhttp::verb::post, "/admin/api/keys",
                        R"({"name":"bench","scopes":["chat","kb:read"],"rate":0})", token);
    auto at = created.body.find("\"key\":\"");
    key = created.body.substr(at + 7, created.body.find('"', at + 7) - at - 7);
  }
  http_numbers n;
  auto t0 = bench_clock::now();
  for (int i = 0; i < requests; ++i)
    n.failures += call(server.port, bhttp::verb::get, "/api/v1/kbs", "", key).status != 200;
  n.requests_per_s = requests / std::chrono::duration<double>(bench_clock::now() - t0).count();
  t0 = bench_clock::now();
  for (int i = 0; i < turns; ++i)
    n.failures += call(server.port, bhttp::verb::post, "/api/v1/chat",
                       R"({"user_id":"u)" + std::to_string(i % 8) + R"(","session_id":"s","message":"hello there","kb_prefix":"general"})",
                       key)
                      .status
                  != 200;
  n.turns_per_s = turns / std::chrono::duration<double>(bench_clock::now() - t0).count();
  stop(server);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  size_t ops = 1000000;
  int requests = 2000, turns = 300;
  std::string bin;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ops")
      ops = std::max<size_t>(1000, std::stoul(argv[i + 1]));
    else if (a == "--requests")
      requests = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--turns")
      turns = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--binary")
      bin = argv[i + 1];
  }
  std::signal(SIGPIPE, SIG_IGN);
  in_process(ops);
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (bin.empty())
    bin = (bin_dir / "ragtor").string();
  auto scratch = fs::temp_directory_path() / ("ragtor-bench-auth-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  std::printf("over HTTP, one client, sequential (%d GET /api/v1/kbs, %d POST /api/v1/chat)\n",
              requests, turns);
  auto off = over_http(bin, scratch, false, requests, turns);
  auto on = over_http(bin, scratch, true, requests, turns);
  std::printf("  %-10s %12s %10s %9s\n", "auth", "requests/s", "turns/s", "failures");
  std::printf("  %-10s %12.0f %10.1f %9zu\n", "off", off.requests_per_s, off.turns_per_s,
              off.failures);
  std::printf("  %-10s %12.0f %10.1f %9zu\n", "api_key", on.requests_per_s, on.turns_per_s,
              on.failures);
  std::printf("  per request: %+.1f us (cheap route), per turn: %+.1f us\n",
              1e6 / on.requests_per_s - 1e6 / off.requests_per_s,
              1e6 / on.turns_per_s - 1e6 / off.turns_per_s);
  fs::remove_all(scratch);
  return 0;
}
