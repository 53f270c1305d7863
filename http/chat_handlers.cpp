// The chat endpoints: a turn streamed as SSE (/api/v1/chat/stream) or
// answered as one JSON object (/api/v1/chat), stopping a running turn,
// clearing a conversation and message feedback. A turn is opened at the
// session manager; its stream actor sends event batches to a per-request
// sink actor, which hands them to this connection's coroutine through a
// channel. The client grants credit one batch at a time.
#include <random>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "http/caf_asio.hpp"
#include "http/chat_reply.hpp"
#include "http/connection_io.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "http/sse_writer.hpp"
#include "protocol/api_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/stream_events.hpp"

namespace ragtor::http {

namespace net = boost::asio;

namespace {

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

// Reads until the client closes; any read result ends the wait.
net::awaitable<void> watch_disconnect(net::ip::tcp::socket& sock, std::shared_ptr<event_channel> ch,
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

// Collects the turn and answers with one JSON object; false if the channel
// closed first (the client went away).
net::awaitable<bool> collect_json(handler_context& ctx, exchange& ex, event_channel& ch,
                                  const std::function<void()>& batch_received,
                                  const chat_request& req) {
  chat_reply reply;
  while (!reply.done()) {
    std::optional<event_batch> batch;
    try {
      batch = co_await next_batch(ch, ctx.settings.turn_timeout);
    } catch (const boost::system::system_error&) {
      co_return false;
    }
    if (!batch)
      continue;
    for (auto& ev : *batch)
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
// The connection is closed afterwards.
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
  if (chat_req.request_id.empty())
    chat_req.request_id = new_request_id();
  auto ticket = co_await async_request<turn_ticket>(
      ctx.sys, ctx.sessions, caf::timespan{settings.turn_timeout}, atom::open_turn_v, chat_req);
  if (!ticket) {
    spdlog::warn("http: request {} refused: {}", chat_req.request_id,
                 ctx.sys.render(ticket.error()));
    co_return co_await reply_caf_error(ex, ticket.error());
  }
  auto executor = co_await net::this_coro::executor;
  auto ch = std::make_shared<event_channel>(executor, channel_capacity);
  auto sink = spawn_sink(ctx.sys, ch, ticket->stream);
  auto turn = ticket->stream;
  caf::anon_send(turn, atom::subscribe_v, sink);
  caf::anon_send(turn, atom::demand_v, sink, static_cast<int32_t>(settings.initial_credit));
  std::function<void()> grant_one = [turn, sink] {
    caf::anon_send(turn, atom::demand_v, sink, int32_t{1});
  };

  // Watch the socket: a client that goes away cancels its turn at once.
  auto& sock = ex.io.socket;
  auto finished = std::make_shared<bool>(false);
  net::co_spawn(executor, watch_disconnect(sock, ch, finished), net::detached);

  bool done = false;
  if (sse)
    done = co_await write_sse(sock, *ch, sse_timing{settings.heartbeat, settings.write_timeout},
                              chat_req.request_id, grant_one);
  else
    done = co_await collect_json(ctx, ex, *ch, grant_one, chat_req);
  *finished = true;
  if (!done)
    caf::anon_send(turn, atom::cancel_v);
  ch->close();
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  boost::system::error_code ignored;
  sock.cancel(ignored);
}

}  // namespace

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
