// /api/v1/conversations: a user's conversations newest first, a
// conversation's message pages and rolling summary, and deletion. The owner
// is the user_id query parameter; someone else's conversation is a 404.
#include <caf/actor_system.hpp>

#include "http/caf_asio.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "protocol/api_json.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::http {

namespace {

// The integer query parameter `name` (`fallback` when absent); nullopt
// after answering 400.
boost::asio::awaitable<std::optional<int64_t>> int_query(exchange& ex, std::string_view name,
                                                         int64_t fallback, int64_t min,
                                                         int64_t max) {
  auto& query = ex.target.query;
  auto i = query.find(name);
  if (i == query.end())
    co_return fallback;
  auto v = int_param(i->second, min, max);
  if (!v)
    co_await reply_request_error(
        ex, make_request_error("invalid_request",
                               "parameter " + quoted_field(name) + " must be an integer in ["
                                   + std::to_string(min) + ", " + std::to_string(max) + "]",
                               name));
  co_return v;
}

// A page cursor is "<updated_at>:<conversation id>".
bool is_valid_cursor(std::string_view cursor) {
  auto colon = cursor.find(':');
  return colon != std::string_view::npos && int_param(cursor.substr(0, colon), 0, INT64_MAX)
         && is_valid_id(cursor.substr(colon + 1), 64);
}

}  // namespace

handler_result list_conversations(handler_context& ctx, exchange& ex) {
  auto user = co_await user_param(ctx, ex);
  if (user.empty())
    co_return;
  auto limit = co_await int_query(ex, "limit", 20, 1, 100);
  if (!limit)
    co_return;
  std::string cursor;
  if (auto i = ex.target.query.find("cursor"); i != ex.target.query.end()) {
    cursor = i->second;
    if (!is_valid_cursor(cursor))
      co_return co_await reply_error(ex, 400, "invalid_request", "malformed cursor", "cursor");
  }
  auto page = co_await async_request<conversation_page>(ctx.sys, ctx.store, store_timeout,
                                                        atom::list_convs_v, user,
                                                        static_cast<int32_t>(*limit), cursor);
  if (!page)
    co_return co_await reply_caf_error(ex, page.error());
  co_await reply_json(ex, 200, conversation_page_json(*page));
}

handler_result conversation_messages(handler_context& ctx, exchange& ex) {
  auto user = co_await user_param(ctx, ex);
  if (user.empty())
    co_return;
  auto limit = co_await int_query(ex, "limit", 50, 1, 200);
  if (!limit)
    co_return;
  auto before = co_await int_query(ex, "before", 0, 1, INT64_MAX);
  if (!before)
    co_return;
  const auto& id = ex.params["conversation"];
  // One extra message tells whether an older page exists.
  auto msgs = co_await async_request<std::vector<stored_message>>(
      ctx.sys, ctx.store, store_timeout, atom::messages_v, id, user,
      static_cast<int32_t>(*limit + 1), *before);
  if (!msgs)
    co_return co_await reply_caf_error(ex, msgs.error());
  bool has_more = msgs->size() > static_cast<size_t>(*limit);
  if (has_more)
    msgs->erase(msgs->begin());
  co_await reply_json(ex, 200, messages_json(id, *msgs, has_more));
}

// GET /api/v1/conversations/{id}/summary?user_id=: the rolling summary
// of everything older than the recent window (version 0: none yet). With
// wait_version=N it first waits (at most timeout_ms, default 10 s) until
// a summary of version N exists: summaries are written in the background.
handler_result conversation_summary(handler_context& ctx, exchange& ex) {
  auto user = co_await user_param(ctx, ex);
  if (user.empty())
    co_return;
  auto wait_version = co_await int_query(ex, "wait_version", 0, 0, INT64_MAX);
  if (!wait_version)
    co_return;
  auto timeout_ms = co_await int_query(ex, "timeout_ms", 10000, 0, 60000);
  if (!timeout_ms)
    co_return;
  const auto& id = ex.params["conversation"];
  if (*wait_version > 0 && ctx.settings.summarizer) {
    // Ownership first: nobody waits on someone else's conversation.
    auto owned = co_await async_request<summary_record>(ctx.sys, ctx.store, store_timeout,
                                                        atom::summary_v, id, user);
    if (!owned)
      co_return co_await reply_caf_error(ex, owned.error());
    auto timeout = std::chrono::milliseconds{*timeout_ms};
    auto waited = co_await async_request<bool>(
        ctx.sys, ctx.settings.summarizer, timeout + std::chrono::seconds(30), atom::summary_v, id,
        *wait_version, static_cast<int32_t>(*timeout_ms));
    if (!waited)
      co_return co_await reply_caf_error(ex, waited.error());
  }
  auto rec = co_await async_request<summary_record>(ctx.sys, ctx.store, store_timeout,
                                                    atom::summary_v, id, user);
  if (!rec)
    co_return co_await reply_caf_error(ex, rec.error());
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
  co_await reply_json(ex, 200, w.take());
}

handler_result delete_conversation(handler_context& ctx, exchange& ex) {
  auto user = co_await user_param(ctx, ex);
  if (user.empty())
    co_return;
  const auto& id = ex.params["conversation"];
  auto deleted = co_await async_request<bool>(ctx.sys, ctx.store, store_timeout,
                                              atom::delete_conv_v, id, user);
  if (!deleted)
    co_return co_await reply_caf_error(ex, deleted.error());
  json_writer w;
  w.begin_object().field("status", "deleted").field("conversation_id", id).end_object();
  co_await reply_json(ex, 200, w.take());
}

}  // namespace ragtor::http
