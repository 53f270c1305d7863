// The admin console (DESIGN §12, docs/admin.md): the page at /admin, its
// JSON API under /admin/api/ and the live feed /admin/api/events, and the
// Prometheus text at /metrics. Every answer about actors comes from the
// node's admin actor (actors/admin), which asks each actor — and, in a
// cluster, each other node's admin actor — with a timeout.
#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <vector>
#include <chrono>


#include <simdjson.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "actors/scheduler.hpp"
#include "actors/admin/admin.hpp"
#include "actors/admin/measured.hpp"
#include "http/caf_asio.hpp"
#include "http/connection_io.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "http/sse_writer.hpp"
#include "persistence/recall_index.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"

namespace ragtor::http {

// The page (generated from http/admin_ui/console.html at configure time).
std::string_view admin_console_html();

namespace {

const log::component lg{"http"};

// How long the console waits for the admin actor (which itself bounds each
// actor's and each node's answer).
constexpr auto admin_timeout = std::chrono::seconds(10);

// The elements of JSON array `arr` whose "node" member equals `node`.
std::string filter_by_node(const std::string& arr, std::string_view node) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded{arr};
  simdjson::ondemand::document doc;
  simdjson::ondemand::array items;
  if (parser.iterate(padded).get(doc) || doc.get_array().get(items))
    return "[]";
  std::string out = "[";
  for (auto item : items) {
    simdjson::ondemand::object obj;
    std::string_view raw;
    if (item.get_object().get(obj) || obj.raw_json().get(raw))
      continue;
    // raw_json() consumed the object; parse it again to read "node".
    simdjson::ondemand::parser inner;
    simdjson::padded_string one{raw};
    simdjson::ondemand::document d;
    std::string_view n;
    if (inner.iterate(one).get(d) || d["node"].get_string().get(n) || n != node)
      continue;
    if (out.size() > 1)
      out += ',';
    out += raw;
  }
  out += ']';
  return out;
}

std::string query_or(const exchange& ex, const std::string& key) {
  auto i = ex.target.query.find(key);
  return i == ex.target.query.end() ? std::string{} : i->second;
}

std::optional<uint64_t> parse_id(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

// {"<key>": [...]} of the live actors of `kind` ("" = all) on every node,
// or on `node` only.
boost::asio::awaitable<caf::expected<std::string>> actors_json(handler_context& ctx,
                                                              std::string_view key,
                                                              std::string kind,
                                                              std::string node) {
  auto arr = co_await async_request<std::string>(ctx.sys, ctx.settings.admin, admin_timeout,
                                                 atom::snapshot_v, std::move(kind), false);
  if (!arr)
    co_return arr.error();
  std::string items = node.empty() ? std::move(*arr) : filter_by_node(*arr, node);
  std::string out = "{\"";
  out += key;
  out += "\":";
  out += items;
  out += '}';
  co_return out;
}

boost::asio::awaitable<caf::expected<std::string>> nodes_json(handler_context& ctx) {
  auto arr = co_await async_request<std::string>(ctx.sys, ctx.settings.admin, admin_timeout,
                                                 atom::nodes_v, false);
  if (!arr)
    co_return arr.error();
  json_writer w;
  w.begin_object().field("self", actor_directory::instance().node(ctx.sys));
  w.key("nodes").raw(*arr).end_object();
  co_return w.take();
}

std::string loggers_json() {
  json_writer w;
  w.begin_object().key("loggers").begin_array();
  for (auto& [name, level] : log::levels())
    w.begin_object().field("name", name).field("level", level).end_object();
  w.end_array().end_object();
  return w.take();
}

// What a view of the console shows, as JSON (the GET routes and the feed
// answer the same).
boost::asio::awaitable<caf::expected<std::string>> view_json(handler_context& ctx,
                                                            std::string_view view,
                                                            const exchange& ex) {
  if (view == "nodes")
    co_return co_await nodes_json(ctx);
  if (view == "actors")
    co_return co_await actors_json(ctx, "actors", query_or(ex, "kind"), query_or(ex, "node"));
  if (view == "sessions")
    co_return co_await actors_json(ctx, "sessions", "session", query_or(ex, "node"));
  if (view == "streams")
    co_return co_await actors_json(ctx, "streams", "stream", query_or(ex, "node"));
  if (view == "loggers")
    co_return loggers_json();
  if (view == "actor") {
    auto which = query_or(ex, "actor");  // <node>/<id>
    auto slash = which.rfind('/');
    auto id = slash == std::string::npos ? std::nullopt : parse_id(which.substr(slash + 1));
    if (!id)
      co_return make_error(errc::invalid_request, "actor must be <node>/<id>");
    co_return co_await async_request<std::string>(ctx.sys, ctx.settings.admin, admin_timeout,
                                                  atom::status_v, which.substr(0, slash), *id);
  }
  co_return make_error(errc::invalid_request,
                       "unknown view \"" + std::string{view}
                           + "\" (known: nodes, actors, actor, sessions, streams, loggers)");
}

boost::asio::awaitable<void> reply_view(handler_context& ctx, exchange& ex,
                                        std::string_view view) {
  auto json = co_await view_json(ctx, view, ex);
  if (!json)
    co_return co_await reply_caf_error(ex, json.error());
  co_await reply_json(ex, 200, std::move(*json));
}

}  // namespace

handler_result admin_page(handler_context&, exchange& ex) {
  co_await reply_text(ex, 200, "text/html; charset=utf-8", std::string{admin_console_html()});
}

namespace {

// An unlabelled series of the scrape-time section.
struct unlabelled {
  std::string_view name, type, help;
  double value;
};

}  // namespace

handler_result metrics_text(handler_context& ctx, exchange& ex) {
  std::string extra;
  std::vector<unlabelled> plain;
  // Gauges read at scrape time from the actor directory.
  auto& dir = actor_directory::instance();
  plain.push_back({"ragtor_active_streams", "gauge",
                   "Chat turns whose stream actor is alive on this node.",
                   static_cast<double>(dir.count(ctx.sys, "stream"))});
  plain.push_back({"ragtor_active_sessions", "gauge",
                   "Conversations with a live session actor on this node.",
                   static_cast<double>(dir.count(ctx.sys, "session"))});
  metrics::append_header(extra, "ragtor_actors", "gauge", "Live actors on this node by kind.");
  for (auto& [kind, n] : dir.kinds(ctx.sys))
    metrics::append_sample(extra, "ragtor_actors", "kind=\"" + kind + "\"",
                           static_cast<double>(n));
  // The actor clock (actors/scheduler.hpp): timer operations, how many of
  // them had to wake its thread, and what it holds.
  auto clock = clock_counts_of(ctx.sys);
  plain.push_back({"ragtor_actor_clock_operations_total", "counter",
                   "Timer operations of the actor clock: request timeouts, actor timeouts and "
                   "delayed messages set or cancelled.",
                   static_cast<double>(clock.operations)});
  plain.push_back({"ragtor_actor_clock_wakeups_total", "counter",
                   "Timer operations that woke the clock's thread (their deadline came before "
                   "the one it slept until).",
                   static_cast<double>(clock.wakeups)});
  plain.push_back({"ragtor_actor_clock_pending", "gauge",
                   "Request timeouts, actor timeouts and delayed messages the actor clock holds, "
                   "not yet due.",
                   static_cast<double>(clock.pending)});
  // Memory that RSS alone does not explain: what the allocator hands out
  // (live objects), what it keeps free, and SQLite's share (page caches).
  // Read by the heap sampler's own thread (http/heap_sampler.hpp).
  auto heap = co_await async_request<std::string>(ctx.sys, ctx.heap, store_timeout,
                                                  atom::status_v);
  if (heap) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t in_use = 0, free = 0;
    if (!parser.parse(*heap).get(doc) && !doc["in_use"].get(in_use)
        && !doc["free"].get(free)) {
      plain.push_back({"ragtor_heap_in_use_bytes", "gauge",
                       "Heap bytes allocated and not freed (glibc mallinfo2, all arenas).",
                       static_cast<double>(in_use)});
      plain.push_back({"ragtor_heap_free_bytes", "gauge",
                       "Heap bytes freed but kept by the allocator (glibc mallinfo2).",
                       static_cast<double>(free)});
    }
  }
  plain.push_back({"ragtor_sqlite_memory_bytes", "gauge",
                   "Heap bytes held by SQLite, page caches included.",
                   static_cast<double>(sqlite_backend::memory_used())});
  // The per-user recall rows the store holds between turns.
  auto recall = recall_index::process_stats();
  plain.push_back({"ragtor_recall_index_bytes", "gauge",
                   "Bytes of users' recall rows held between turns ([memory] recall_index_mb).",
                   static_cast<double>(recall.bytes)});
  plain.push_back({"ragtor_recall_index_users", "gauge",
                   "Users whose memories or episodes are held (each counted once per kind).",
                   static_cast<double>(recall.users)});
  metrics::append_header(extra, "ragtor_recall_lookups_total", "counter",
                         "Recall look-ups by how they were served: held (nothing new), added "
                         "(only new rows read), read (rows read whole).");
  for (auto [served, n] : {std::pair{"held", recall.held}, std::pair{"added", recall.added},
                           std::pair{"read", recall.read}})
    metrics::append_sample(extra, "ragtor_recall_lookups_total",
                           std::string{"served=\""} + served + "\"", static_cast<double>(n));
  plain.push_back({"ragtor_recall_rows_read_again_total", "counter",
                   "Recall rows read again that were held already (a store without a mark of "
                   "the rows held: PostgreSQL).",
                   static_cast<double>(recall.read_again)});
  plain.push_back({"ragtor_recall_episode_texts_read_total", "counter",
                   "Recalled episodes' texts read from the store by id: neither kept when they "
                   "were written here nor read before (then they are kept).",
                   static_cast<double>(recall.texts_read)});
  for (auto& m : plain) {
    metrics::append_header(extra, m.name, m.type, m.help);
    metrics::append_sample(extra, m.name, "", m.value);
  }
  co_await reply_text(ex, 200, "text/plain; version=0.0.4; charset=utf-8",
                      metrics::render(metrics::global(), extra));
}

