#include "http/turn_follow.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_companion.hpp>
#include <caf/exit_reason.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "http/caf_asio.hpp"
#include "http/connection_io.hpp"
#include "http/handler_context.hpp"
#include "persistence/store_backend.hpp"
#include "protocol/event_feed.hpp"
#include "protocol/stream_events.hpp"

namespace ragtor::http {

namespace net = boost::asio;

namespace {

constexpr size_t channel_capacity = 256;  // > initial credit: try_send never fails on "full"

// The connection's pipe as the turn's in-process feed (event_feed).
struct channel_feed final : event_feed {
  explicit channel_feed(std::shared_ptr<event_pipe> p) : pipe(std::move(p)) {}
  bool deliver(event_batch&& batch) override {
    // False only if the connection closed the channel.
    return pipe->deliver(std::move(batch));
  }
  std::shared_ptr<event_pipe> pipe;
};

// The turn's subscriber, one per request: an actor that is never
// scheduled (a CAF actor_companion, whose mailbox is a callback run on the
// sender's thread). A turn in this process hands its batches to `feed`
// itself; one on another node sends them here and they go into the same
// channel. If the stream dies without a `done` (e.g. a retry joined a turn
// that just ended, or its node went down), it ends the client's stream
// itself with error + done. (It was a scheduled actor: a spawn, a run for
// its start, one for the stream's end and one for its own per request;
// docs/performance.md, "One bridge per I/O thread".)
class turn_sink {
public:
  turn_sink(caf::actor_system& sys, std::shared_ptr<channel_feed> feed, const stream_actor& stream) {
    // Messages come from the stream's thread (or the middleman's), one
    // sender at a time in practice; the lock keeps them in order anyway.
    self_ = spawn_companion(sys, [feed, mx = std::make_shared<std::mutex>()](caf::mailbox_element_ptr ptr) {
      std::lock_guard lock{*mx};
      auto& msg = ptr->content();
      if (msg.match_elements<caf::atom_value, event_batch>()
          && msg.get_as<caf::atom_value>(0) == atom::events::value) {
        feed->hand_over(std::move(msg.get_mutable_as<event_batch>(1)));
      } else if (msg.match_elements<caf::down_msg>() && !feed->got_done) {
        done_content partial;
        partial.partial = true;
        partial.finish_reason = "cancelled";
        // A turn owned by another frontend whose node went away (the
        // connection's proxies die with this reason).
        bool node_lost = msg.get_as<caf::down_msg>(0).reason
                         == caf::exit_reason::remote_link_unreachable;
        event_batch tail{
            make_error_event("unavailable", node_lost
                                                ? "the node running this turn went down"
                                                : "the turn ended before it could be followed"),
            make_done_event(partial)};
        feed->deliver(std::move(tail));
      }
    });
    as_companion(self_)->monitor(stream);
  }

  turn_sink(const turn_sink&) = delete;
  turn_sink& operator=(const turn_sink&) = delete;
  ~turn_sink() { close(); }

  event_sink_actor handle() const { return caf::actor_cast<event_sink_actor>(self_); }
  caf::actor_control_block* ctrl() const { return caf::actor_cast<caf::actor_control_block*>(self_); }

  // Takes no more messages and terminates: the turn sees its subscriber go.
  // Also when the connection's coroutine ends any other way (its frame
  // destroyed): the server's io_contexts go before the actor system.
  void close() {
    if (self_)
      end_companion(self_);
    self_ = nullptr;
  }

private:
  caf::strong_actor_ptr self_;  // null once closed
};

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
      // Wakes the writer, which returns false: cancel() completes a pending
      // receive (close() alone does not), close() fails later ones.
      ch->cancel();
      ch->close();
      co_return;
    }
    // Extra bytes (pipelining) are ignored: the connection closes anyway.
  }
}

}  // namespace

std::string new_request_id() {
  return "req_" + new_id();
}

sse_timing sse_timing_of(const server_settings& s) {
  return sse_timing{s.heartbeat, s.write_timeout};
}

net::awaitable<bool> follow_turn(handler_context& ctx, exchange& ex, stream_actor turn,
                                 uint64_t after, on_hangup hangup, turn_writer write) {
  ex.keep_alive = false;
  auto executor = co_await net::this_coro::executor;
  auto pipe = std::make_shared<event_pipe>(
      executor, channel_capacity,
      ctx.settings.direct_writes ? event_pipe::default_direct_after
                                 : std::chrono::nanoseconds::max());
  auto ch = std::shared_ptr<event_channel>(pipe, &pipe->channel());
  auto feed = std::make_shared<channel_feed>(pipe);
  turn_sink subscriber{ctx.sys, feed, turn};
  auto sink = subscriber.handle();
  // Registered until the writer is done, however it ends.
  struct feed_registration {
    caf::actor_control_block* sink;
    ~feed_registration() { unregister_local_feed(sink); }
  } registration{subscriber.ctrl()};
  register_local_feed(registration.sink, feed);
  caf::anon_send(turn, atom::subscribe_v, sink, after);
  caf::anon_send(turn, atom::demand_v, sink, static_cast<int32_t>(ctx.settings.initial_credit));
  // Credit goes back in steps of half the initial credit, not one message
  // per batch written: the turn still has the other half to send with
  // meanwhile, and a slow model's stream (one batch per token) costs the
  // turn's actor one message per token instead of two.
  auto step = std::max<int32_t>(1, static_cast<int32_t>(ctx.settings.initial_credit) / 2);
  // Called by the connection's writer and, for batches the pipe wrote
  // itself, by the turn's thread: the count is atomic, and whoever brings
  // it to a step sends what is owed.
  auto owed = std::make_shared<std::atomic<int32_t>>(0);
  std::function<void()> grant = [turn, sink, step, owed]() {
    if (owed->fetch_add(1) + 1 < step)
      return;
    if (auto n = owed->exchange(0); n > 0)
      caf::anon_send(turn, atom::demand_v, sink, n);
  };

  // Watch the socket: a client that goes away ends the writer at once.
  auto& sock = ex.io.socket;
  auto finished = std::make_shared<bool>(false);
  net::co_spawn(executor, watch_disconnect(sock, ch, finished), net::detached);

  bool done = co_await write(*pipe, grant);
  *finished = true;
  if (!done && hangup == on_hangup::cancel)
    caf::anon_send(turn, atom::cancel_v);
  ch->close();
  // The turn sees its subscriber go: without others it detaches (or was
  // cancelled above).
  subscriber.close();
  boost::system::error_code ignored;
  sock.cancel(ignored);
  co_return done;
}

}  // namespace ragtor::http
