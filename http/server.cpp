#include "http/server.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <variant>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "http/caf_asio.hpp"
#include "http/query.hpp"
#include "pipeline/graph.hpp"
#include "protocol/api_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/kb_json.hpp"
#include "retrieval/kb_info_json.hpp"
#include "protocol/stream_events.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/kb_store.hpp"

namespace ragtor::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using namespace net::experimental::awaitable_operators;

namespace {

using event_batch = std::vector<stream_event>;
using event_channel =
    net::experimental::concurrent_channel<void(boost::system::error_code, event_batch)>;
using request_t = bhttp::request<bhttp::string_body>;

constexpr size_t channel_capacity = 256;  // > initial credit: try_send never fails on "full"

std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::string id = "req_";
  for (int i = 0; i < 2; ++i) {
    auto x = rng();
    for (int j = 0; j < 16; ++j, x >>= 4)
      id += hex[x & 0xf];
  }
  return id;
}

// Per-request bridge actor: hands event batches from the stream actor to the
// connection's coroutine through a thread-safe channel. If the stream dies
// without a `done` (e.g. a retry joined a turn that just ended), it ends
// the client's stream itself with error + done.
event_sink_actor spawn_sink(caf::actor_system& sys, std::shared_ptr<event_channel> ch,
                            stream_actor stream) {
  return sys.spawn([ch, stream](event_sink_actor::pointer self) -> event_sink_actor::behavior_type {
    self->monitor(stream);
    self->set_down_handler([=](caf::down_msg&) {
      done_content partial;
      partial.partial = true;
      event_batch tail{
          make_error_event("unavailable", "the turn ended before it could be followed"),
          make_done_event(partial)};
      ch->try_send(boost::system::error_code{}, std::move(tail));
      self->quit();
    });
    return {
        [=](atom::events, event_batch& batch) {
          bool last = !batch.empty() && batch.back().kind == event_kind::done;
          // try_send fails only if the connection closed the channel.
          if (!ch->try_send(boost::system::error_code{}, std::move(batch)) || last)
            self->quit();
        },
    };
  });
}

unsigned status_of_code(std::string_view code) {
  for (uint8_t i = 0; i <= static_cast<uint8_t>(errc::internal); ++i) {
    auto e = http_error_of(static_cast<errc>(i));
    if (e.code == code)
      return e.status;
  }
  if (code == "slow_client")
    return 499;
  return 500;
}

}  // namespace

struct server::impl : std::enable_shared_from_this<server::impl> {
  caf::actor_system& sys;
  server_settings settings;
  session_manager_actor sessions;
  store_actor store;
  // Declared before ioc: handlers destroyed with ioc still touch them.
  std::mutex mx;
  std::condition_variable idle_cv;
  size_t in_flight = 0;  // chat requests being served
  std::atomic<bool> accepting{true};

  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;

  impl(caf::actor_system& s, server_settings st, session_manager_actor sm, store_actor sa)
      : sys(s),
        settings(std::move(st)),
        sessions(std::move(sm)),
        store(std::move(sa)),
        ioc(settings.io_threads) {}

  // Counts a chat request in flight for graceful shutdown.
  struct flight_guard {
    impl* self;
    explicit flight_guard(impl* s) : self(s) {
      std::lock_guard lock{self->mx};
      ++self->in_flight;
    }
    ~flight_guard() {
      std::lock_guard lock{self->mx};
      if (--self->in_flight == 0)
        self->idle_cv.notify_all();
    }
  };

  // -- plain responses ----------------------------------------------------------

