// The HTTP front end (Beast, C++20 coroutines): the listener and the
// connection loop that reads requests and hands them to the route handlers
// (routes.cpp, DESIGN §5), bridged to the actor system without ever blocking
// an I/O thread on an actor. Beast stays out of this header so
// including it is cheap.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "protocol/actors.hpp"
#include "protocol/chat_request_json.hpp"

namespace ragtor {
class kb_catalog;
}

namespace ragtor::http {

struct server_settings {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0 = ephemeral
  int io_threads = 2;
  request_limits limits;
  std::chrono::seconds heartbeat{15};      // ": ping" after this much silence
  std::chrono::seconds write_timeout{5};   // a stalled client is cut off
  std::chrono::seconds idle_timeout{60};   // keep-alive connection without a request
  std::chrono::seconds turn_timeout{300};  // how long a request may wait for its turn
  int initial_credit = 16;                 // event batches in flight per stream
  bool direct_writes = true;               // [sse] direct_writes (event_pipe)
  // Whether a requested kb_prefix names a served knowledge base; requests
  // for unknown ones are refused (404) before anything is stored.
  std::function<bool(std::string_view)> kb_exists;
  // Knowledge-base API (/api/v1/kbs...): the served KBs, the actor that
  // changes them and the agent pool that searches them.
  std::shared_ptr<kb_catalog> catalog;
  kb_admin_actor kb_admin;
  summarizer_actor summarizer;  // for GET .../summary?wait_version=N
  agent_pool_actor pool;
  cluster_actor cluster;  // membership (GET /api/v1/cluster)
  admin_actor admin;      // the admin console's view (/admin/api/...)
  // Who reranks for KBs with enable_rerank, as the pipeline graph shows it
  // ("" = nobody: results keep their fused order).
  std::string reranker;
  size_t max_ingest_bytes = 64 << 20;    // body limit of POST .../documents
  size_t max_ingest_documents = 100000;  // documents per ingest request
  std::string default_agent_type = "hybrid_agent";
  int32_t default_top_k = 5;
  std::chrono::seconds ingest_timeout{600};  // how long an ingest may take

  // -- admission and deadlines ([server], docs/security.md) ------------------------
  size_t max_streams = 0;      // chat turns served at once; 0 = no cap (503 above)
  size_t max_connections = 0;  // open connections; 0 = no cap (refused above)
  std::chrono::seconds header_timeout{10};  // to read a request's header
  std::chrono::seconds body_timeout{60};    // to read a request's body
  std::chrono::seconds reply_timeout{30};   // to write a (non-SSE) response
  size_t max_header_bytes = 16 << 10;       // request line + header fields
  size_t max_url_bytes = 8 << 10;           // request target

  // -- authentication ([auth], docs/security.md) -------------------------------------
  // API keys are required on every route but /healthz (keys live in the
  // store; the server checks them against a cache refreshed every
  // key_refresh, and at once on a miss at most once per second).
  bool api_keys = false;
  // Bearer token of /admin/api/...; "" = those routes need a key with the
  // admin scope, or (auth off) a loopback listen address.
  std::string admin_token;
  bool admin_enabled = true;  // [admin] enabled
  std::chrono::milliseconds key_refresh{2000};

  // Hosts workflow tool URLs may name ([security] allowed_outbound_hosts);
  // "*" allows any. A KB naming another host is refused at creation.
  std::vector<std::string> allowed_outbound_hosts{"127.0.0.1", "::1", "localhost"};
};

class server {
public:
  server(caf::actor_system& sys, server_settings settings, session_manager_actor sessions,
         store_actor store);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds, listens and starts the I/O threads; returns the bound port.
  caf::expected<uint16_t> start();

  // Stops accepting new connections; requests in flight continue.
  void stop_accepting();

  // Waits until no chat request is in flight or `grace` passed; returns
  // the number still in flight.
  size_t wait_idle(std::chrono::milliseconds grace);

  // Closes every connection and joins the I/O threads.
  void stop();

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace ragtor::http