handler_result admin_nodes(handler_context& ctx, exchange& ex) {
  co_await reply_view(ctx, ex, "nodes");
}

handler_result admin_actors(handler_context& ctx, exchange& ex) {
  co_await reply_view(ctx, ex, "actors");
}

handler_result admin_actor(handler_context& ctx, exchange& ex) {
  auto id = parse_id(ex.params["id"]);
  if (!id)
    co_return co_await reply_error(ex, 404, "not_found", "no such actor", "id");
  auto json = co_await async_request<std::string>(ctx.sys, ctx.settings.admin, admin_timeout,
                                                  atom::status_v, ex.params["node"], *id);
  if (!json)
    co_return co_await reply_caf_error(ex, json.error());
  co_await reply_json(ex, 200, std::move(*json));
}

handler_result admin_sessions(handler_context& ctx, exchange& ex) {
  co_await reply_view(ctx, ex, "sessions");
}

handler_result admin_streams(handler_context& ctx, exchange& ex) {
  co_await reply_view(ctx, ex, "streams");
}

handler_result admin_stop_stream(handler_context& ctx, exchange& ex) {
  std::string request_id = ex.params["request_id"];
  auto found = co_await async_request<bool>(ctx.sys, ctx.settings.admin, admin_timeout,
                                            atom::stop_v, request_id, false);
  if (!found)
    co_return co_await reply_caf_error(ex, found.error());
  if (!*found)
    co_return co_await reply_error(ex, 404, "not_found",
                                   "no running stream \"" + request_id + "\"");
  lg->info("admin: stopped stream {}", request_id);
  json_writer w;
  w.begin_object().field("status", "stopping").field("request_id", request_id).end_object();
  co_await reply_json(ex, 200, w.take());
}

