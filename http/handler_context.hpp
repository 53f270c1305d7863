// What every route handler needs: the server's actors and settings
// (handler_context, one per server) and the request being served with the
// means to answer it (exchange, one per request). Beast stays out: handlers
// answer through reply_json() and friends, which server.cpp implements on
// the connection's stream, so a handler file compiles without Beast.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <caf/fwd.hpp>

#include "http/request_target.hpp"
#include "http/router.hpp"
#include "http/server.hpp"

namespace ragtor {
class ndjson_documents;
struct request_error;
}  // namespace ragtor

namespace ragtor::http {

// Counts the chat requests being served so shutdown can wait for them.
class flight_counter {
public:
  // Holds one request in flight for its lifetime.
  class guard {
  public:
    explicit guard(flight_counter& c);
    ~guard();
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;

  private:
    flight_counter& counter_;
  };

  // Waits until nothing is in flight or `grace` passed; returns how many
  // requests are still in flight.
  size_t wait_idle(std::chrono::milliseconds grace);

private:
  std::mutex mx_;
  std::condition_variable idle_cv_;
  size_t in_flight_ = 0;
};

class key_cache;
struct key_entry;

struct handler_context {
  caf::actor_system& sys;
  server_settings settings;
  session_manager_actor sessions;
  store_actor store;
  flight_counter chats;  // chat requests in flight
  std::shared_ptr<key_cache> keys;  // the API keys; null with auth off
  status_api heap;  // http/heap_sampler.hpp, for /metrics
};

// How long a handler waits for the store and other quick actor calls.
inline constexpr std::chrono::seconds store_timeout{30};

// The connection an exchange answers on; defined where the Beast stream is.
struct connection_io;

struct exchange {
  std::string_view method;               // "GET", "POST", ...
  std::string_view body;                 // empty for a streamed NDJSON ingestion
  std::string_view content_type;         // the Content-Type header
  const request_target& target;          // path and decoded query parameters
  path_params params;                    // the route pattern's {name} values
  bool keep_alive = true;                // a handler may clear it: the connection then closes
  ndjson_documents* streamed = nullptr;  // the documents of an NDJSON ingestion, already parsed
  connection_io& io;
  // A request header's value by name ("" when absent).
  std::function<std::string_view(std::string_view)> header;
  // The API key the request was authenticated with; null with auth off
  // (or the admin token). Handlers that list things filter by its KBs.
  const key_entry* key = nullptr;
  // The status the handler answered with (set by reply_json and friends;
  // 0 = a stream it wrote itself, counted as 200).
  unsigned status = 0;
};

// Answers with `body` as application/json (keep-alive as the exchange says).
boost::asio::awaitable<void> reply_json(exchange& ex, unsigned status, std::string body);

// Answers with `body` as `content_type` (the console page, /metrics).
boost::asio::awaitable<void> reply_text(exchange& ex, unsigned status,
                                        std::string_view content_type, std::string body);
// Answers with {"error":{"code","message","field"?}}.
boost::asio::awaitable<void> reply_error(exchange& ex, unsigned status, std::string_view code,
                                         std::string_view message, std::string_view field = {});

// Answers with the error response `err` maps to (http_error_of).
boost::asio::awaitable<void> reply_caf_error(exchange& ex, const caf::error& err);

// Answers with a request parser's error.
boost::asio::awaitable<void> reply_request_error(exchange& ex, const request_error& e);

// The user_id query parameter, validated; "" after answering 400.
boost::asio::awaitable<std::string> user_param(handler_context& ctx, exchange& ex);

}  // namespace ragtor::http
