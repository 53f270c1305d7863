#include "http/server.hpp"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_system.hpp>

#include "http/connection_io.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "http/request_target.hpp"
#include "http/routes.hpp"
#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/kb_json.hpp"

namespace ragtor::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

// The Beast stream a handler's reply_json() writes to.
struct connection_io_beast : connection_io {
  beast::tcp_stream& stream;
};

namespace {

using request_t = bhttp::request<bhttp::string_body>;
using response_t = bhttp::response<bhttp::string_body>;

response_t json_response(unsigned status, std::string body, bool keep_alive) {
  response_t res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::server, "ragtor");
  res.set(bhttp::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

net::awaitable<void> write_response(beast::tcp_stream& stream, response_t res) {
  co_await bhttp::async_write(stream, res, net::use_awaitable);
}

net::awaitable<void> write_error(beast::tcp_stream& stream, unsigned status, std::string_view code,
                                 std::string_view message, bool keep_alive) {
  co_await write_response(stream, json_response(status, error_body(code, message, ""), keep_alive));
}

std::string_view to_string_view(beast::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace

net::awaitable<void> reply_json(exchange& ex, unsigned status, std::string body) {
  auto& io = static_cast<connection_io_beast&>(ex.io);
  co_await write_response(io.stream, json_response(status, std::move(body), ex.keep_alive));
}

struct server::impl : handler_context, std::enable_shared_from_this<server::impl> {
  router routes{api_routes()};
  std::atomic<bool> accepting{true};

  // Declared after everything its handlers touch: they are destroyed with it.
  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;

  impl(caf::actor_system& s, server_settings st, session_manager_actor sm, store_actor sa)
      : handler_context{s, std::move(st), std::move(sm), std::move(sa), {}},
        ioc(settings.io_threads) {}

  net::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    while (accepting) {
      boost::system::error_code ec;
      auto sock = co_await acceptor->async_accept(net::make_strand(ioc),
                                                  net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        if (!accepting || ec == net::error::operation_aborted)
          break;
        spdlog::warn("http: accept failed: {}", ec.message());
        continue;
      }
      sock.set_option(tcp::no_delay{true}, ec);
      auto ex = sock.get_executor();
      net::co_spawn(ex, connection(std::move(sock)), net::detached);
    }
  }

  net::awaitable<void> connection(tcp::socket sock) {
    auto self = shared_from_this();
    beast::tcp_stream stream{std::move(sock)};
    beast::flat_buffer buffer;
    try {
      for (;;) {
        bhttp::request_parser<bhttp::string_body> parser;
        // Beast checks Content-Length against the limit while parsing the
        // header, before the target is known: parse with the largest limit,
        // then apply the route's own.
        parser.body_limit(std::max(settings.limits.max_body_bytes, settings.max_ingest_bytes));
        stream.expires_after(settings.idle_timeout);
        boost::system::error_code ec;
        co_await bhttp::async_read_header(stream, buffer, parser,
                                          net::redirect_error(net::use_awaitable, ec));
        // Routed once, before the body is read: the route says how to read it.
        request_target target;
        route_match match;
        auto body_limit = settings.limits.max_body_bytes;
        if (!ec) {
          auto& head = parser.get();
          target = parse_request_target(to_string_view(head.target()));
          match = routes.match(to_string_view(head.method_string()), target.path);
          if (match.matched && match.matched->body == body_kind::documents)
            body_limit = settings.max_ingest_bytes;
          parser.body_limit(body_limit);  // still enforced for chunked bodies
          if (auto len = parser.content_length(); len && *len > body_limit)
            ec = bhttp::error::body_limit;
        }
        if (!ec && beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
          bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
          co_await bhttp::async_write(stream, cont, net::use_awaitable);
        }
        // NDJSON ingestion bodies are parsed line by line as they arrive,
        // never held whole (they may be up to server.max_ingest_bytes).
        std::optional<ndjson_documents> streamed;
        request_t streamed_req;
        bool body_left = false;
        if (!ec && match.matched && match.matched->body == body_kind::documents
            && is_ndjson_type(to_string_view(parser.get()[bhttp::field::content_type]))) {
          streamed.emplace(settings.max_ingest_documents);
          ec = co_await read_ndjson(stream, buffer, parser, body_limit, *streamed, streamed_req,
                                    body_left);
        } else if (!ec) {
          co_await bhttp::async_read(stream, buffer, parser,
                                     net::redirect_error(net::use_awaitable, ec));
        }
        if (ec == bhttp::error::body_limit) {
          co_await write_error(stream, 413, "payload_too_large",
                               "request body exceeds " + std::to_string(body_limit) + " bytes",
                               false);
          co_await drain(stream);
          break;
        }
        if (ec) {
          if (ec != bhttp::error::end_of_stream && ec != net::error::eof
              && ec != beast::error::timeout && ec != net::error::operation_aborted)
            co_await write_error(stream, 400, "invalid_request", "malformed HTTP request", false);
          break;
        }
        stream.expires_never();
        if (streamed) {
          // A body left unread (a bad line stopped the parse) ends the
          // connection after the answer.
          bool keep = co_await dispatch(stream, streamed_req, target, match, &*streamed);
          if (body_left) {
            co_await drain(stream);
            break;
          }
          if (!keep)
            break;
          continue;
        }
        auto req = parser.release();
        bool keep = co_await dispatch(stream, req, target, match, nullptr);
        if (!keep)
          break;
      }
    } catch (const std::exception& e) {
      spdlog::debug("http: connection ended: {}", e.what());
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
  }

  // Reads and discards what the client is still sending (bounded in bytes
  // and time) so it can read our early error response instead of getting a
  // connection reset.
  static net::awaitable<void> drain(beast::tcp_stream& stream) {
    boost::system::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 64 * 1024> scratch;
    size_t total = 0;
    stream.expires_after(std::chrono::seconds(2));
    while (total < (64u << 20)) {
      auto n = co_await stream.async_read_some(net::buffer(scratch),
                                               net::redirect_error(net::use_awaitable, ec));
      if (ec)
        break;
      total += n;
    }
  }

  // Reads the body of the request whose header `header_parser` holds in
  // 64 KiB pieces into `docs`, stopping at the first bad line
  // (`body_left` then says the rest was not read). `req` gets the header.
  static net::awaitable<boost::system::error_code> read_ndjson(
      beast::tcp_stream& stream, beast::flat_buffer& buffer,
      bhttp::request_parser<bhttp::string_body>& header_parser, size_t body_limit,
      ndjson_documents& docs, request_t& req, bool& body_left) {
    bhttp::request_parser<bhttp::buffer_body> p{std::move(header_parser)};
    p.body_limit(body_limit);
    std::vector<char> piece(64 * 1024);
    boost::system::error_code ec;
    while (!p.is_done()) {
      p.get().body().data = piece.data();
      p.get().body().size = piece.size();
      co_await bhttp::async_read(stream, buffer, p, net::redirect_error(net::use_awaitable, ec));
      if (ec == bhttp::error::need_buffer)
        ec = {};
      if (ec)
        co_return ec;
      auto n = piece.size() - p.get().body().size;
      if (!docs.feed(std::string_view{piece.data(), n}))
        break;
    }
    body_left = !p.is_done();
    if (docs.ok())
      docs.finish();
    req = request_t{std::move(p.get().base())};
    co_return ec;
  }

  // Serves one request through its route; returns whether the connection
  // may be reused. `streamed`: the documents of an NDJSON ingestion.
  net::awaitable<bool> dispatch(beast::tcp_stream& stream, request_t& req,
                                const request_target& target, route_match& match,
                                ndjson_documents* streamed) {
    bool keep = req.keep_alive();
    if (!target.valid) {
      co_await write_error(stream, 400, "invalid_request", "malformed query string", keep);
      co_return keep;
    }
    if (!match.matched && !match.allow.empty()) {
      auto res = json_response(
          405, error_body("method_not_allowed", "method not allowed for this path", ""), keep);
      res.set(bhttp::field::allow, match.allow);
      co_await write_response(stream, std::move(res));
      co_return keep;
    }
    if (!match.matched) {
      co_await write_error(stream, 404, "not_found", "no such endpoint: " + target.path, keep);
      co_return keep;
    }
    connection_io_beast io{{stream.socket()}, stream};
    exchange ex{to_string_view(req.method_string()),
                std::string_view{req.body()},
                to_string_view(req[bhttp::field::content_type]),
                target,
                std::move(match.params),
                keep,
                streamed,
                io,
                [&req](std::string_view name) {
                  return to_string_view(req[beast::string_view{name.data(), name.size()}]);
                }};
    co_await match.matched->handler(*this, ex);
    co_return ex.keep_alive;
  }
};

server::server(caf::actor_system& sys, server_settings settings, session_manager_actor sessions,
               store_actor store)
    : impl_(
        std::make_shared<impl>(sys, std::move(settings), std::move(sessions), std::move(store))) {}

server::~server() {
  stop();
}

caf::expected<uint16_t> server::start() {
  auto& im = *impl_;
  boost::system::error_code ec;
  auto addr = net::ip::make_address(im.settings.host, ec);
  if (ec)
    return make_error(errc::invalid_request, "bad listen address \"" + im.settings.host + "\"");
  tcp::endpoint ep{addr, im.settings.port};
  im.acceptor.emplace(im.ioc);
  im.acceptor->open(ep.protocol(), ec);
  if (!ec)
    im.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    im.acceptor->bind(ep, ec);
  if (!ec)
    im.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(errc::unavailable, "cannot listen on " + im.settings.host + ":"
                                             + std::to_string(im.settings.port) + ": "
                                             + ec.message());
  auto port = im.acceptor->local_endpoint().port();
  im.work.emplace(im.ioc.get_executor());
  net::co_spawn(im.ioc, impl_->accept_loop(), net::detached);
  for (int i = 0; i < std::max(1, im.settings.io_threads); ++i)
    im.threads.emplace_back([&im] { im.ioc.run(); });
  return port;
}

void server::stop_accepting() {
  auto& im = *impl_;
  if (!im.accepting.exchange(false))
    return;
  net::post(im.ioc, [&im] {
    boost::system::error_code ignored;
    if (im.acceptor)
      im.acceptor->close(ignored);
  });
}

size_t server::wait_idle(std::chrono::milliseconds grace) {
  return impl_->chats.wait_idle(grace);
}

void server::stop() {
  if (!impl_)
    return;
  auto& im = *impl_;
  stop_accepting();
  im.work.reset();
  im.ioc.stop();
  for (auto& t : im.threads)
    if (t.joinable())
      t.join();
  im.threads.clear();
  // Coroutine frames left in the stopped io_context keep `im` alive until
  // the io_context is destroyed; drop the actor handles now so the actor
  // system can shut down (a detached actor is only released when the last
  // handle to it is gone).
  im.settings.kb_admin = nullptr;
  im.settings.summarizer = nullptr;
  im.settings.pool = nullptr;
  im.settings.catalog.reset();
  im.settings.kb_exists = nullptr;
}

}  // namespace ragtor::http
