#include "tests/support/http_client.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ragtor::test {

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

int millis_left(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
}

// Waits for `events` on `fd`; the events that occurred, 0 on timeout.
short wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, millis_left(deadline));
    if (n > 0)
      return p.revents;
    if (n == 0)
      return 0;
    if (errno != EINTR)
      throw http_error{std::string{"poll: "} + std::strerror(errno)};
  }
}

int connect_loopback(uint16_t port, clock_type::time_point deadline) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    throw http_error{std::string{"socket: "} + std::strerror(errno)};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      auto msg =
          std::string{"connect to port "} + std::to_string(port) + ": " + std::strerror(errno);
      ::close(fd);
      throw http_error{msg};
    }
    if (!wait_for(fd, POLLOUT, deadline)) {
      ::close(fd);
      throw http_error{"connect to port " + std::to_string(port) + ": timed out"};
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      ::close(fd);
      throw http_error{"connect to port " + std::to_string(port) + ": " + std::strerror(err)};
    }
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void send_all(int fd, std::string_view data, clock_type::time_point deadline) {
  while (!data.empty()) {
    auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A server that rejects a large body early answers before reading it
      // all; once a response is readable, stop sending and read it.
      auto ready = wait_for(fd, POLLOUT | POLLIN, deadline);
      if (ready == 0)
        throw http_error{"send: timed out"};
      if ((ready & POLLIN) != 0)
        return;
      continue;
    }
    // The server may answer early (413) and close while we still send; the
    // response is what matters, so stop sending and go read it.
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return;
    throw http_error{std::string{"send: "} + std::strerror(errno)};
  }
}

std::string build_request(uint16_t port, std::string_view method, std::string_view path,
                          std::string_view body, const header_list& headers) {
  std::string req;
  req.append(method).append(" ").append(path).append(" HTTP/1.1\r\n");
  req.append("Host: 127.0.0.1:").append(std::to_string(port)).append("\r\n");
  req.append("Connection: close\r\n");
  bool has_type = false;
  for (const auto& [name, value] : headers) {
    has_type = has_type || lower(name) == "content-type";
    req.append(name).append(": ").append(value).append("\r\n");
  }
  if (!body.empty() && !has_type)
    req.append("Content-Type: application/json\r\n");
  if (!body.empty() || method == "POST" || method == "PUT")
    req.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  req.append("\r\n").append(body);
  return req;
}

}  // namespace

std::string http_response::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string{} : it->second;
}

sse_stream::sse_stream(sse_stream&& other) noexcept {
  *this = std::move(other);
}

sse_stream& sse_stream::operator=(sse_stream&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    status_ = other.status_;
    headers_ = std::move(other.headers_);
    chunked_ = other.chunked_;
    content_length_ = other.content_length_;
    body_seen_ = other.body_seen_;
    raw_ = std::move(other.raw_);
    body_ = std::move(other.body_);
    chunk_left_ = other.chunk_left_;
    chunk_state_ = other.chunk_state_;
    eof_ = other.eof_;
    ended_ = other.ended_;
    timed_out_ = other.timed_out_;
    pending_ = std::move(other.pending_);
    pending_has_data_ = other.pending_has_data_;
  }
  return *this;
}

sse_stream::~sse_stream() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string sse_stream::header(std::string_view name) const {
  auto it = headers_.find(lower(name));
  return it == headers_.end() ? std::string{} : it->second;
}

sse_stream sse_stream::send_raw(uint16_t port, std::string_view raw,
                                std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  sse_stream s;
  s.fd_ = connect_loopback(port, deadline);
  send_all(s.fd_, raw, deadline);
  s.read_head(deadline);
  return s;
}

bool sse_stream::fill(clock_type::time_point deadline) {
  if (eof_ || fd_ < 0)
    return false;
  for (;;) {
    char buf[16384];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      raw_.append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd_, POLLIN, deadline))
        return false;
      continue;
    }
    // A reset ends the body like a close does; callers see ended().
    eof_ = true;
    return false;
  }
}

void sse_stream::read_head(clock_type::time_point deadline) {
  size_t end;
  for (;;) {
    end = raw_.find("\r\n\r\n");
    if (end != std::string::npos) {
      // Skip interim 1xx responses.
      if (raw_.size() > 9 && raw_.compare(0, 5, "HTTP/") == 0 && raw_[9] == '1') {
        raw_.erase(0, end + 4);
        continue;
      }
      break;
    }
    if (!fill(deadline))
      throw http_error{eof_ ? "connection closed before the response headers"
                            : "timed out waiting for the response headers"};
  }
  std::string_view head{raw_.data(), end};
  auto line_end = head.find("\r\n");
  auto status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0)
    throw http_error{"bad status line: " + std::string{status_line}};
  status_ = std::stoi(std::string{status_line.substr(9, 3)});
  auto rest = line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
  while (!rest.empty()) {
    auto eol = rest.find("\r\n");
    auto line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 2);
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      throw http_error{"bad header line: " + std::string{line}};
    auto name = lower(trim(line.substr(0, colon)));
    auto value = std::string{trim(line.substr(colon + 1))};
    auto [it, fresh] = headers_.emplace(name, value);
    if (!fresh)
      it->second.append(", ").append(value);
  }
  raw_.erase(0, end + 4);
  chunked_ = lower(header("transfer-encoding")).find("chunked") != std::string::npos;
  if (!chunked_ && headers_.count("content-length"))
    content_length_ = std::stoull(header("content-length"));
  if (content_length_ && *content_length_ == 0)
    ended_ = true;
}

