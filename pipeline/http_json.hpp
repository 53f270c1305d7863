// An asynchronous HTTP/1.1 client for JSON POSTs: the guided workflow's
// HTTP JSON tools (seed 003's local tools). It owns one I/O thread shared by
// every call, so a planner waiting for a tool holds no thread; the answer
// arrives through a callback on that thread (ragtor forwards it to the
// planner as a message). Plain http:// only. One deadline covers the whole
// call: DNS, connect, sending the request and reading the answer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace ragtor {

class http_call {
public:
  virtual ~http_call() = default;
  // Thread-safe: closes the connection now. The callback then answers
  // `cancelled` unless the call had finished.
  virtual void cancel() = 0;
};

class http_json_client {
public:
  // Answers: the body of a 2xx response; errors: unavailable (DNS, connect,
  // I/O, non-2xx status: the message names it), timeout (which stage),
  // invalid_request (not an http:// URL), cancelled. Called exactly once,
  // on the client's thread: keep it cheap.
  using callback = std::function<void(caf::expected<std::string>)>;

  explicit http_json_client(size_t max_response_bytes = 1 << 20);
  ~http_json_client();  // closes every call in flight and joins the thread
  http_json_client(const http_json_client&) = delete;
  http_json_client& operator=(const http_json_client&) = delete;

  std::shared_ptr<http_call> post(std::string_view url, std::string body, int32_t timeout_ms,
                                  callback cb);

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

}  // namespace ragtor