handler_result admin_evict_session(handler_context& ctx, exchange& ex) {
  std::string user = ex.params["user"];
  std::string session = ex.params["session"];
  auto found = co_await async_request<bool>(ctx.sys, ctx.settings.admin, admin_timeout,
                                            atom::evict_v, user, session, false);
  if (!found)
    co_return co_await reply_caf_error(ex, found.error());
  if (!*found)
    co_return co_await reply_error(ex, 404, "not_found", "no live session for that user and id");
  lg->info("admin: evicted session {}/{}", user, session);
  json_writer w;
  w.begin_object()
      .field("status", "evicted")
      .field("user_id", user)
      .field("session_id", session)
      .end_object();
  co_await reply_json(ex, 200, w.take());
}

handler_result admin_loggers(handler_context& ctx, exchange& ex) {
  co_await reply_view(ctx, ex, "loggers");
}

handler_result admin_set_logger(handler_context& ctx, exchange& ex) {
  static constexpr std::array<field_spec, 2> specs{{
      {"name", field_kind::string, true},
      {"level", field_kind::string, true},
  }};
  auto parsed = parse_json_object(ex.body, ctx.settings.limits.max_body_bytes, specs);
  if (!parsed.ok)
    co_return co_await reply_request_error(ex, parsed.error);
  auto name = parsed.fields.string_or("name");
  auto level = parsed.fields.string_or("level");
  if (auto err = log::set_level(name, level))
    co_return co_await reply_error(ex, 400, "invalid_request", *err,
                                   err->starts_with("unknown level") ? "level" : "name");
  lg->info("admin: logger {} set to {}", name, level);
  json_writer w;
  w.begin_object().field("name", name).field("level", level).end_object();
  co_await reply_json(ex, 200, w.take());
}

