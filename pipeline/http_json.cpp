#include "pipeline/http_json.hpp"

#include <chrono>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "protocol/errc.hpp"

namespace ragtor {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct url_parts {
  std::string host, port = "80", target = "/";
};

std::optional<url_parts> split_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (!url.starts_with(scheme))
    return std::nullopt;
  url.remove_prefix(scheme.size());
  url_parts u;
  auto slash = url.find('/');
  auto authority = url.substr(0, slash);
  if (slash != std::string_view::npos)
    u.target = std::string{url.substr(slash)};
  auto colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    u.host = std::string{authority.substr(0, colon)};
    u.port = std::string{authority.substr(colon + 1)};
  } else {
    u.host = std::string{authority};
  }
  if (u.host.empty() || u.port.empty())
    return std::nullopt;
  return u;
}

}  // namespace

caf::expected<std::string> post_json(std::string_view url, std::string_view body,
                                     int32_t timeout_ms, size_t max_response_bytes) {
  auto u = split_url(url);
  if (!u)
    return make_error(errc::invalid_request, "not an http:// URL: " + std::string{url});
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  tcp::resolver resolver{ioc};
  beast::flat_buffer buffer;
  http::request<http::string_body> req{http::verb::post, u->target, 11};
  req.set(http::field::host, u->host);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "ragtor");
  req.body() = std::string{body};
  req.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_response_bytes);
  beast::error_code failure;
  std::string stage = "resolve";
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  resolver.async_resolve(u->host, u->port, [&](beast::error_code ec, tcp::resolver::results_type r) {
    if (ec)
      return void(failure = ec);
    stage = "connect";
    stream.async_connect(r, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec)
        return void(failure = ec);
      stage = "write";
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec)
          return void(failure = ec);
        stage = "read";
        http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) {
          if (ec)
            failure = ec;
        });
      });
    });
  });
  ioc.run();
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (failure == beast::error::timeout)
    return make_error(errc::timeout, std::string{url} + ": no answer within "
                                         + std::to_string(timeout_ms) + " ms (" + stage + ")");
  if (failure)
    return make_error(errc::unavailable,
                      std::string{url} + ": " + stage + " failed: " + failure.message());
  auto& res = parser.get();
  auto status = res.result_int();
  if (status < 200 || status >= 300)
    return make_error(errc::unavailable,
                      std::string{url} + " answered HTTP " + std::to_string(status));
  return std::move(res.body());
}

}  // namespace ragtor
