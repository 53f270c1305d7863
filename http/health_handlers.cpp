// GET /healthz: the process serves HTTP.
// GET /readyz: it can serve turns — the store answers a query, the KBs'
// indexes are loaded, and in a cluster, when other members are known, at
// least one of them is up. 503 with the failing check otherwise. Each
// check waits at most readiness_timeout, so a stuck store shows as not
// ready instead of hanging the probe.
#include <chrono>

#include "http/caf_asio.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "retrieval/kb_catalog.hpp"

namespace ragtor::http {

namespace {

constexpr auto readiness_timeout = std::chrono::seconds(2);

}  // namespace

handler_result health(handler_context&, exchange& ex) {
  json_writer w;
  w.begin_object().field("status", "ok").end_object();
  co_await reply_json(ex, 200, w.take());
}

handler_result ready(handler_context& ctx, exchange& ex) {
  bool ok = true;
  std::string store = "ok";
  if (auto pong = co_await async_request<bool>(ctx.sys, ctx.store, readiness_timeout, atom::ping_v);
      !pong) {
    ok = false;
    store = error_message(pong.error());
  }
  uint64_t kbs = ctx.settings.catalog ? ctx.settings.catalog->names().size() : 0;
  std::string cluster = "single node";
  if (ctx.settings.cluster) {
    auto members = co_await async_request<std::vector<member_info>>(
        ctx.sys, ctx.settings.cluster, readiness_timeout, atom::members_v);
    if (!members) {
      ok = false;
      cluster = error_message(members.error());
    } else if (members->size() > 1) {
      size_t up = 0;
      for (size_t i = 1; i < members->size(); ++i)  // the node itself comes first
        up += (*members)[i].status == "up";
      cluster = up > 0 ? "joined" : "no other member is up";
      ok = ok && up > 0;
    }
  }
  json_writer w;
  w.begin_object().field("status", ok ? "ready" : "not_ready");
  w.key("checks")
      .begin_object()
      .field("store", store)
      .field("kbs", kbs)
      .field("cluster", cluster)
      .end_object();
  w.end_object();
  co_await reply_json(ex, ok ? 200 : 503, w.take());
}

}  // namespace ragtor::http