handler_result admin_events(handler_context& ctx, exchange& ex) {
  namespace net = boost::asio;
  std::string view = query_or(ex, "view");
  if (view.empty())
    view = "actors";
  // A bad view or actor is refused before the stream starts.
  static constexpr std::array<std::string_view, 6> views{"nodes",    "actors",  "actor",
                                                         "sessions", "streams", "loggers"};
  if (std::find(views.begin(), views.end(), view) == views.end())
    co_return co_await reply_error(ex, 400, "invalid_request",
                                   "unknown view \"" + view
                                       + "\" (known: nodes, actors, actor, sessions, streams, "
                                         "loggers)",
                                   "view");
  if (view == "actor") {
    auto which = query_or(ex, "actor");
    auto slash = which.rfind('/');
    if (slash == std::string::npos || !parse_id(which.substr(slash + 1)))
      co_return co_await reply_error(ex, 400, "invalid_request", "actor must be <node>/<id>",
                                     "actor");
  }
  auto first = co_await view_json(ctx, view, ex);
  auto& sock = ex.io.socket;
  ex.keep_alive = false;
  auto write_timeout = std::chrono::seconds(5);
  if (!co_await write_sse_head(sock, write_timeout))
    co_return;
  net::steady_timer timer{co_await net::this_coro::executor};
  std::string frame;
  for (uint64_t seq = 1;; ++seq) {
    frame.clear();
    if (first) {
      frame += "id: " + std::to_string(seq) + "\nevent: " + view + "\ndata: " + *first + "\n\n";
    } else {
      json_writer w;
      w.begin_object().field("message", error_message(first.error())).end_object();
      frame += "event: error\ndata: " + w.take() + "\n\n";
    }
    if (!co_await write_sse_chunk(sock, frame, write_timeout))
      co_return;  // the console went away
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(net::as_tuple(net::use_awaitable));
    first = co_await view_json(ctx, view, ex);
  }
}

}  // namespace ragtor::http
