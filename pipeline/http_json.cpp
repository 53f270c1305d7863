#include "pipeline/http_json.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "llm/base_url.hpp"
#include "protocol/errc.hpp"

namespace ragtor {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Host, port and target of an http:// URL (the shared URL parser).
caf::expected<llm::base_url> parse_target(std::string_view url) {
  auto u = llm::parse_base_url(url);
  if (!u || u->tls)
    return make_error(errc::invalid_request, "not an http:// URL: " + std::string{url});
  return std::move(*u);
}

// One call. Lives on the I/O thread (a single thread: no strand needed);
// everything ends in exactly one finish().
struct call_state : http_call, std::enable_shared_from_this<call_state> {
  call_state(net::io_context& io, std::string u) : ioc(io), resolver(io), socket(io), deadline(io),
                                                   url(std::move(u)) {
  }

  void cancel() override {
    net::post(ioc, [self = shared_from_this()] {
      self->finish(make_error(errc::cancelled, self->url + ": cancelled"));
    });
  }

  void start(llm::base_url t, std::string body, int32_t timeout_ms, size_t max_bytes) {
    req = http::request<http::string_body>{http::verb::post, t.target, 11};
    req.set(http::field::host, t.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::user_agent, "ragtor");
    req.body() = std::move(body);
    req.prepare_payload();
    parser.body_limit(max_bytes);
    auto self = shared_from_this();
    deadline.expires_after(std::chrono::milliseconds(timeout_ms));
    deadline.async_wait([self, timeout_ms](beast::error_code ec) {
      if (!ec)
        self->finish(make_error(errc::timeout, self->url + ": no answer within "
                                                   + std::to_string(timeout_ms) + " ms ("
                                                   + self->stage + ")"));
    });
    resolver.async_resolve(t.host, t.port, [self](beast::error_code ec,
                                                  tcp::resolver::results_type r) {
      if (ec)
        return self->fail(ec);
      self->stage = "connect";
      net::async_connect(self->socket, r, [self](beast::error_code ec, const tcp::endpoint&) {
        if (ec)
          return self->fail(ec);
        self->stage = "write";
        http::async_write(self->socket, self->req, [self](beast::error_code ec, size_t) {
          if (ec)
            return self->fail(ec);
          self->stage = "read";
          http::async_read(self->socket, self->buffer, self->parser,
                           [self](beast::error_code ec, size_t) {
                             if (ec)
                               return self->fail(ec);
                             self->answered();
                           });
        });
      });
    });
  }

  void fail(beast::error_code ec) {
    finish(make_error(errc::unavailable, url + ": " + stage + " failed: " + ec.message()));
  }

  void answered() {
    auto& res = parser.get();
    auto status = res.result_int();
    if (status < 200 || status >= 300)
      return finish(make_error(errc::unavailable, url + " answered HTTP " + std::to_string(status)));
    finish(std::move(res.body()));
  }

  void finish(caf::expected<std::string> out) {
    if (done)
      return;
    done = true;
    deadline.cancel();
    resolver.cancel();
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    auto callback = std::move(cb);
    cb = nullptr;
    if (callback)
      callback(std::move(out));
  }

  net::io_context& ioc;
  tcp::resolver resolver;
  tcp::socket socket;
  net::steady_timer deadline;
  std::string url;
  std::string stage = "resolve";
  http::request<http::string_body> req;
  http::response_parser<http::string_body> parser;
  beast::flat_buffer buffer;
  http_json_client::callback cb;
  bool done = false;
};

}  // namespace

struct http_json_client::impl {
  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread;
  size_t max_bytes;
};

http_json_client::http_json_client(size_t max_response_bytes) : impl_(std::make_shared<impl>()) {
  impl_->max_bytes = max_response_bytes;
  impl_->thread = std::thread{[im = impl_.get()] { im->ioc.run(); }};
}

http_json_client::~http_json_client() {
  impl_->work.reset();
  impl_->ioc.stop();  // calls in flight are dropped with their sockets
  if (impl_->thread.joinable())
    impl_->thread.join();
}

std::shared_ptr<http_call> http_json_client::post(std::string_view url, std::string body,
                                                  int32_t timeout_ms, callback cb) {
  auto call = std::make_shared<call_state>(impl_->ioc, std::string{url});
  call->cb = std::move(cb);
  auto t = parse_target(url);
  net::post(impl_->ioc, [call, t = std::move(t), body = std::move(body), timeout_ms,
                         max = impl_->max_bytes]() mutable {
    if (!t)
      return call->finish(t.error());
    call->start(std::move(*t), std::move(body), timeout_ms, max);
  });
  return call;
}

}  // namespace ragtor
