// An HTTP/1.1 client for OpenAI-compatible servers (vLLM, llama.cpp
// server, hosted APIs): streaming and non-streaming chat completions,
// embeddings and reranking (/rerank) over http or https (OpenSSL, SNI, peer verification), with a
// keep-alive connection pool. It owns its I/O thread and never blocks the
// caller: results arrive through callbacks on that thread, so they must be
// cheap (ragtor forwards them as actor messages).
//
// Timeouts: connect (TCP + TLS), first token (request sent -> first
// content delta, or the whole response for non-streaming calls), idle
// (silence while streaming) and total. Retries with exponential backoff and
// full jitter (Retry-After honoured) happen only before the first delta
// was delivered — connection failures, timeouts, 429 and 5xx — so an
// answer is never silently duplicated. cancel() closes the socket at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/chat_message.hpp"
#include "llm/openai_wire.hpp"

namespace ragtor::llm {

struct completion {
  std::string text;
  std::string finish_reason;
  usage tokens;
  std::vector<tool_call> tool_calls;
};

enum class failure {
  connect,  // DNS, TCP or TLS failed
  timeout_connect,
  timeout_first_token,
  timeout_idle,
  timeout_total,
  http_status,  // non-2xx
  protocol,     // malformed response or stream
  cancelled,
  overloaded,
};

std::string_view to_string(failure f);

struct llm_error {
  failure kind = failure::protocol;
  int http_status = 0;
  std::string message;
  bool after_first_token = false;
  int attempts = 1;
};

struct endpoint_config {
  std::string base_url;  // "http://127.0.0.1:8000/v1", "https://api.example.com/v1"
  std::string api_key;   // "Authorization: Bearer ..." when non-empty
  std::string model;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds first_token_timeout{60000};
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds total_timeout{300000};
  int max_retries = 2;
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_max{5000};
  size_t max_idle_connections = 16;
  bool verify_tls = true;
  std::string ca_file;  // extra trusted CA certificates (PEM), e.g. a private CA
  // Called on the client's I/O thread each time a connect finds no file
  // descriptor free (the open-file limit reached) and waits for one, with
  // how long that connect has waited so far; ragtor logs it.
  std::function<void(std::chrono::milliseconds waited)> on_descriptor_wait;
};

struct stream_callbacks {
  std::function<void(std::string_view delta)> on_delta;
  std::function<void(completion)> on_done;  // exactly one of on_done / on_error
  std::function<void(llm_error)> on_error;
};

class call_handle {
public:
  virtual ~call_handle() = default;
  // Thread-safe. Closes the upstream connection now; on_error(cancelled)
  // follows unless the call already finished.
  virtual void cancel() = 0;
};

using chat_result = std::variant<completion, llm_error>;
using embed_result = std::variant<std::vector<std::vector<float>>, llm_error>;
using rerank_result = std::variant<std::vector<rerank_hit>, llm_error>;

class openai_client {
public:
  // Fails (std::invalid_argument) on a malformed base_url.
  explicit openai_client(endpoint_config cfg);
  ~openai_client();  // cancels every call in flight and joins the I/O thread
  openai_client(const openai_client&) = delete;
  openai_client& operator=(const openai_client&) = delete;

  // A `request_id` (ragtor's turn) goes with the request as its
  // X-Request-Id header, so that the model server's logs (vLLM's, a
  // gateway's) and a bench can tell which turn a call served; "" = none.
  std::shared_ptr<call_handle> stream_chat(chat_params p, stream_callbacks cb,
                                           std::string request_id = {});
  // The same with its request body already built (build_chat_body with this
  // client's model, streamed), e.g. by the caller's thread. On a pooled
  // plain-HTTP connection the caller's thread also writes the request (one
  // non-blocking send; the I/O thread writes any rest), so the model does
  // not wait for the I/O thread to wake.
  std::shared_ptr<call_handle> stream_chat_body(std::string body, stream_callbacks cb,
                                                std::string request_id = {});
  std::shared_ptr<call_handle> chat(chat_params p, std::function<void(chat_result)> cb);
  std::shared_ptr<call_handle> embed(std::vector<std::string> inputs,
                                     std::function<void(embed_result)> cb);
  // POST {base_url}/rerank: the documents' relevance to `query`, best first.
  std::shared_ptr<call_handle> rerank(std::string query, std::vector<std::string> documents,
                                      std::function<void(rerank_result)> cb);
  // Blocking; for CLI code only (never from an I/O or actor thread).
  embed_result embed_sync(std::vector<std::string> inputs);

  const endpoint_config& config() const;

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

}  // namespace ragtor::llm
