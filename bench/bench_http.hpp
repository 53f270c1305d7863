// Blocking HTTP for benches (one connection per call, loopback only) and a
// reader for the flat JSON counters of the fake model's /_fake/stats.
#pragma once

#include <chrono>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace {

struct reply {
  unsigned status = 0;
  std::string body;
};

reply call(uint16_t port, boost::beast::http::verb verb, const std::string& target,
           const std::string& body) {
  namespace net = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  net::io_context ioc;
  beast::tcp_stream s{ioc};
  s.expires_after(std::chrono::seconds(120));
  s.connect(net::ip::tcp::endpoint{net::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  return {res.result_int(), res.body()};
}

// The value of "key":<integer> in a flat JSON text (the fake's stats).
long counter(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::stol(json.substr(at + key.size() + 3));
}

}  // namespace
