// Runs the fake OpenAI-compatible server (tests/fixtures/fake_openai) for a
// test: a real child process on a free loopback port, scripted through its
// JSON script (see the fixture's header comment) and observed through its
// /_fake/stats counters.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tests/support/json.hpp"
#include "tests/support/ragtor_process.hpp"

namespace ragtor::test {

class fake_openai {
public:
  // With `tls`, it serves HTTPS with tests/data/tls/cert.pem (self-signed,
  // CN localhost, SAN 127.0.0.1); the stats/script helpers below speak
  // plain HTTP and so only work without `tls`.
  explicit fake_openai(const std::string& script_json = "{}", bool tls = false);
  ~fake_openai();

  uint16_t port() const { return process_->port(); }
  // "http(s)://127.0.0.1:PORT/v1", what ragtor's llm.base_url takes.
  std::string base_url() const;

  // Replaces the script (POST /_fake/script); throws on a rejected script.
  void set_script(const std::string& json);
  // Zeroes the counters and forgets the first-token times and token gaps.
  void reset_stats();
  json stats();
  // GET /_fake/first_tokens?from=N: {"count", "us": [the fake's own
  // first-token time of each streamed chat from the N-th on, in µs], "ids":
  // [each one's X-Request-Id header, "" without one]}.
  json first_tokens(size_t from = 0);
  // GET /_fake/token_gaps: {"count", "ms": [[ms, how many], ...]}, the
  // fake's own gaps between the content chunks of its streamed chats.
  json token_gaps();
  int64_t stat(std::string_view name);
  // Waits until counter `name` >= value (the fake answers GET /_fake/wait
  // when the counter changes) or `timeout` passed.
  bool wait_for_stat(std::string_view name, int64_t value,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

private:
  temp_dir dir_{"fake-openai"};
  std::unique_ptr<ragtor_process> process_;
  bool tls_ = false;
};

// The self-signed certificate the TLS fake serves (usable as a CA file).
std::string fake_openai_cert();

// Env vars that point a ragtor server at `fake` (and name a model).
env_vars model_env(const fake_openai& fake);

}  // namespace ragtor::test
