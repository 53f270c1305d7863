// The HTTP router: a table of (method, path pattern) -> handler, matched
// without a socket so it can be unit-tested. Patterns are literal segments
// and `{name}` parameters (`/api/v1/kbs/{kb}/documents`); a parameter
// matches one non-empty segment and is percent-decoded. Beast stays out of
// this header: handlers are declared on the Beast-free handler_context.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

namespace ragtor::http {

struct handler_context;
struct exchange;

// Serves one request: reads it from the exchange and writes the answer.
using handler_fn = boost::asio::awaitable<void> (*)(handler_context&, exchange&);

// How a route's request body is read before its handler runs.
enum class body_kind {
  json,       // held whole, up to server.limits.max_body_bytes
  documents,  // up to server.max_ingest_bytes; NDJSON is parsed as it arrives
};

// What an API key must be allowed to do to call a route (docs/security.md).
// Every route names one, so no route is left unguarded by omission.
enum class scope : unsigned char {
  none,      // anyone (/healthz)
  chat,      // chat, stream, re-attach, stop, clear, feedback, own conversations and memory
  kb_read,   // list, get, search and the pipeline of knowledge bases
  kb_write,  // create knowledge bases, ingest documents
  admin,     // key administration (/admin/api/...)
};

// "chat", "kb:read", "kb:write", "admin" ("" for none).
std::string_view to_string(scope s);

// Whether the route runs a chat turn, so it counts against
// server.max_streams while it is served.
enum class admission : unsigned char { plain, turn };

struct route {
  std::string_view method;   // "GET", "POST", ...
  std::string_view pattern;  // "/api/v1/kbs/{kb}/documents"
  std::string_view name;     // what tests and logs call the handler
  scope needs = scope::admin;
  handler_fn handler = nullptr;
  body_kind body = body_kind::json;
  admission admit = admission::plain;
};

// The values of a matched pattern's `{name}` segments, decoded.
class path_params {
public:
  void add(std::string_view name, std::string value);
  // The value of `{name}`; "" when the pattern has no such parameter.
  const std::string& operator[](std::string_view name) const;
  size_t size() const { return values_.size(); }

private:
  std::vector<std::pair<std::string_view, std::string>> values_;
};

struct route_match {
  const route* matched = nullptr;  // null: no route for this method and path
  path_params params;
  // When nothing matched but the path is known: the methods it accepts
  // ("GET, PUT"), for a 405 and its Allow header. "" means 404.
  std::string allow;
};

class router {
public:
  explicit router(std::vector<route> routes);

  route_match match(std::string_view method, std::string_view path) const;

  const std::vector<route>& routes() const { return routes_; }

private:
  std::vector<route> routes_;
  std::vector<std::vector<std::string_view>> patterns_;  // per route, split at '/'
};

}  // namespace ragtor::http
