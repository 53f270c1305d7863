// A raw HTTP connection for benches that read a response as it arrives
// (SSE streams): the request is sent as given, bytes are read on demand,
// and the reader can wait for a marker or drop the connection mid-stream.
// Loopback only; blocking (one connection per bench thread).
#pragma once

#include <string>
#include <string_view>

#include <boost/asio.hpp>

namespace {

struct sse_conn {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket sock{ioc};
  std::string buf;
  size_t scanned = 0;
  bool eof = false;

  sse_conn(uint16_t port, const std::string& request) {
    namespace net = boost::asio;
    sock.connect({net::ip::make_address("127.0.0.1"), port});
    net::write(sock, net::buffer(request));
  }
  // Reads once more; false at EOF or error.
  bool read_more() {
    char chunk[8192];
    boost::system::error_code ec;
    auto n = sock.read_some(boost::asio::buffer(chunk), ec);
    if (ec) {
      eof = true;
      return false;
    }
    buf.append(chunk, n);
    return true;
  }
  // Reads until `needle` occurs `count` times after the scan mark; false at EOF.
  bool wait_for(std::string_view needle, int count = 1) {
    int seen = 0;
    for (;;) {
      for (auto at = buf.find(needle, scanned); at != std::string::npos;
           at = buf.find(needle, scanned)) {
        scanned = at + needle.size();
        if (++seen == count)
          return true;
      }
      if (!read_more())
        return false;
    }
  }
  // The status code of the response ("HTTP/1.1 200 ..."), 0 before it came.
  int status() {
    while (buf.size() < 12 && read_more()) {
    }
    return buf.size() >= 12 ? std::atoi(buf.c_str() + 9) : 0;
  }
  // The last "id: " value seen so far.
  std::string last_id() const {
    auto at = buf.rfind("\nid: ");
    if (at == std::string::npos)
      return {};
    auto end = buf.find('\n', at + 5);
    return buf.substr(at + 5, end - at - 5);
  }
};

// A request with a JSON body (Content-Length framed).
std::string http_request(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view extra_headers = {}) {
  std::string r{method};
  r += ' ';
  r += target;
  r += " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  r += extra_headers;
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  r += body;
  return r;
}

}  // namespace
