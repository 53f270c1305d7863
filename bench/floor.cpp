// The floor for bench_load (issue 20): a minimal Beast SSE server that
// relays the fake model's tokens with no actor, routing, retrieval, store
// or prompt — the least any server can do for the same exchange. On
// POST /api/v1/chat/stream it sends one streaming chat completion upstream
// (pooled keep-alive connections), relays every content delta as a
// `{"status":"token"}` SSE event and ends with `{"status":"done"}`, the
// events bench_load reads. One I/O thread. ragtor's cost is shown as a
// ratio to this floor measured in the same run (bench_load --floor).
//
//   build/bench/bench_floor --upstream PORT   (prints "floor listening on http://127.0.0.1:PORT")
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include "http/open_files.hpp"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
constexpr auto tuple_awaitable = net::as_tuple(net::use_awaitable);

namespace {

uint16_t upstream_port = 0;
std::vector<tcp::socket> idle;  // pooled upstream connections (one thread: no lock)

// The JSON-escaped text of "content":"..." in `chunk` ("" when none).
std::string_view content_of(std::string_view chunk) {
  constexpr std::string_view key = "\"content\":\"";
  auto at = chunk.find(key);
  if (at == std::string_view::npos)
    return {};
  auto begin = at + key.size();
  for (auto i = begin; i < chunk.size(); ++i) {
    if (chunk[i] == '\\')
      ++i;
    else if (chunk[i] == '"')
      return chunk.substr(begin, i - begin);
  }
  return {};
}

net::awaitable<bool> write_chunk(tcp::socket& client, const std::string& data) {
  auto [ec, n] = co_await net::async_write(client, http::make_chunk(net::buffer(data)),
                                           tuple_awaitable);
  co_return !ec;
}

// Relays one streamed completion to `client` as SSE token events.
net::awaitable<bool> relay(tcp::socket& client, std::string request_id) {
  auto ex = co_await net::this_coro::executor;
  tcp::socket up{ex};
  bool fresh = idle.empty();
  if (!fresh) {
    up = std::move(idle.back());
    idle.pop_back();
  } else {
    auto [ec] = co_await up.async_connect(
        tcp::endpoint{net::ip::make_address("127.0.0.1"), upstream_port}, tuple_awaitable);
    if (ec)
      co_return false;
  }
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (!request_id.empty())  // the client's, passed on as ragtor passes its turn's
    req.set("X-Request-Id", request_id);
  req.keep_alive(true);
  req.body() =
      R"({"model":"fake-model","stream":true,"messages":[{"role":"user","content":"How do I run the tests?"}]})";
  req.prepare_payload();
  auto [wec, wn] = co_await http::async_write(up, req, tuple_awaitable);
  if (wec)
    co_return false;
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> p;
  p.body_limit(boost::none);
  auto [hec, hn] = co_await http::async_read_header(up, buffer, p, tuple_awaitable);
  if (hec || p.get().result_int() != 200)
    co_return false;
  std::array<char, 8192> buf;
  std::string pending;
  bool ended = false;
  while (!p.is_done()) {
    p.get().body().data = buf.data();
    p.get().body().size = buf.size();
    auto [rec, n] = co_await http::async_read_some(up, buffer, p, tuple_awaitable);
    if (rec && rec != http::error::need_buffer)
      co_return false;
    pending.append(buf.data(), buf.size() - p.get().body().size);
    std::string out;
    for (auto end = pending.find("\n\n"); end != std::string::npos; end = pending.find("\n\n")) {
      std::string_view event{pending.data(), end};
      if (event.starts_with("data: [DONE]")) {
        ended = true;
      } else if (auto text = content_of(event); !text.empty()) {
        out += "data: {\"status\":\"token\",\"content\":\"";
        out += text;
        out += "\"}\n\n";
      }
      pending.erase(0, end + 2);
    }
    if (!out.empty() && !co_await write_chunk(client, out))
      co_return false;
  }
  if (p.get().keep_alive())
    idle.push_back(std::move(up));
  co_return ended;
}

net::awaitable<void> serve(tcp::socket client) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    auto [rec, rn] = co_await http::async_read(client, buffer, req, tuple_awaitable);
    if (rec)
      co_return;
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    auto [hec, hn] = co_await http::async_write_header(client, sr, tuple_awaitable);
    if (hec)
      co_return;
    bool ok = co_await relay(client, std::string{req["X-Request-Id"]});
    std::string last = ok ? "data: {\"status\":\"done\"}\n\n"
                          : "data: {\"status\":\"error\"}\n\ndata: {\"status\":\"done\"}\n\n";
    if (!co_await write_chunk(client, last))
      co_return;
    auto [lec, ln] = co_await net::async_write(client, http::make_chunk_last(), tuple_awaitable);
    if (lec || !req.keep_alive())
      co_return;
  }
}

net::awaitable<void> accept(tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
    if (ec)
      continue;
    socket.set_option(tcp::no_delay(true));
    net::co_spawn(acceptor.get_executor(), serve(std::move(socket)), net::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string_view{argv[i]} == "--upstream")
      upstream_port = static_cast<uint16_t>(std::stoi(argv[i + 1]));
  if (upstream_port == 0) {
    std::fprintf(stderr, "usage: bench_floor --upstream PORT\n");
    return 2;
  }
  // A descriptor per client and per upstream connection, as ragtor raises
  // its own (http/open_files.hpp): the hard limit too when run as root.
  ragtor::http::raise_open_file_limit(uint64_t{1} << 20);
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc, tcp::endpoint{net::ip::make_address("127.0.0.1"), 0}};
  acceptor.listen(4096);
  std::printf("floor listening on http://127.0.0.1:%u\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  net::co_spawn(ioc, accept(acceptor), net::detached);
  ioc.run();
}