  static bhttp::response<bhttp::string_body> json_response(unsigned status, std::string body,
                                                           bool keep_alive) {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), 11};
    res.set(bhttp::field::server, "ragtor");
    res.set(bhttp::field::content_type, "application/json");
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  static net::awaitable<void> write_json(beast::tcp_stream& stream, unsigned status,
                                         std::string body, bool keep_alive) {
    auto res = json_response(status, std::move(body), keep_alive);
    co_await bhttp::async_write(stream, res, net::use_awaitable);
  }

  static net::awaitable<void> write_error(beast::tcp_stream& stream, unsigned status,
                                          std::string_view code, std::string_view message,
                                          std::string_view field, bool keep_alive) {
    co_await write_json(stream, status, error_body(code, message, field), keep_alive);
  }

  // -- connection -------------------------------------------------------------------

  net::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    while (accepting) {
      boost::system::error_code ec;
      auto sock = co_await acceptor->async_accept(net::make_strand(ioc),
                                                  net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        if (!accepting || ec == net::error::operation_aborted)
          break;
        spdlog::warn("http: accept failed: {}", ec.message());
        continue;
      }
      sock.set_option(tcp::no_delay{true}, ec);
      auto ex = sock.get_executor();
      net::co_spawn(ex, connection(std::move(sock)), net::detached);
    }
  }

  net::awaitable<void> connection(tcp::socket sock) {
    auto self = shared_from_this();
    beast::tcp_stream stream{std::move(sock)};
    beast::flat_buffer buffer;
    try {
      for (;;) {
        bhttp::request_parser<bhttp::string_body> parser;
        // Beast checks Content-Length against the limit while parsing the
        // header, before the target is known: parse with the largest limit,
        // then apply the route's own.
        parser.body_limit(std::max(settings.limits.max_body_bytes, settings.max_ingest_bytes));
        stream.expires_after(settings.idle_timeout);
        boost::system::error_code ec;
        co_await bhttp::async_read_header(stream, buffer, parser,
                                          net::redirect_error(net::use_awaitable, ec));
        auto body_limit = settings.limits.max_body_bytes;
        if (!ec) {
          if (is_ingest_target(parser.get().target()))
            body_limit = settings.max_ingest_bytes;
          parser.body_limit(body_limit);  // still enforced for chunked bodies
          if (auto len = parser.content_length(); len && *len > body_limit)
            ec = bhttp::error::body_limit;
        }
        if (!ec && beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
          bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
          co_await bhttp::async_write(stream, cont, net::use_awaitable);
        }
        // NDJSON ingestion bodies are parsed line by line as they arrive,
        // never held whole (they may be up to server.max_ingest_bytes).
        std::optional<ndjson_documents> streamed;
        request_t streamed_req;
        bool body_left = false;
        if (!ec && is_ndjson_ingest(parser.get())) {
          streamed.emplace(settings.max_ingest_documents);
          ec = co_await read_ndjson(stream, buffer, parser, body_limit, *streamed, streamed_req,
                                    body_left);
        } else if (!ec) {
          co_await bhttp::async_read(stream, buffer, parser,
                                     net::redirect_error(net::use_awaitable, ec));
        }
        if (ec == bhttp::error::body_limit) {
          co_await write_error(stream, 413, "payload_too_large",
                               "request body exceeds " + std::to_string(body_limit) + " bytes", "",
                               false);
          co_await drain(stream);
          break;
        }
        if (ec) {
          if (ec != bhttp::error::end_of_stream && ec != net::error::eof
              && ec != beast::error::timeout && ec != net::error::operation_aborted)
            co_await write_error(stream, 400, "invalid_request", "malformed HTTP request", "",
                                 false);
          break;
        }
        stream.expires_never();
        if (streamed) {
          // A body left unread (a bad line stopped the parse) ends the
          // connection after the answer.
          bool keep = co_await dispatch(stream, buffer, streamed_req, &*streamed);
          if (body_left) {
            co_await drain(stream);
            break;
          }
          if (!keep)
            break;
          continue;
        }
        auto req = parser.release();
        bool keep = co_await dispatch(stream, buffer, req);
        if (!keep)
          break;
      }
    } catch (const std::exception& e) {
      spdlog::debug("http: connection ended: {}", e.what());
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
  }

  // Reads and discards what the client is still sending (bounded in bytes
  // and time) so it can read our early error response instead of getting a
  // connection reset.
  static net::awaitable<void> drain(beast::tcp_stream& stream) {
    boost::system::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 64 * 1024> scratch;
    size_t total = 0;
    stream.expires_after(std::chrono::seconds(2));
    while (total < (64u << 20)) {
      auto n = co_await stream.async_read_some(net::buffer(scratch),
                                               net::redirect_error(net::use_awaitable, ec));
      if (ec)
        break;
      total += n;
    }
  }

  static bool is_ndjson_type(std::string_view type) {
    return type.find("ndjson") != std::string_view::npos
           || type.find("jsonl") != std::string_view::npos;
  }

  static bool is_ndjson_ingest(const bhttp::request_parser<bhttp::string_body>::value_type& req) {
    return req.method() == bhttp::verb::post
           && is_ingest_target(std::string_view{req.target().data(), req.target().size()})
           && is_ndjson_type(req[bhttp::field::content_type]);
  }

  // Reads the body of the request whose header `header_parser` holds in
  // 64 KiB pieces into `docs`, stopping at the first bad line
  // (`body_left` then says the rest was not read). `req` gets the header.
  static net::awaitable<boost::system::error_code> read_ndjson(
      beast::tcp_stream& stream, beast::flat_buffer& buffer,
      bhttp::request_parser<bhttp::string_body>& header_parser, size_t body_limit,
      ndjson_documents& docs, request_t& req, bool& body_left) {
    bhttp::request_parser<bhttp::buffer_body> p{std::move(header_parser)};
    p.body_limit(body_limit);
    std::vector<char> piece(64 * 1024);
    boost::system::error_code ec;
    while (!p.is_done()) {
      p.get().body().data = piece.data();
      p.get().body().size = piece.size();
      co_await bhttp::async_read(stream, buffer, p, net::redirect_error(net::use_awaitable, ec));
      if (ec == bhttp::error::need_buffer)
        ec = {};
      if (ec)
        co_return ec;
      auto n = piece.size() - p.get().body().size;
      if (!docs.feed(std::string_view{piece.data(), n}))
        break;
    }
    body_left = !p.is_done();
    if (docs.ok())
      docs.finish();
    req = request_t{std::move(p.get().base())};
    co_return ec;
  }

  // Serves one request; returns whether the connection may be reused.
  // `streamed`: the documents of an NDJSON ingestion, already parsed.
  net::awaitable<bool> dispatch(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                request_t& req, ndjson_documents* streamed = nullptr) {
    auto t = parse_target(std::string_view{req.target().data(), req.target().size()});
    auto path = t.path;
    bool keep = req.keep_alive();
    auto method = req.method();
    if (!t.valid) {
      co_await write_error(stream, 400, "invalid_request", "malformed query string", "", keep);
      co_return keep;
    }
    if (path == "/healthz") {
      if (method != bhttp::verb::get)
        co_return co_await method_not_allowed(stream, keep);
      co_await write_json(stream, 200, R"({"status":"ok"})", keep);
      co_return keep;
    }
    if (path == "/api/v1/chat/stream" || path == "/api/v1/chat") {
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      flight_guard guard{this};
      co_await chat(stream, buffer, req, path == "/api/v1/chat/stream");
      co_return false;
    }
    if (path == "/api/v1/chat/stop") {
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      co_await stop_turn(stream, req, keep);
      co_return keep;
    }
    if (path == "/api/v1/clear") {
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      co_await clear(stream, req, keep);
      co_return keep;
    }
    if (path == "/api/v1/feedback") {
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      co_await feedback(stream, req, keep);
      co_return keep;
    }
    constexpr std::string_view users = "/api/v1/users/";
    if (path.starts_with(users)) {
      auto rest = path.substr(users.size());
      auto slash = rest.find('/');
      std::string user{rest.substr(0, slash)};
      auto suffix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
      if (suffix == "/memory") {
        co_await core_memory(stream, req, user, keep);
        co_return keep;
      }
      if (suffix == "/memories" || suffix.starts_with("/memories/")) {
        std::string id{suffix.size() > 10 ? suffix.substr(10) : std::string_view{}};
        co_await long_term_memories(stream, req, user, id, keep);
        co_return keep;
      }
    }
    if (path == "/api/v1/kbs" || path.starts_with("/api/v1/kbs/"))
      co_return co_await kb_route(stream, req, path, keep, streamed);
    constexpr std::string_view conversations = "/api/v1/conversations";
    if (path == conversations) {
      if (method != bhttp::verb::get)
        co_return co_await method_not_allowed(stream, keep);
      co_await list_conversations(stream, t, keep);
      co_return keep;
    }
    if (path.starts_with(conversations) && path.size() > conversations.size() + 1
        && path[conversations.size()] == '/') {
      auto rest = path.substr(conversations.size() + 1);
      auto slash = rest.find('/');
      std::string id{rest.substr(0, slash)};
      auto suffix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
      if (suffix == "/messages") {
        if (method != bhttp::verb::get)
          co_return co_await method_not_allowed(stream, keep);
        co_await conversation_messages(stream, t, id, keep);
        co_return keep;
      }
      if (suffix == "/summary") {
        if (method != bhttp::verb::get)
          co_return co_await method_not_allowed(stream, keep);
        co_await conversation_summary(stream, t, id, keep);
        co_return keep;
      }
      if (suffix.empty()) {
        if (method != bhttp::verb::delete_)
          co_return co_await method_not_allowed(stream, keep);
        co_await delete_conversation(stream, t, id, keep);
        co_return keep;
      }
    }
    co_await write_error(stream, 404, "not_found", "no such endpoint: " + std::string{path}, "",
                         keep);
    co_return keep;
  }

  // -- memory -------------------------------------------------------------------------

  static constexpr size_t max_profile_bytes = 16 * 1024;

  // GET/PUT /api/v1/users/{user_id}/memory: the editable core memory profile.
  net::awaitable<void> core_memory(beast::tcp_stream& stream, request_t& req,
                                   const std::string& user, bool keep) {
    if (!is_valid_id(user, settings.limits.max_id_chars)) {
      co_await write_request_error(stream, id_field_error("user_id", settings.limits.max_id_chars),
                                   keep);
      co_return;
    }
    caf::expected<std::string> profile{std::string{}};
    if (req.method() == bhttp::verb::get) {
      profile =
          co_await async_request<std::string>(sys, store, store_timeout, atom::core_mem_v, user);
    } else if (req.method() == bhttp::verb::put) {
      auto body = std::string_view{req.body()};
      auto minified = minify_json_object(body, max_profile_bytes);
      if (!minified.ok) {
        co_await write_request_error(stream, minified.error, keep);
        co_return;
      }
      profile = co_await async_request<std::string>(sys, store, store_timeout, atom::core_mem_v,
                                                    user, minified.value);
    } else {
      co_await method_not_allowed(stream, keep);
      co_return;
    }
    if (!profile) {
      co_await write_caf_error(stream, profile.error(), keep);
      co_return;
    }
    std::string out = "{\"user_id\":";
    append_json_string(out, user);
    out += ",\"profile\":";
    out += *profile;
    out += '}';
    co_await write_json(stream, 200, std::move(out), keep);
  }

  // GET /api/v1/users/{user_id}/memories: unexpired long-term memories;
  // DELETE .../memories (all) or .../memories/{id} (one).
  net::awaitable<void> long_term_memories(beast::tcp_stream& stream, request_t& req,
                                          const std::string& user, const std::string& id,
                                          bool keep) {
    if (!is_valid_id(user, settings.limits.max_id_chars)) {
      co_await write_request_error(stream, id_field_error("user_id", settings.limits.max_id_chars),
                                   keep);
      co_return;
    }
    if (req.method() == bhttp::verb::get && id.empty()) {
      auto list = co_await async_request<std::vector<memory_record>>(sys, store, store_timeout,
                                                                     atom::mem_list_v, user);
      if (!list) {
        co_await write_caf_error(stream, list.error(), keep);
        co_return;
      }
      json_writer w;
      w.begin_object().field("user_id", user);
      w.key("caution").value("Extracted from the user's own messages; may be outdated.");
      w.key("memories").begin_array();
      for (auto& m : *list)
        w.begin_object()
            .field("id", m.id)
            .field("kind", m.kind)
            .field("content", m.content)
            .field("source_message_id", m.source_message_id)
            .field("created_at", m.created_at)
            .field("expires_at", m.expires_at)
            .end_object();
      w.end_array().end_object();
      co_await write_json(stream, 200, w.take(), keep);
      co_return;
    }
    if (req.method() != bhttp::verb::delete_) {
      co_await method_not_allowed(stream, keep);
      co_return;
    }
    auto n =
        co_await async_request<int64_t>(sys, store, store_timeout, atom::mem_delete_v, user, id);
    if (!n) {
      co_await write_caf_error(stream, n.error(), keep);
      co_return;
    }
    if (!id.empty() && *n == 0) {
      co_await write_error(stream, 404, "not_found", "no such memory", "", keep);
      co_return;
    }
    co_await write_json(stream, 200, "{\"deleted\":" + std::to_string(*n) + "}", keep);
  }

  // -- knowledge bases ------------------------------------------------------------------

  static bool is_ingest_target(std::string_view target) {
    auto q = target.find('?');
    auto path = target.substr(0, q);
    return path.starts_with("/api/v1/kbs/") && path.ends_with("/documents");
  }

  // /api/v1/kbs, /api/v1/kbs/{kb}, /api/v1/kbs/{kb}/documents, .../search,
  // .../pipeline
  net::awaitable<bool> kb_route(beast::tcp_stream& stream, request_t& req, std::string_view path,
                                bool keep, ndjson_documents* streamed) {
    auto method = req.method();
    if (!settings.catalog) {
      co_await write_error(stream, 404, "not_found", "no knowledge-base API on this node", "",
                           keep);
      co_return keep;
    }
    constexpr std::string_view base = "/api/v1/kbs";
    if (path == base) {
      if (method == bhttp::verb::get) {
        std::vector<std::shared_ptr<const kb_snapshot>> snaps;
        for (auto& name : settings.catalog->names())
          snaps.push_back(settings.catalog->get(name));
        co_await write_json(stream, 200, kb_list_json(snaps), keep);
        co_return keep;
      }
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      auto s = kb_settings_from_json(req.body());
      if (!s) {
        co_await write_caf_error(stream, s.error(), keep);
        co_return keep;
      }
      auto created = co_await async_request<kb_settings>(sys, settings.kb_admin, store_timeout,
                                                         atom::kb_create_v, *s);
      if (!created) {
        co_await write_caf_error(stream, created.error(), keep);
        co_return keep;
      }
      // (No temporaries from a ?: inside co_await: gcc 12 destroys them twice.)
      std::string body;
      if (auto snap = settings.catalog->get(created->name))
        body = kb_info_json(*snap);
      else
        body = to_json(*created);
      co_await write_json(stream, 201, std::move(body), keep);
      co_return keep;
    }
    auto rest = path.substr(base.size() + 1);
    auto slash = rest.find('/');
    std::string kb{rest.substr(0, slash)};
    auto suffix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
    auto snap = settings.catalog->get(kb);
    if (!snap || kb.empty()) {
      co_await write_error(stream, 404, "not_found", "unknown knowledge base \"" + kb + "\"", "",
                           keep);
      co_return keep;
    }
    if (suffix.empty()) {
      if (method != bhttp::verb::get)
        co_return co_await method_not_allowed(stream, keep);
      co_await write_json(stream, 200, kb_info_json(*snap), keep);
      co_return keep;
    }
    if (suffix == "/pipeline") {
      if (method != bhttp::verb::get)
        co_return co_await method_not_allowed(stream, keep);
      co_await write_json(stream, 200, pipeline_json(snap->settings, settings.reranker), keep);
      co_return keep;
    }
    if (suffix == "/documents") {
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      api_parse<std::vector<document>> docs;
      if (streamed) {
        docs.ok = streamed->ok();
        docs.error = streamed->error();
        docs.value = std::move(streamed->documents());
      } else {
        docs = parse_documents_body(req.body(), is_ndjson_type(req[bhttp::field::content_type]),
                                    settings.max_ingest_documents);
      }
      if (!docs.ok) {
        co_await write_request_error(stream, docs.error, keep);
        co_return keep;
      }
      auto report =
          co_await async_request<ingest_report>(sys, settings.kb_admin, settings.ingest_timeout,
                                                atom::kb_ingest_v, kb, std::move(docs.value));
      if (!report) {
        co_await write_caf_error(stream, report.error(), keep);
        co_return keep;
      }
      co_await write_json(stream, 200, ingest_report_json(kb, *report), keep);
      co_return keep;
    }
    if (suffix == "/search") {
      if (method != bhttp::verb::post)
        co_return co_await method_not_allowed(stream, keep);
      auto sr = parse_search_request(req.body(), settings.limits.max_body_bytes,
                                     settings.limits.max_message_bytes);
      if (!sr.ok) {
        co_await write_request_error(stream, sr.error, keep);
        co_return keep;
      }
      std::string agent_type = sr.value.agent_type;
      if (agent_type.empty())
        agent_type = snap->settings.default_agent_type;
      if (agent_type.empty())
        agent_type = settings.default_agent_type;
      if (!is_agent_type(agent_type)) {
        co_await write_error(stream, 400, "invalid_request",
                             "field \"agent_type\" must be one of naive_rag_agent, hybrid_agent, "
                             "graph_agent, deep_research_agent, fusion_agent",
                             "agent_type", keep);
        co_return keep;
      }
      retrieve_options ro;
      ro.top_k = sr.value.top_k > 0         ? sr.value.top_k
                 : snap->settings.top_k > 0 ? snap->settings.top_k
                                            : settings.default_top_k;
      auto agent = co_await async_request<retrieval_agent_actor>(
          sys, settings.pool, store_timeout, atom::resolve_v, format_worker_name(kb, agent_type));
      if (!agent) {
        co_await write_caf_error(stream, agent.error(), keep);
        co_return keep;
      }
      auto result = co_await async_request<retrieval_result>(
          sys, *agent, store_timeout, atom::retrieve_v, sr.value.query, std::string{"search"}, ro);
      if (!result) {
        co_await write_caf_error(stream, result.error(), keep);
        co_return keep;
      }
      co_await write_json(stream, 200, retrieval_result_json(*result), keep);
      co_return keep;
    }
    co_await write_error(stream, 404, "not_found", "no such endpoint: " + std::string{path}, "",
                         keep);
    co_return keep;
  }

  // -- conversation management ----------------------------------------------------------

  // Writes `err` as the JSON error response it maps to.
  net::awaitable<void> write_caf_error(beast::tcp_stream& stream, const caf::error& err,
                                       bool keep) {
    auto he = http_error_of(code_of(err));
    co_await write_error(stream, he.status, he.code, error_message(err), "", keep);
  }

  net::awaitable<void> write_request_error(beast::tcp_stream& stream, const request_error& e,
                                           bool keep) {
    co_await write_error(stream, static_cast<unsigned>(e.status), e.code, e.message, e.field, keep);
  }

  // The user_id query parameter, validated; "" after writing a 400.
  net::awaitable<std::string> user_param(beast::tcp_stream& stream, const target& t, bool keep) {
    auto i = t.query.find("user_id");
    if (i == t.query.end() || !is_valid_id(i->second, settings.limits.max_id_chars)) {
      co_await write_request_error(stream, id_field_error("user_id", settings.limits.max_id_chars),
                                   keep);
      co_return std::string{};
    }
    co_return i->second;
  }

  // The integer query parameter `name` (default when absent); nullopt
  // after writing a 400.
  net::awaitable<std::optional<int64_t>> int_query(beast::tcp_stream& stream, const target& t,
                                                   std::string_view name, int64_t fallback,
                                                   int64_t min, int64_t max, bool keep) {
    auto i = t.query.find(name);
    if (i == t.query.end())
      co_return fallback;
    auto v = int_param(i->second, min, max);
    if (!v)
      co_await write_request_error(
          stream,
          make_request_error("invalid_request",
                             "parameter " + quoted_field(name) + " must be an integer in ["
                                 + std::to_string(min) + ", " + std::to_string(max) + "]",
                             name),
          keep);
    co_return v;
  }

  static constexpr caf::timespan store_timeout = std::chrono::seconds(30);

  net::awaitable<void> list_conversations(beast::tcp_stream& stream, const target& t, bool keep) {
    auto user = co_await user_param(stream, t, keep);
    if (user.empty())
      co_return;
    auto limit = co_await int_query(stream, t, "limit", 20, 1, 100, keep);
    if (!limit)
      co_return;
    std::string cursor;
    if (auto i = t.query.find("cursor"); i != t.query.end()) {
      cursor = i->second;
      auto colon = cursor.find(':');
      if (colon == std::string::npos
          || !int_param(std::string_view{cursor}.substr(0, colon), 0, INT64_MAX)
          || !is_valid_id(std::string_view{cursor}.substr(colon + 1), 64)) {
        co_await write_error(stream, 400, "invalid_request", "malformed cursor", "cursor", keep);
        co_return;
      }
    }
    auto page = co_await async_request<conversation_page>(
        sys, store, store_timeout, atom::list_convs_v, user, static_cast<int32_t>(*limit), cursor);
    if (!page)
      co_return co_await write_caf_error(stream, page.error(), keep);
    co_await write_json(stream, 200, conversation_page_json(*page), keep);
  }

  net::awaitable<void> conversation_messages(beast::tcp_stream& stream, const target& t,
                                             const std::string& id, bool keep) {
    auto user = co_await user_param(stream, t, keep);
    if (user.empty())
      co_return;
    auto limit = co_await int_query(stream, t, "limit", 50, 1, 200, keep);
    if (!limit)
      co_return;
    auto before = co_await int_query(stream, t, "before", 0, 1, INT64_MAX, keep);
    if (!before)
      co_return;
    // One extra message tells whether an older page exists.
    auto msgs = co_await async_request<std::vector<stored_message>>(
        sys, store, store_timeout, atom::messages_v, id, user, static_cast<int32_t>(*limit + 1),
        *before);
    if (!msgs)
      co_return co_await write_caf_error(stream, msgs.error(), keep);
    bool has_more = msgs->size() > static_cast<size_t>(*limit);
    if (has_more)
      msgs->erase(msgs->begin());
    co_await write_json(stream, 200, messages_json(id, *msgs, has_more), keep);
  }

  // GET /api/v1/conversations/{id}/summary?user_id=: the rolling summary
  // of everything older than the recent window (version 0: none yet). With
  // wait_version=N it first waits (at most timeout_ms, default 10 s) until
  // a summary of version N exists: summaries are written in the background.
  net::awaitable<void> conversation_summary(beast::tcp_stream& stream, const target& t,
                                            const std::string& id, bool keep) {
    auto user = co_await user_param(stream, t, keep);
    if (user.empty())
      co_return;
    auto wait_version = co_await int_query(stream, t, "wait_version", 0, 0, INT64_MAX, keep);
    if (!wait_version)
      co_return;
    auto timeout_ms = co_await int_query(stream, t, "timeout_ms", 10000, 0, 60000, keep);
    if (!timeout_ms)
      co_return;
    if (*wait_version > 0 && settings.summarizer) {
      // Ownership first: nobody waits on someone else's conversation.
      auto owned = co_await async_request<summary_record>(sys, store, store_timeout,
                                                          atom::summary_v, id, user);
      if (!owned)
        co_return co_await write_caf_error(stream, owned.error(), keep);
      auto timeout = std::chrono::milliseconds{*timeout_ms};
      auto waited = co_await async_request<bool>(
          sys, settings.summarizer, timeout + std::chrono::seconds(30), atom::summary_v, id,
          *wait_version, static_cast<int32_t>(*timeout_ms));
      if (!waited)
        co_return co_await write_caf_error(stream, waited.error(), keep);
    }
    auto rec = co_await async_request<summary_record>(sys, store, store_timeout, atom::summary_v,
                                                      id, user);
    if (!rec)
      co_return co_await write_caf_error(stream, rec.error(), keep);
    json_writer w;
    w.begin_object()
        .field("conversation_id", id)
        .field("summary", rec->summary)
        .field("covered_seq", rec->covered_seq)
        .field("version", rec->version)
        .field("incremental_updates", static_cast<int64_t>(rec->incremental_updates))
        .field("updated_at", rec->updated_at)
        .field("messages", rec->total_messages)
        .field("covered_messages", rec->covered_messages)
        .end_object();
    co_await write_json(stream, 200, w.take(), keep);
  }

  net::awaitable<void> delete_conversation(beast::tcp_stream& stream, const target& t,
                                           const std::string& id, bool keep) {
    auto user = co_await user_param(stream, t, keep);
    if (user.empty())
      co_return;
    auto deleted =
        co_await async_request<bool>(sys, store, store_timeout, atom::delete_conv_v, id, user);
    if (!deleted)
      co_return co_await write_caf_error(stream, deleted.error(), keep);
    json_writer w;
    w.begin_object().field("status", "deleted").field("conversation_id", id).end_object();
    co_await write_json(stream, 200, w.take(), keep);
  }

  net::awaitable<void> clear(beast::tcp_stream& stream, request_t& req, bool keep) {
    auto parsed = parse_clear_request(req.body(), settings.limits);
    if (!parsed.ok)
      co_return co_await write_request_error(stream, parsed.error, keep);
    auto cleared = co_await async_request<int64_t>(sys, store, store_timeout, atom::clear_v,
                                                   parsed.value.user_id, parsed.value.session_id);
    if (!cleared)
      co_return co_await write_caf_error(stream, cleared.error(), keep);
    co_await write_json(stream, 200, clear_json(*cleared), keep);
  }

  net::awaitable<void> feedback(beast::tcp_stream& stream, request_t& req, bool keep) {
    auto parsed = parse_feedback_request(req.body(), settings.limits);
    if (!parsed.ok)
      co_return co_await write_request_error(stream, parsed.error, keep);
    auto state = co_await async_request<std::string>(sys, store, store_timeout, atom::feedback_v,
                                                     parsed.value);
    if (!state)
      co_return co_await write_caf_error(stream, state.error(), keep);
    json_writer w;
    w.begin_object()
        .field("status", "ok")
        .field("message_id", parsed.value.message_id)
        .field("feedback", *state)
        .end_object();
    co_await write_json(stream, 200, w.take(), keep);
  }

  net::awaitable<void> stop_turn(beast::tcp_stream& stream, request_t& req, bool keep) {
    auto parsed = parse_stop_request(req.body(), settings.limits);
    if (!parsed.ok)
      co_return co_await write_request_error(stream, parsed.error, keep);
    auto found = co_await async_request<bool>(sys, sessions, store_timeout, atom::stop_v,
                                              parsed.value.request_id, parsed.value.user_id);
    if (!found)
      co_return co_await write_caf_error(stream, found.error(), keep);
    co_await write_json(stream, 200,
                        *found ? R"({"status":"stopped"})" : R"({"status":"not_found"})", keep);
  }

  net::awaitable<bool> method_not_allowed(beast::tcp_stream& stream, bool keep) {
    co_await write_error(stream, 405, "method_not_allowed", "method not allowed for this path", "",
                         keep);
    co_return keep;
  }

  // -- chat ---------------------------------------------------------------------------

  // Both chat endpoints run the same turn; `sse` selects the wire format.
  // The connection is closed afterwards.
  net::awaitable<void> chat(beast::tcp_stream& stream, beast::flat_buffer& buffer, request_t& req,
                            bool sse) {
    auto parsed = parse_chat_request(req.body(), settings.limits);
    if (!parsed.ok) {
      co_await write_error(stream, static_cast<unsigned>(parsed.error.status), parsed.error.code,
                           parsed.error.message, parsed.error.field, false);
      co_return;
    }
    auto chat_req = std::move(parsed.request);
    if (!chat_req.kb_prefix.empty() && settings.kb_exists
        && !settings.kb_exists(chat_req.kb_prefix)) {
      co_await write_error(stream, 404, "not_found",
                           "unknown knowledge base \"" + chat_req.kb_prefix + "\"", "kb_prefix",
                           false);
      co_return;
    }
    if (chat_req.request_id.empty())
      chat_req.request_id = new_request_id();
    auto ticket = co_await async_request<turn_ticket>(
        sys, sessions, caf::timespan{settings.turn_timeout}, atom::open_turn_v, chat_req);
    if (!ticket) {
      auto code = code_of(ticket.error());
      auto he = http_error_of(code);
      auto msg = error_message(ticket.error());
      spdlog::warn("http: request {} refused: {}", chat_req.request_id, sys.render(ticket.error()));
      co_await write_error(stream, he.status, he.code, msg, "", false);
      co_return;
    }
    auto ex = co_await net::this_coro::executor;
    auto ch = std::make_shared<event_channel>(ex, channel_capacity);
    auto sink = spawn_sink(sys, ch, ticket->stream);
    caf::anon_send(ticket->stream, atom::subscribe_v, sink);
    caf::anon_send(ticket->stream, atom::demand_v, sink,
                   static_cast<int32_t>(settings.initial_credit));

    // Watch the socket: a client that goes away cancels its turn at once.
    auto finished = std::make_shared<bool>(false);
    net::co_spawn(ex, watch_disconnect(stream.socket(), ch, finished), net::detached);

    bool done = false;
    if (sse)
      done = co_await pump_sse(stream, *ch, ticket->stream, sink, chat_req.request_id);
    else
      done = co_await collect_json(stream, *ch, ticket->stream, sink, chat_req);
    *finished = true;
    if (!done)
      caf::anon_send(ticket->stream, atom::cancel_v);
    ch->close();
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    boost::system::error_code ignored;
    stream.socket().cancel(ignored);
  }

  // Reads until the client closes; any read result ends the wait.
  static net::awaitable<void> watch_disconnect(tcp::socket& sock, std::shared_ptr<event_channel> ch,
                                               std::shared_ptr<bool> finished) {
    char byte;
    for (;;) {
      boost::system::error_code ec;
      co_await sock.async_read_some(net::buffer(&byte, 1),
                                    net::redirect_error(net::use_awaitable, ec));
      if (*finished)
        co_return;
      if (ec) {
        ch->close();  // wakes the pump, which cancels the turn
        co_return;
      }
      // Extra bytes (pipelining) are ignored: the connection closes anyway.
    }
  }

  // Receives the next batch, or nullopt after `timeout` of silence; throws
  // when the channel was closed.
  static net::awaitable<std::optional<event_batch>> next_batch(event_channel& ch,
                                                               std::chrono::seconds timeout) {
    net::steady_timer timer{co_await net::this_coro::executor};
    timer.expires_after(timeout);
    auto r =
        co_await (ch.async_receive(net::use_awaitable) || timer.async_wait(net::use_awaitable));
    if (r.index() == 0)
      co_return std::move(std::get<0>(r));
    co_return std::nullopt;
  }

  // Writes `data` with a deadline; false if the client is gone or stalled.
  net::awaitable<bool> write_with_deadline(tcp::socket& sock, std::string_view data,
                                           bool as_chunk) {
    net::steady_timer timer{co_await net::this_coro::executor};
    timer.expires_after(settings.write_timeout);
    try {
      if (as_chunk) {
        auto r = co_await (
            net::async_write(sock, bhttp::make_chunk(net::buffer(data)), net::use_awaitable)
            || timer.async_wait(net::use_awaitable));
        co_return r.index() == 0;
      }
      auto r = co_await (net::async_write(sock, net::buffer(data), net::use_awaitable)
                         || timer.async_wait(net::use_awaitable));
      co_return r.index() == 0;
    } catch (const boost::system::system_error&) {
      co_return false;
    }
  }

  // Streams events as SSE; returns true once `done` was written.
  net::awaitable<bool> pump_sse(beast::tcp_stream& stream, event_channel& ch, stream_actor turn,
                                event_sink_actor sink, const std::string& request_id) {
    auto& sock = stream.socket();
    std::string head =
        "HTTP/1.1 200 OK\r\n"
        "Server: ragtor\r\n"
        "Content-Type: text/event-stream\r\n"
        "Cache-Control: no-cache\r\n"
        "X-Accel-Buffering: no\r\n"
        "Connection: close\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    if (!co_await write_with_deadline(sock, head, false))
      co_return false;
    uint64_t seq = 0;
    std::string frames;
    for (;;) {
      std::optional<event_batch> batch;
      try {
        batch = co_await next_batch(ch, settings.heartbeat);
      } catch (const boost::system::system_error&) {
        co_return false;  // channel closed: the client went away
      }
      frames.clear();
      bool done = false;
      if (!batch) {
        frames = ": ping\n\n";
      } else {
        for (auto& ev : *batch) {
          if (ev.visible)
            append_sse_frame(frames, ev, request_id, ++seq);
          done = done || ev.kind == event_kind::done;
        }
      }
      if (!frames.empty() && !co_await write_with_deadline(sock, frames, true))
        co_return false;
      if (done) {
        co_await write_with_deadline(sock, "0\r\n\r\n", false);
        co_return true;
      }
      if (batch)
        caf::anon_send(turn, atom::demand_v, sink, int32_t{1});
    }
  }

  // Collects the turn and answers with one JSON object.
  net::awaitable<bool> collect_json(beast::tcp_stream& stream, event_channel& ch, stream_actor turn,
                                    event_sink_actor sink, const chat_request& req) {
    std::string route_json = "null";
    std::string done_json;
    std::string error_json;
    std::string logs_json;  // execution_log contents, comma-separated
    for (;;) {
      std::optional<event_batch> batch;
      try {
        batch = co_await next_batch(ch, settings.turn_timeout);
      } catch (const boost::system::system_error&) {
        co_return false;
      }
      if (!batch)
        continue;
      for (auto& ev : *batch) {
        if (ev.kind == event_kind::route_decision)
          route_json = ev.data;
        else if (ev.kind == event_kind::error)
          error_json = ev.data;
        else if (ev.kind == event_kind::execution_log)
          logs_json += (logs_json.empty() ? "" : ",") + ev.data;
        else if (ev.kind == event_kind::done)
          done_json = ev.data;
      }
      if (!done_json.empty())
        break;
      caf::anon_send(turn, atom::demand_v, sink, int32_t{1});
    }
    // done_json is the done content object: add request_id and
    // route_decision (and the error, if any) in front of its members.
    std::string body = "{\"request_id\":";
    append_json_string(body, req.request_id);
    body += ",\"route_decision\":";
    body += route_json;
    if (req.debug) {
      body += ",\"execution_log\":[";
      body += logs_json;
      body += ']';
    }
    unsigned status = 200;
    if (!error_json.empty()) {
      body += ",\"error\":";
      body += error_json;
      status = status_of_code(error_code_in(error_json));
    }
    body += ',';
    body.append(done_json, 1, std::string::npos);
    try {
      co_await write_json(stream, status, std::move(body), false);
    } catch (const boost::system::system_error&) {
    }
    co_return true;
  }

  // The "code" member of an error payload written by make_error_event.
  static std::string error_code_in(const std::string& error_json) {
    static constexpr std::string_view key = "\"code\":\"";
    auto pos = error_json.find(key);
    if (pos == std::string::npos)
      return "internal";
    pos += key.size();
    return error_json.substr(pos, error_json.find('"', pos) - pos);
  }
};

