// The chat endpoints: a turn streamed as SSE (/api/v1/chat/stream) or
// answered as one JSON object (/api/v1/chat), stopping a running turn,
// clearing a conversation and message feedback. A turn is opened at the
// session manager; its stream actor sends event batches to a per-request
// sink actor, which hands them to this connection's coroutine through a
// channel. The client grants credit one batch at a time.
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "http/caf_asio.hpp"
#include "protocol/log.hpp"
#include "http/chat_reply.hpp"
#include "http/connection_io.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "http/sse_writer.hpp"
#include "http/turn_follow.hpp"
#include "protocol/api_json.hpp"
#include "protocol/chat_request_json.hpp"
#include "protocol/json_object.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/stream_events.hpp"

namespace ragtor::http {

namespace {
const log::component lg{"http"};
}  // namespace

namespace net = boost::asio;

namespace {

// Collects the turn and answers with one JSON object; false if the channel
// closed first (the client went away).
net::awaitable<bool> collect_json(handler_context& ctx, exchange& ex, event_pipe& pipe,
                                  const std::function<void()>& batch_received,
                                  const chat_request& req) {
  chat_reply reply;
  while (!reply.done()) {
    event_batch batch;
    try {
      batch = co_await next_batch(pipe.channel());
    } catch (const boost::system::system_error&) {
      co_return false;
    }
    for (auto& ev : batch)
      reply.add(ev);
    if (!reply.done())
      batch_received();
  }
  try {
    co_await reply_json(ex, reply.status(), reply.json(req.request_id, req.debug));
  } catch (const boost::system::system_error&) {
  }
  co_return true;
}

// Both chat endpoints run the same turn; `sse` selects the wire format.
// The connection is closed afterwards. A client that goes away detaches
// the turn: it runs on for server.detach_grace_ms, waiting for a re-attach.
net::awaitable<void> chat(handler_context& ctx, exchange& ex, bool sse) {
  flight_counter::guard in_flight{ctx.chats};
  ex.keep_alive = false;
  auto& settings = ctx.settings;
  auto parsed = parse_chat_request(ex.body, settings.limits);
  if (!parsed.ok)
    co_return co_await reply_request_error(ex, parsed.error);
  auto chat_req = std::move(parsed.request);
  if (!chat_req.kb_prefix.empty() && settings.kb_exists && !settings.kb_exists(chat_req.kb_prefix))
    co_return co_await reply_error(
        ex, 404, "not_found", "unknown knowledge base \"" + chat_req.kb_prefix + "\"", "kb_prefix");
  if (chat_req.request_id.empty()) {
    chat_req.request_id = new_request_id();
    chat_req.fresh_request_id = true;
  }
  auto ticket = co_await async_request<turn_ticket>(
      ctx.sys, ctx.sessions, caf::timespan{settings.turn_timeout}, atom::open_turn_v, chat_req);
  if (!ticket) {
    lg->warn("http: request {} refused: {}", chat_req.request_id,
                 ctx.sys.render(ticket.error()));
    co_return co_await reply_caf_error(ex, ticket.error());
  }
  auto& sock = ex.io.socket;
  co_await follow_turn(ctx, ex, ticket->stream, 0, on_hangup::detach,
                       [&](event_pipe& pipe, const std::function<void()>& taken) {
                         if (sse)
                           return write_sse(sock, pipe, sse_timing_of(settings),
                                            chat_req.request_id, taken);
                         return collect_json(ctx, ex, pipe, taken, chat_req);
                       });
}

// The seq a re-attaching client saw last: the Last-Event-ID header
// ("<request_id>:<seq>" as sent, or a bare seq), else ?after=; 0 = none.
std::optional<uint64_t> last_seen_seq(exchange& ex) {
  std::string_view text = ex.header ? ex.header("Last-Event-ID") : std::string_view{};
  if (!text.empty()) {
    if (auto colon = text.rfind(':'); colon != std::string_view::npos)
      text = text.substr(colon + 1);
  } else if (auto i = ex.target.query.find("after"); i != ex.target.query.end()) {
    text = i->second;
  } else {
    return 0;
  }
  auto v = int_param(text, 0, INT64_MAX);
  if (!v)
    return std::nullopt;
  return static_cast<uint64_t>(*v);
}

// A turn that is no longer running, replayed from the store: the answer
// (unless the client saw part of it: then `done` alone, which carries the
// whole answer) and `done`; a partial answer ends with error + done.
event_batch stored_turn_events(const stored_message& m, uint64_t after) {
  event_batch out;
  auto next = after;
  auto push = [&](stream_event ev) {
    ev.seq = ++next;
    out.push_back(std::move(ev));
  };
  if (after == 0) {
    push(make_start_event());
    if (!m.content.empty())
      push(make_token_event(m.content));
  }
  if (!m.completed)
    push(make_error_event("cancelled", "the turn ended before it completed; its partial answer was stored"));
  done_content c;
  c.answer = m.content;
  c.conversation_id = m.conversation_id;
  c.message_id = m.message_id;
  c.citations_raw = m.citations_json;
  c.partial = !m.completed;
  c.finish_reason = m.completed ? "stop" : "cancelled";
  push(make_done_event(c));
  return out;
}

}  // namespace

// GET /api/v1/chat/stream/{request_id}?user_id=U: re-attaches to a turn.
handler_result chat_resume(handler_context& ctx, exchange& ex) {
  flight_counter::guard in_flight{ctx.chats};
  ex.keep_alive = false;
  auto user = co_await user_param(ctx, ex);
  if (user.empty())
    co_return;
  const auto& request_id = ex.params["request_id"];
  if (!is_valid_id(request_id, ctx.settings.limits.max_id_chars))
    co_return co_await reply_request_error(
        ex, id_field_error("request_id", ctx.settings.limits.max_id_chars));
  auto after = last_seen_seq(ex);
  if (!after)
    co_return co_await reply_error(ex, 400, "invalid_request",
                                   "Last-Event-ID (or after=) must be \"<request_id>:<seq>\" or a seq",
                                   "after");
  auto& sock = ex.io.socket;
  auto timing = sse_timing_of(ctx.settings);
  auto running = co_await async_request<stream_actor>(ctx.sys, ctx.sessions, store_timeout,
                                                      atom::attach_v, request_id, user);
  if (running && *running) {
    co_await follow_turn(ctx, ex, *running, *after, on_hangup::detach,
                         [&](event_pipe& pipe, const std::function<void()>& taken) {
                           return write_sse(sock, pipe, timing, request_id, taken);
                         });
    co_return;
  }
  // Not running (finished, or the process restarted): the stored answer.
  auto stored = co_await async_request<stored_message>(ctx.sys, ctx.store, store_timeout,
                                                       atom::find_turn_v, request_id, user);
  if (!stored) {
    if (code_of(stored.error()) == errc::not_found)
      co_return co_await reply_error(ex, 404, "not_found",
                                     "no turn \"" + request_id + "\" for this user");
    co_return co_await reply_caf_error(ex, stored.error());
  }
  auto executor = co_await net::this_coro::executor;
  event_pipe pipe{executor, 1};
  pipe.channel().try_send(boost::system::error_code{}, stored_turn_events(*stored, *after));
  co_await write_sse(sock, pipe, timing, request_id, [] {});
}

handler_result chat_stream(handler_context& ctx, exchange& ex) {
  co_await chat(ctx, ex, true);
}

handler_result chat_json(handler_context& ctx, exchange& ex) {
  co_await chat(ctx, ex, false);
}

handler_result chat_stop(handler_context& ctx, exchange& ex) {
  auto parsed = parse_stop_request(ex.body, ctx.settings.limits);
  if (!parsed.ok)
    co_return co_await reply_request_error(ex, parsed.error);
  auto found = co_await async_request<bool>(ctx.sys, ctx.sessions, store_timeout, atom::stop_v,
                                            parsed.value.request_id, parsed.value.user_id);
  if (!found)
    co_return co_await reply_caf_error(ex, found.error());
  json_writer w;
  w.begin_object().field("status", *found ? "stopped" : "not_found").end_object();
  co_await reply_json(ex, 200, w.take());
}

handler_result clear_conversation(handler_context& ctx, exchange& ex) {
  auto parsed = parse_clear_request(ex.body, ctx.settings.limits);
  if (!parsed.ok)
    co_return co_await reply_request_error(ex, parsed.error);
  // Through the session: a turn running on the conversation is cancelled
  // and stored before the clear, so nothing of it lands after it.
  auto cleared = co_await async_request<int64_t>(ctx.sys, ctx.sessions, store_timeout,
                                                 atom::clear_v, parsed.value.user_id,
                                                 parsed.value.session_id);
  if (!cleared)
    co_return co_await reply_caf_error(ex, cleared.error());
  co_await reply_json(ex, 200, clear_json(*cleared));
}

handler_result feedback(handler_context& ctx, exchange& ex) {
  auto parsed = parse_feedback_request(ex.body, ctx.settings.limits);
  if (!parsed.ok)
    co_return co_await reply_request_error(ex, parsed.error);
  auto state = co_await async_request<std::string>(ctx.sys, ctx.store, store_timeout,
                                                   atom::feedback_v, parsed.value);
  if (!state)
    co_return co_await reply_caf_error(ex, state.error());
  json_writer w;
  w.begin_object()
      .field("status", "ok")
      .field("message_id", parsed.value.message_id)
      .field("feedback", *state)
      .end_object();
  co_await reply_json(ex, 200, w.take());
}

}  // namespace ragtor::http
