// /api/v1/users/{user}/memory: the editable core-memory profile (GET, PUT);
// /api/v1/users/{user}/memories[/{memory}]: the long-term memories
// extracted from the user's messages (GET lists, DELETE forgets).
#include <caf/actor_system.hpp>

#include "http/caf_asio.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::http {

namespace {

constexpr size_t max_profile_bytes = 16 * 1024;

// The {user} of the path, or "" after answering 400.
boost::asio::awaitable<std::string> user_of_path(handler_context& ctx, exchange& ex) {
  const auto& user = ex.params["user"];
  if (is_valid_id(user, ctx.settings.limits.max_id_chars))
    co_return user;
  co_await reply_request_error(ex, id_field_error("user_id", ctx.settings.limits.max_id_chars));
  co_return std::string{};
}

boost::asio::awaitable<void> reply_profile(exchange& ex, const std::string& user,
                                           const caf::expected<std::string>& profile) {
  if (!profile)
    co_return co_await reply_caf_error(ex, profile.error());
  json_writer w;
  w.begin_object().field("user_id", user).key("profile").raw(*profile).end_object();
  co_await reply_json(ex, 200, w.take());
}

// DELETE of all the user's memories (`id` empty) or of one.
boost::asio::awaitable<void> forget(handler_context& ctx, exchange& ex, const std::string& id) {
  auto user = co_await user_of_path(ctx, ex);
  if (user.empty())
    co_return;
  auto n = co_await async_request<int64_t>(ctx.sys, ctx.store, store_timeout, atom::mem_delete_v,
                                           user, id);
  if (!n)
    co_return co_await reply_caf_error(ex, n.error());
  if (!id.empty() && *n == 0)
    co_return co_await reply_error(ex, 404, "not_found", "no such memory");
  json_writer w;
  w.begin_object().field("deleted", *n).end_object();
  co_await reply_json(ex, 200, w.take());
}

}  // namespace

handler_result get_core_memory(handler_context& ctx, exchange& ex) {
  auto user = co_await user_of_path(ctx, ex);
  if (user.empty())
    co_return;
  auto profile = co_await async_request<std::string>(ctx.sys, ctx.store, store_timeout,
                                                     atom::core_mem_v, user);
  co_await reply_profile(ex, user, profile);
}

handler_result put_core_memory(handler_context& ctx, exchange& ex) {
  auto user = co_await user_of_path(ctx, ex);
  if (user.empty())
    co_return;
  auto minified = minify_json_object(ex.body, max_profile_bytes);
  if (!minified.ok)
    co_return co_await reply_request_error(ex, minified.error);
  auto profile = co_await async_request<std::string>(ctx.sys, ctx.store, store_timeout,
                                                     atom::core_mem_v, user, minified.value);
  co_await reply_profile(ex, user, profile);
}

handler_result list_memories(handler_context& ctx, exchange& ex) {
  auto user = co_await user_of_path(ctx, ex);
  if (user.empty())
    co_return;
  auto list = co_await async_request<std::vector<memory_record>>(ctx.sys, ctx.store, store_timeout,
                                                                 atom::mem_list_v, user);
  if (!list)
    co_return co_await reply_caf_error(ex, list.error());
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
  co_await reply_json(ex, 200, w.take());
}

handler_result delete_memories(handler_context& ctx, exchange& ex) {
  co_await forget(ctx, ex, std::string{});
}

handler_result delete_memory(handler_context& ctx, exchange& ex) {
  co_await forget(ctx, ex, ex.params["memory"]);
}

}  // namespace ragtor::http
