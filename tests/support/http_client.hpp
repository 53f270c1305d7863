// A small blocking HTTP/1.1 client over POSIX TCP sockets for the integration
// tests: one request per connection to 127.0.0.1, bodies framed by
// Content-Length, chunked encoding or connection close, and an incremental
// SSE reader that can drop its connection mid-stream. Every wait is a poll()
// with a deadline, so a silent server fails a test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ragtor::test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Connection failures, timeouts and unparsable responses.
class http_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

using header_list = std::vector<std::pair<std::string, std::string>>;

struct http_response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  // The value of header `name` (lower-case), or "" when absent.
  std::string header(std::string_view name) const;
};

// Sends one request (with `Connection: close`) and reads the whole response.
// A non-empty body gets `Content-Type: application/json` unless `headers`
// names another one.
http_response request(uint16_t port, std::string_view method, std::string_view path,
                      std::string_view body = {}, const header_list& headers = {},
                      std::chrono::milliseconds timeout = 30s);

// Sends `raw` bytes as they are (for requests a well-behaved client would
// never produce) and reads the response.
http_response request_raw(uint16_t port, std::string_view raw,
                          std::chrono::milliseconds timeout = 30s);

// One SSE block: a dispatched event (data lines joined by '\n', the last
// `id:` value) or a comment line such as `: ping` (text after the colon,
// leading space removed).
struct sse_event {
  std::string id;
  std::string data;
  bool is_comment = false;
};

// An open text/event-stream response read incrementally.
class sse_stream {
public:
  sse_stream() = default;
  sse_stream(sse_stream&& other) noexcept;
  sse_stream& operator=(sse_stream&& other) noexcept;
  sse_stream(const sse_stream&) = delete;
  sse_stream& operator=(const sse_stream&) = delete;
  ~sse_stream();

  // Status and lower-cased headers of the response.
  int status() const { return status_; }
  const std::map<std::string, std::string>& headers() const { return headers_; }
  std::string header(std::string_view name) const;
  bool chunked() const { return chunked_; }

  // The next event or comment; nullopt when the stream ended (see ended())
  // or nothing arrived within `timeout` (see timed_out()).
  std::optional<sse_event> next_event(std::chrono::milliseconds timeout = 30s);

  // True once the server finished the body (last chunk or connection close).
  bool ended() const { return ended_; }
  // True when the last next_event() gave up waiting.
  bool timed_out() const { return timed_out_; }

  // Drops the connection without reading further, the way a browser tab
  // goes away: the server sees EOF, and its next writes fail.
  void close();
  // Drops the connection with a TCP reset (SO_LINGER 0).
  void reset();

  // For a non-200 response: the rest of the body, read to its end.
  std::string read_body(std::chrono::milliseconds timeout = 30s);

  // Connects, sends `raw` and reads the response headers; the building
  // block of request(), request_raw() and open_sse().
  static sse_stream send_raw(uint16_t port, std::string_view raw,
                             std::chrono::milliseconds timeout);

private:
  // Reads and parses the status line and headers.
  void read_head(clock_type::time_point deadline);

  // Reads more bytes from the socket into raw_; false on EOF or timeout.
  bool fill(clock_type::time_point deadline);
  // Moves whatever is decodable from raw_ (chunked or plain) into body_.
  void decode();
  // Extracts one event from body_, if a complete one is there.
  std::optional<sse_event> parse_event();

  int fd_ = -1;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  bool chunked_ = false;
  std::optional<size_t> content_length_;  // for non-chunked bodies
  size_t body_seen_ = 0;
  std::string raw_;   // undecoded bytes after the headers
  std::string body_;  // decoded body bytes not yet parsed into events
  size_t chunk_left_ = 0;
  enum class chunk_state { size_line, data, data_crlf, trailers, finished };
  chunk_state chunk_state_ = chunk_state::size_line;
  bool eof_ = false;
  bool ended_ = false;
  bool timed_out_ = false;
  sse_event pending_;
  bool pending_has_data_ = false;
};

// POSTs `json_body` to `path` with `Accept: text/event-stream` and returns
// once the response headers arrived.
sse_stream open_sse(uint16_t port, std::string_view path, std::string_view json_body,
                    std::chrono::milliseconds timeout = 30s);

// GET `path` as an event stream (re-attaching: Last-Event-ID in `headers`).
sse_stream open_sse_get(uint16_t port, std::string_view path, const header_list& headers = {},
                        std::chrono::milliseconds timeout = 30s);

}  // namespace ragtor::test
