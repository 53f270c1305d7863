#include "http/server.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"

#include <pthread.h>

#include <array>
#include <atomic>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_system.hpp>

#include "http/auth.hpp"
#include "http/caf_asio.hpp"
#include "http/connection_io.hpp"
#include "http/handler_context.hpp"
#include "http/heap_sampler.hpp"
#include "protocol/log_throttle.hpp"
#include "http/handlers.hpp"
#include "http/request_target.hpp"
#include "http/routes.hpp"
#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/kb_json.hpp"

namespace ragtor::http {

namespace {
const log::component lg{"http"};
}  // namespace

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

// The Beast stream a handler's reply_json() writes to.
struct connection_io_beast : connection_io {
  beast::tcp_stream& stream;
  std::chrono::seconds reply_timeout;  // the write deadline of a JSON reply
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

// ragtor_http_requests_total{route, code}.
void count_request(std::string_view route, unsigned status) {
  std::string key{route};
  key += ' ';
  key += std::to_string(status);
  metrics::global().http_requests.with(key).inc();
}

// Writes a whole response within `deadline` (a client that does not read
// is cut off then).
net::awaitable<void> write_response(beast::tcp_stream& stream, response_t res,
                                    std::chrono::seconds deadline) {
  stream.expires_after(deadline);
  co_await bhttp::async_write(stream, res, net::use_awaitable);
  stream.expires_never();
}

net::awaitable<void> write_error(beast::tcp_stream& stream, unsigned status, std::string_view code,
                                 std::string_view message, bool keep_alive,
                                 std::chrono::seconds deadline) {
  co_await write_response(stream, json_response(status, error_body(code, message, ""), keep_alive),
                          deadline);
}

// Why a request was refused before its handler ran.
struct auth_result {
  unsigned status = 0;  // 0: allowed
  std::string code;
  std::string message;
  int64_t retry_after = 0;  // seconds, for 429
  std::shared_ptr<key_entry> key;  // the request's API key, if it used one
  bool denied() const { return status != 0; }
};

auth_result deny(unsigned status, std::string code, std::string message) {
  auth_result a;
  a.status = status;
  a.code = std::move(code);
  a.message = std::move(message);
  return a;
}

std::string_view to_string_view(beast::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace

net::awaitable<void> reply_json(exchange& ex, unsigned status, std::string body) {
  auto& io = static_cast<connection_io_beast&>(ex.io);
  ex.status = status;
  co_await write_response(io.stream, json_response(status, std::move(body), ex.keep_alive),
                          io.reply_timeout);
}

net::awaitable<void> reply_text(exchange& ex, unsigned status, std::string_view content_type,
                                std::string body) {
  auto& io = static_cast<connection_io_beast&>(ex.io);
  ex.status = status;
  auto res = json_response(status, std::move(body), ex.keep_alive);
  res.set(bhttp::field::content_type, beast::string_view{content_type.data(), content_type.size()});
  res.set(bhttp::field::cache_control, "no-store");
  co_await write_response(io.stream, std::move(res), io.reply_timeout);
}

struct server::impl : handler_context, std::enable_shared_from_this<server::impl> {
  router routes{api_routes()};
  std::atomic<bool> accepting{true};
  std::atomic<size_t> connections{0};  // open connections (server.max_connections)
  std::atomic<size_t> turns{0};        // chat turns being served (server.max_streams)
  std::atomic<auth_clock::rep> last_miss_load{0};  // when an unknown key last caused a reload
  log_throttle accept_log, refuse_log, turn_log, cut_log;

  // One io_context per I/O thread (server.io_threads): a connection lives
  // on one of them, so its handlers never run at once without a strand
  // (whose lock and executor reference counts were paid on every
  // completion). The first also runs the acceptor and the key refresh.
  // Declared after everything their handlers touch: they are destroyed
  // with them.
  std::vector<std::unique_ptr<net::io_context>> iocs;
  size_t next_ioc = 0;  // the acceptor's thread only
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;

  net::io_context& main_ioc() { return *iocs.front(); }

  impl(caf::actor_system& s, server_settings st, session_manager_actor sm, store_actor sa)
      : handler_context{s, std::move(st), std::move(sm), std::move(sa), {}, nullptr,
                        spawn_heap_sampler(s)} {
    for (int i = 0; i < std::max(1, settings.io_threads); ++i)
      iocs.push_back(std::make_unique<net::io_context>(1));
    if (settings.api_keys)
      keys = std::make_shared<key_cache>();
  }

  // Loads the API keys from the store (through the store actor: no I/O
  // thread waits on the database).
  net::awaitable<void> refresh_keys() {
    auto r = co_await async_request<std::vector<api_key_record>>(
        sys, store, std::chrono::seconds(10), atom::key_list_v);
    if (r)
      keys->replace(*r, auth_clock::now());
    else
      lg->warn("auth: cannot load API keys: {}", error_message(r.error()));
  }

  // With API keys: loads them before the first connection is accepted,
  // then every settings.key_refresh (revocations made on other nodes or
  // with the CLI take effect within that time).
  net::awaitable<void> start_serving() {
    auto self = shared_from_this();
    if (!keys) {
      co_await accept_loop();
      co_return;
    }
    co_await refresh_keys();
    net::co_spawn(main_ioc(), accept_loop(), net::detached);
    net::steady_timer timer{main_ioc()};
    while (accepting) {
      timer.expires_after(settings.key_refresh);
      boost::system::error_code ec;
      co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
      if (ec || !accepting)
        break;
      co_await refresh_keys();
    }
  }

  // The key `credential` names; on a miss the keys are reloaded first (at
  // most once per second), so a key created elsewhere works at once.
  net::awaitable<std::shared_ptr<key_entry>> lookup_key(std::string_view credential) {
    auto key = keys->find(credential);
    if (key)
      co_return key;
    auto now = auth_clock::now().time_since_epoch().count();
    auto last = last_miss_load.load();
    if (now - last >= auth_clock::duration{std::chrono::seconds(1)}.count()
        && last_miss_load.compare_exchange_strong(last, now)) {
      std::string copy{credential};  // the header may not outlive a suspension
      co_await refresh_keys();
      key = keys->find(copy);
    }
    co_return key;
  }

  // Who may call `r` (docs/security.md): the route's scope, checked
  // against the request's API key (or the admin token), then the key's
  // rate limit. Runs before the body is read.
  net::awaitable<auth_result> authenticate(const request_t& head, const route& r) {
    if (r.needs == scope::none)
      co_return auth_result{};
    // Copied: the parser's header is not touched across the suspension,
    // but the credential must survive it.
    std::string credential{credential_of(to_string_view(head[bhttp::field::authorization]),
                                         to_string_view(head["X-API-Key"]))};
    if (r.needs == scope::admin) {
      if (!settings.admin_enabled)
        co_return deny(403, "forbidden", "the admin API is disabled ([admin] enabled = false)");
      if (!settings.admin_token.empty() && secret_equals(credential, settings.admin_token))
        co_return auth_result{};
      if (!keys) {
        if (settings.admin_token.empty() && is_loopback_host(settings.host))
          co_return auth_result{};
        if (settings.admin_token.empty())
          co_return deny(403, "forbidden",
                         "the admin API needs [admin] token on a non-loopback address");
        co_return deny(401, "unauthorized", "missing or wrong admin token");
      }
    } else if (!keys) {
      co_return auth_result{};
    }
    if (credential.empty())
      co_return deny(401, "unauthorized",
                     "an API key is required (Authorization: Bearer <key> or X-API-Key)");
    auto key = co_await lookup_key(credential);
    if (!key)
      co_return deny(401, "unauthorized", "invalid or revoked API key");
    if (!key->scopes.has(r.needs))
      co_return deny(403, "forbidden",
                     "this API key lacks the \"" + std::string{to_string(r.needs)} + "\" scope");
    if (auto wait = key->bucket.take(key->record.rate, key->record.burst, auth_clock::now())) {
      auto a = deny(429, "rate_limited", "too many requests for this API key");
      a.retry_after = wait;
      co_return a;
    }
    auth_result ok;
    ok.key = std::move(key);
    co_return ok;
  }

  net::awaitable<void> write_denied(beast::tcp_stream& stream, const auth_result& a,
                                    bool keep_alive, std::string_view route) {
    count_request(route, a.status);
    auto res = json_response(a.status, error_body(a.code, a.message, ""), keep_alive);
    if (a.status == 401)
      res.set(bhttp::field::www_authenticate, "Bearer");
    if (a.retry_after > 0)
      res.set(bhttp::field::retry_after, std::to_string(a.retry_after));
    co_await write_response(stream, std::move(res), settings.reply_timeout);
  }

  // A connection above server.max_connections: a short 503 and close.
  static net::awaitable<void> refuse(tcp::socket sock) {
    beast::tcp_stream stream{std::move(sock)};
    static constexpr std::string_view reply =
        "HTTP/1.1 503 Service Unavailable\r\nServer: ragtor\r\nRetry-After: 1\r\n"
        "Content-Type: application/json\r\nConnection: close\r\nContent-Length: 82\r\n\r\n"
        "{\"error\":{\"code\":\"overloaded\",\"message\":\"too many open connections; retry later\"}}";
    boost::system::error_code ec;
    stream.expires_after(std::chrono::seconds(1));
    co_await net::async_write(stream, net::buffer(reply.data(), reply.size()),
                              net::redirect_error(net::use_awaitable, ec));
    // Read what the client sent (up to 1 s, 64 KiB) so closing does not
    // reset the connection before it read the answer.
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 4096> scratch;
    for (size_t total = 0; !ec && total < (64u << 10);) {
      total += co_await stream.async_read_some(net::buffer(scratch),
                                               net::redirect_error(net::use_awaitable, ec));
    }
    stream.socket().close(ec);
  }

  net::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    net::steady_timer backoff{main_ioc()};
    while (accepting) {
      boost::system::error_code ec;
      auto& home = *iocs[next_ioc++ % iocs.size()];
      auto sock = co_await acceptor->async_accept(home.get_executor(),
                                                  net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        if (!accepting || ec == net::error::operation_aborted)
          break;
        // Out of file descriptors (or another failure): wait instead of
        // spinning on a listen socket that stays readable, and say so at
        // most once per second.
        bool no_fds = ec == boost::system::errc::too_many_files_open
                      || ec == boost::system::errc::too_many_files_open_in_system;
        if (accept_log.allow())
          lg->warn("http: accept failed: {} ({} connections open); backing off",
                       ec.message(), connections.load());
        backoff.expires_after(std::chrono::milliseconds(no_fds ? 100 : 10));
        co_await backoff.async_wait(net::redirect_error(net::use_awaitable, ec));
        continue;
      }
      auto max = settings.max_connections;
      if (max > 0 && connections.load() >= max) {
        if (refuse_log.allow())
          lg->warn("http: refusing connections: {} open (server.max_connections)", max);
        auto ex = sock.get_executor();
        net::co_spawn(ex, refuse(std::move(sock)), net::detached);
        continue;
      }
      sock.set_option(tcp::no_delay{true}, ec);
      auto ex = sock.get_executor();
      ++connections;
      net::co_spawn(ex, connection(std::move(sock)), net::detached);
    }
  }

  net::awaitable<void> connection(tcp::socket sock) {
    auto self = shared_from_this();
    struct counted {
      std::atomic<size_t>& n;
      ~counted() { --n; }
    } counted_connection{connections};
    beast::tcp_stream stream{std::move(sock)};
    beast::flat_buffer buffer;
    bool cut = false;  // a reply outlived its write deadline
    try {
      for (;;) {
        bhttp::request_parser<bhttp::string_body> parser;
        // Beast checks Content-Length against the limit while parsing the
        // header, before the target is known: parse with the largest limit,
        // then apply the route's own.
        parser.body_limit(std::max(settings.limits.max_body_bytes, settings.max_ingest_bytes));
        parser.header_limit(static_cast<std::uint32_t>(
            std::min<size_t>(settings.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
        boost::system::error_code ec;
        if (buffer.size() == 0) {
          // Keep-alive: wait up to the idle timeout for the next request...
          stream.expires_after(settings.idle_timeout);
          auto n = co_await stream.async_read_some(buffer.prepare(4096),
                                                   net::redirect_error(net::use_awaitable, ec));
          if (ec)
            break;
          buffer.commit(n);
        }
        // ...then the whole header within the header deadline.
        stream.expires_after(settings.header_timeout);
        co_await bhttp::async_read_header(stream, buffer, parser,
                                          net::redirect_error(net::use_awaitable, ec));
        if (ec == bhttp::error::header_limit) {
          co_await write_error(stream, 431, "header_too_large",
                               "request header exceeds " + std::to_string(settings.max_header_bytes)
                                   + " bytes",
                               false, settings.reply_timeout);
          break;
        }
        if (!ec && parser.get().target().size() > settings.max_url_bytes) {
          co_await write_error(stream, 414, "uri_too_long",
                               "request target exceeds " + std::to_string(settings.max_url_bytes)
                                   + " bytes",
                               false, settings.reply_timeout);
          break;
        }
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
        // Who may call the route is settled before its body is read.
        auth_result auth;
        if (!ec && match.matched) {
          stream.expires_never();
          auth = co_await authenticate(parser.get(), *match.matched);
          if (auth.denied() && match.matched->body == body_kind::documents) {
            co_await write_denied(stream, auth, false, match.matched->name);
            co_await drain(stream);
            break;
          }
        }
        stream.expires_after(settings.body_timeout);
        if (!ec && !auth.denied()
            && beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
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
                               false, settings.reply_timeout);
          co_await drain(stream);
          break;
        }
        if (ec) {
          if (ec != bhttp::error::end_of_stream && ec != net::error::eof
              && ec != beast::error::timeout && ec != net::error::operation_aborted)
            co_await write_error(stream, 400, "invalid_request", "malformed HTTP request", false,
                                 settings.reply_timeout);
          break;
        }
        stream.expires_never();
        if (auth.denied()) {
          bool keep = parser.get().keep_alive();
          co_await write_denied(stream, auth, keep, match.matched->name);
          if (!keep)
            break;
          continue;
        }
        if (streamed) {
          // A body left unread (a bad line stopped the parse) ends the
          // connection after the answer.
          bool keep =
              co_await dispatch(stream, streamed_req, target, match, &*streamed, auth.key.get());
          if (body_left) {
            co_await drain(stream);
            break;
          }
          if (!keep)
            break;
          continue;
        }
        auto req = parser.release();
        // Nothing pipelined behind the request: give the read buffer back
        // while the reply runs (a chat stream may last minutes; the next
        // request on the connection takes a new one).
        if (buffer.size() == 0)
          buffer.shrink_to_fit();
        bool keep = co_await dispatch(stream, req, target, match, nullptr, auth.key.get());
        if (!keep)
          break;
      }
    } catch (const boost::system::system_error& e) {
      // Reads time out through error codes; a thrown timeout is a reply
      // the client did not take within its write deadline.
      cut = e.code() == beast::error::timeout;
      lg->debug("http: connection ended: {}", e.what());
    } catch (const std::exception& e) {
      lg->debug("http: connection ended: {}", e.what());
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
    // Logged once the descriptor is closed (at most once a second).
    if (cut && cut_log.allow())
      lg->info("http: connection cut: the client did not take a reply within its write deadline");
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
                                ndjson_documents* streamed, const key_entry* key) {
    bool keep = req.keep_alive();
    auto deadline = settings.reply_timeout;
    if (!target.valid) {
      co_await write_error(stream, 400, "invalid_request", "malformed query string", keep,
                           deadline);
      co_return keep;
    }
    if (!match.matched)
      count_request("unmatched", match.allow.empty() ? 404 : 405);
    if (!match.matched && !match.allow.empty()) {
      auto res = json_response(
          405, error_body("method_not_allowed", "method not allowed for this path", ""), keep);
      res.set(bhttp::field::allow, match.allow);
      co_await write_response(stream, std::move(res), deadline);
      co_return keep;
    }
    if (!match.matched) {
      co_await write_error(stream, 404, "not_found", "no such endpoint: " + target.path, keep,
                           deadline);
      co_return keep;
    }
    const route& r = *match.matched;
    // A key limited to some users or KBs: what the request names must fit.
    if (key && (!key->record.user_prefix.empty() || !key->kbs.empty())) {
      auto q = target.query.find("user_id");
      auto subjects =
          subjects_of(r.name, match.params, q == target.query.end() ? "" : std::string_view{q->second},
                      r.body == body_kind::json ? std::string_view{req.body()} : std::string_view{});
      auto v = check_subjects(*key, r.method, r.admit == admission::turn, subjects);
      if (v.status != 0) {
        co_await write_response(
            stream, json_response(v.status, error_body(v.code, v.message, v.field), keep), deadline);
        co_return keep;
      }
    }
    // server.max_streams: a turn above the cap is refused before anything
    // is stored or streamed.
    struct turn_slot {
      std::atomic<size_t>* n = nullptr;
      ~turn_slot() {
        if (n)
          --*n;
      }
    } slot;
    if (r.admit == admission::turn && settings.max_streams > 0) {
      if (turns.fetch_add(1) >= settings.max_streams) {
        --turns;
        if (turn_log.allow())
          lg->warn("http: refusing chat turns: {} in progress (server.max_streams)",
                       settings.max_streams);
        auto res = json_response(
            503, error_body("overloaded", "too many chat streams on this node; retry later", ""),
            keep);
        res.set(bhttp::field::retry_after, "1");
        count_request(r.name, 503);
        metrics::global().turn(metrics::turn_outcome::overloaded);
        co_await write_response(stream, std::move(res), deadline);
        co_return keep;
      }
      slot.n = &turns;
    }
    connection_io_beast io{{stream.socket()}, stream, settings.reply_timeout};
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
                },
                key};
    co_await match.matched->handler(*this, ex);
    count_request(r.name, ex.status != 0 ? ex.status : 200);
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
  im.acceptor.emplace(im.main_ioc());
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
  for (auto& ioc : im.iocs) {
    im.work.push_back(net::make_work_guard(*ioc));
    // Its reactor (epoll, eventfd and timerfd descriptors) now rather than
    // at the first connection it gets: the descriptors a listening server
    // holds do not grow later.
    net::steady_timer{*ioc};
  }
  net::co_spawn(im.main_ioc(), impl_->start_serving(), net::detached);
  for (auto& ioc : im.iocs)
    im.threads.emplace_back([ioc = ioc.get()] {
      pthread_setname_np(pthread_self(), "http-io");
      ioc->run();
    });
  return port;
}

void server::stop_accepting() {
  auto& im = *impl_;
  if (!im.accepting.exchange(false))
    return;
  net::post(im.main_ioc(), [&im] {
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
  im.work.clear();
  for (auto& ioc : im.iocs)
    ioc->stop();
  for (auto& t : im.threads)
    if (t.joinable())
      t.join();
  im.threads.clear();
  // Replies to requests still waiting are no longer taken (the actor system
  // outlives the server; the io_contexts may not be destroyed before it).
  for (auto& ioc : im.iocs)
    close_caf_bridge(*ioc);
  // Coroutine frames left in the stopped io_context keep `im` alive until
  // the io_context is destroyed; drop the actor handles now so the actor
  // system can shut down (a detached actor is only released when the last
  // handle to it is gone).
  im.settings.kb_admin = nullptr;
  im.settings.summarizer = nullptr;
  im.settings.pool = nullptr;
  im.settings.catalog.reset();
  im.settings.kb_exists = nullptr;
  caf::anon_send_exit(im.heap, caf::exit_reason::user_shutdown);
  im.heap = nullptr;
}

}  // namespace ragtor::http