void sse_stream::decode() {
  if (ended_)
    return;
  if (!chunked_) {
    auto take = raw_.size();
    if (content_length_)
      take = std::min(take, *content_length_ - body_seen_);
    body_.append(raw_, 0, take);
    raw_.erase(0, take);
    body_seen_ += take;
    if ((content_length_ && body_seen_ == *content_length_) || eof_)
      ended_ = true;
    return;
  }
  for (;;) {
    switch (chunk_state_) {
      case chunk_state::size_line: {
        auto eol = raw_.find("\r\n");
        if (eol == std::string::npos)
          goto need_more;
        auto size_text = raw_.substr(0, std::min(eol, raw_.find(';')));
        size_t size = 0;
        try {
          size = std::stoull(size_text, nullptr, 16);
        } catch (const std::exception&) {
          throw http_error{"bad chunk size line: " + raw_.substr(0, eol)};
        }
        raw_.erase(0, eol + 2);
        chunk_left_ = size;
        chunk_state_ = size == 0 ? chunk_state::trailers : chunk_state::data;
        break;
      }
      case chunk_state::data: {
        auto take = std::min(chunk_left_, raw_.size());
        body_.append(raw_, 0, take);
        raw_.erase(0, take);
        chunk_left_ -= take;
        if (chunk_left_ > 0)
          goto need_more;
        chunk_state_ = chunk_state::data_crlf;
        break;
      }
      case chunk_state::data_crlf:
        if (raw_.size() < 2)
          goto need_more;
        if (raw_.compare(0, 2, "\r\n") != 0)
          throw http_error{"chunk data not followed by CRLF"};
        raw_.erase(0, 2);
        chunk_state_ = chunk_state::size_line;
        break;
      case chunk_state::trailers: {
        auto eol = raw_.find("\r\n");
        if (eol == std::string::npos)
          goto need_more;
        raw_.erase(0, eol + 2);
        if (eol == 0) {
          chunk_state_ = chunk_state::finished;
          ended_ = true;
          return;
        }
        break;
      }
      case chunk_state::finished:
        ended_ = true;
        return;
    }
  }
need_more:
  if (eof_)
    ended_ = true;  // cut off mid-body
}

std::optional<sse_event> sse_stream::parse_event() {
  for (;;) {
    auto eol = body_.find('\n');
    if (eol == std::string::npos)
      return std::nullopt;
    std::string line = body_.substr(0, eol);
    body_.erase(0, eol + 1);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty()) {
      if (!pending_has_data_ && pending_.id.empty())
        continue;
      sse_event ev = std::move(pending_);
      pending_ = {};
      pending_has_data_ = false;
      return ev;
    }
    if (line.front() == ':') {
      sse_event comment;
      comment.is_comment = true;
      comment.data = line.substr(line.size() > 1 && line[1] == ' ' ? 2 : 1);
      return comment;
    }
    auto colon = line.find(':');
    std::string field = line.substr(0, colon);
    std::string value;
    if (colon != std::string::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ')
        value.erase(0, 1);
    }
    if (field == "data") {
      if (pending_has_data_)
        pending_.data.push_back('\n');
      pending_.data += value;
      pending_has_data_ = true;
    } else if (field == "id") {
      pending_.id = value;
    }
    // `event:` and `retry:` are not part of the ragtor contract; ignored.
  }
}

std::optional<sse_event> sse_stream::next_event(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  timed_out_ = false;
  for (;;) {
    decode();
    if (auto ev = parse_event())
      return ev;
    if (ended_)
      return std::nullopt;
    if (!fill(deadline) && !eof_) {
      timed_out_ = true;
      return std::nullopt;
    }
  }
}

std::string sse_stream::read_body(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    decode();
    if (ended_)
      return std::exchange(body_, {});
    if (!fill(deadline) && !eof_)
      throw http_error{"timed out reading the response body"};
  }
}

void sse_stream::close() {
  if (fd_ < 0)
    return;
  ::close(fd_);
  fd_ = -1;
  eof_ = true;
  ended_ = true;
}

void sse_stream::reset() {
  if (fd_ < 0)
    return;
  linger lg{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close();
}

http_response request(uint16_t port, std::string_view method, std::string_view path,
                      std::string_view body, const header_list& headers,
                      std::chrono::milliseconds timeout) {
  return request_raw(port, build_request(port, method, path, body, headers), timeout);
}

http_response request_raw(uint16_t port, std::string_view raw, std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  auto s = sse_stream::send_raw(port, raw, timeout);
  http_response res;
  res.status = s.status();
  res.headers = s.headers();
  res.body = s.read_body(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(deadline - clock_type::now(), clock_type::duration::zero())));
  return res;
}

sse_stream open_sse(uint16_t port, std::string_view path, std::string_view json_body,
                    std::chrono::milliseconds timeout) {
  return sse_stream::send_raw(
      port, build_request(port, "POST", path, json_body, {{"Accept", "text/event-stream"}}),
      timeout);
}

sse_stream open_sse_get(uint16_t port, std::string_view path, const header_list& headers,
                        std::chrono::milliseconds timeout) {
  auto all = headers;
  all.emplace_back("Accept", "text/event-stream");
  return sse_stream::send_raw(port, build_request(port, "GET", path, {}, all), timeout);
}

}  // namespace ragtor::test