server::server(caf::actor_system& sys, server_settings settings, session_manager_actor sessions,
               store_actor store)
    : impl_(
        std::make_shared<impl>(sys, std::move(settings), std::move(sessions), std::move(store))) {}

server::~server() {
  stop();
}

caf::expected<uint16_t> server::start() {
  auto& im = *impl_;
  boost::system::error_code ec;
  auto addr = net::ip::make_address(im.settings.host, ec);
  if (ec)
    return make_error(errc::invalid_request, "bad listen address \"" + im.settings.host + "\"");
  tcp::endpoint ep{addr, im.settings.port};
  im.acceptor.emplace(im.ioc);
  im.acceptor->open(ep.protocol(), ec);
  if (!ec)
    im.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    im.acceptor->bind(ep, ec);
  if (!ec)
    im.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(errc::unavailable, "cannot listen on " + im.settings.host + ":"
                                             + std::to_string(im.settings.port) + ": "
                                             + ec.message());
  auto port = im.acceptor->local_endpoint().port();
  im.work.emplace(im.ioc.get_executor());
  net::co_spawn(im.ioc, impl_->accept_loop(), net::detached);
  for (int i = 0; i < std::max(1, im.settings.io_threads); ++i)
    im.threads.emplace_back([&im] { im.ioc.run(); });
  return port;
}

void server::stop_accepting() {
  auto& im = *impl_;
  if (!im.accepting.exchange(false))
    return;
  net::post(im.ioc, [&im] {
    boost::system::error_code ignored;
    if (im.acceptor)
      im.acceptor->close(ignored);
  });
}

size_t server::wait_idle(std::chrono::milliseconds grace) {
  auto& im = *impl_;
  std::unique_lock lock{im.mx};
  im.idle_cv.wait_for(lock, grace, [&] { return im.in_flight == 0; });
  return im.in_flight;
}

void server::stop() {
  if (!impl_)
    return;
  auto& im = *impl_;
  stop_accepting();
  im.work.reset();
  im.ioc.stop();
  for (auto& t : im.threads)
    if (t.joinable())
      t.join();
  im.threads.clear();
  // Coroutine frames left in the stopped io_context keep `im` alive until
  // the io_context is destroyed; drop the actor handles now so the actor
  // system can shut down (a detached actor is only released when the last
  // handle to it is gone).
  im.settings.kb_admin = nullptr;
  im.settings.summarizer = nullptr;
  im.settings.pool = nullptr;
  im.settings.catalog.reset();
  im.settings.kb_exists = nullptr;
}

}  // namespace ragtor::http
