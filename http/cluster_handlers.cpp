// GET /api/v1/cluster: the members this node knows of (docs/cluster.md),
// itself first; a single node is a cluster of one.
#include <chrono>

#include "http/caf_asio.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::http {

handler_result cluster_members(handler_context& ctx, exchange& ex) {
  auto members = co_await async_request<std::vector<member_info>>(
      ctx.sys, ctx.settings.cluster, store_timeout, atom::members_v);
  if (!members)
    co_return co_await reply_caf_error(ex, members.error());
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  auto list = [](json_writer& w, std::string_view text) {
    w.begin_array();
    size_t pos = 0;
    while (pos < text.size()) {
      auto end = text.find(',', pos);
      if (end == std::string_view::npos)
        end = text.size();
      if (end > pos)
        w.value(text.substr(pos, end - pos));
      pos = end + 1;
    }
    w.end_array();
  };
  json_writer w;
  w.begin_object().field("self", members->empty() ? std::string{} : members->front().name);
  w.key("nodes").begin_array();
  for (auto& m : *members) {
    w.begin_object().field("name", m.name).field("address", m.address);
    w.key("roles");
    list(w, m.roles);
    w.key("kbs");
    list(w, m.kbs);
    w.field("status", m.status)
        .field("heartbeat_age_ms", std::max<int64_t>(0, now - m.heartbeat_at_ms))
        .field("started_at_ms", m.started_at_ms)
        .end_object();
  }
  w.end_array().end_object();
  co_await reply_json(ex, 200, w.take());
}

}  // namespace ragtor::http
