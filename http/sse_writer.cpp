#include "http/sse_writer.hpp"

#include <cstdio>
#include <memory>
#include <utility>
#include <string>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "protocol/stream_events.hpp"

namespace ragtor::http {

namespace net = boost::asio;
using namespace net::experimental::awaitable_operators;

namespace {

// Writes `data` as it is with a deadline; false if the client is gone or
// stalled.
net::awaitable<bool> write_with_deadline(net::ip::tcp::socket& sock, std::string_view data,
                                         std::chrono::seconds timeout) {
  net::steady_timer timer{co_await net::this_coro::executor};
  timer.expires_after(timeout);
  try {
    // as_tuple: a failed write ends the wait at once (see next_batch).
    auto r = co_await (net::async_write(sock, net::buffer(data), net::as_tuple(net::use_awaitable))
                       || timer.async_wait(net::as_tuple(net::use_awaitable)));
    co_return r.index() == 0 && !std::get<0>(std::get<0>(r));
  } catch (const boost::system::system_error&) {
    co_return false;
  }
}

// Writes `data` at once when the socket takes all of it (the usual case:
// an SSE chunk is small and the client keeps reading), else the rest with
// a deadline. The socket is in non-blocking mode (write_sse_as).
net::awaitable<bool> write_now_or_wait(net::ip::tcp::socket& sock, std::string_view data,
                                       std::chrono::seconds timeout) {
  boost::system::error_code ec;
  auto n = sock.write_some(net::buffer(data), ec);
  if (!ec && n == data.size())
    co_return true;
  if (ec && ec != net::error::would_block && ec != net::error::try_again)
    co_return false;
  co_return co_await write_with_deadline(sock, data.substr(ec ? 0 : n), timeout);
}

using steady = std::chrono::steady_clock;

// One heartbeat timer per stream instead of one per wait for events: it
// fires `every` after the latest write and, if nothing was written since,
// marks a ping due and wakes the writer's pending receive (cancel() ends
// it with channel_cancelled). Shared with the timer's handler, which runs
// on the writer's thread and touches nothing once the writer is `over`.
struct heartbeat {
  explicit heartbeat(net::any_io_executor ex) : timer{std::move(ex)} {}
  net::steady_timer timer;
  steady::time_point last_write = steady::now();
  bool due = false;
  bool over = false;
};

void arm(std::shared_ptr<heartbeat> hb, event_channel& ch, std::chrono::seconds every) {
  hb->timer.expires_at(hb->last_write + every);
  hb->timer.async_wait([hb, &ch, every](boost::system::error_code ec) {
    if (ec || hb->over)
      return;
    if (steady::now() >= hb->last_write + every) {
      hb->due = true;
      hb->last_write = steady::now();
      ch.cancel();
    }
    arm(hb, ch, every);
  });
}

// Written by hand rather than by a Beast serializer: the header never
// changes and the body is chunks we frame ourselves.
constexpr std::string_view sse_head =
    "HTTP/1.1 200 OK\r\n"
    "Server: ragtor\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n"
    "Connection: close\r\n"
    "Transfer-Encoding: chunked\r\n\r\n";

// Appends `data` to `out` as one chunk of a chunked body (nothing when
// empty: an empty chunk would end the body).
void append_chunk(std::string& out, std::string_view data) {
  if (data.empty())
    return;
  char size[24];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<size_t>(n)).append(data).append("\r\n");
}

}  // namespace

net::awaitable<bool> write_sse_head(net::ip::tcp::socket& sock, std::chrono::seconds timeout) {
  co_return co_await write_with_deadline(sock, sse_head, timeout);
}

net::awaitable<bool> write_sse_chunk(net::ip::tcp::socket& sock, std::string_view frames,
                                     std::chrono::seconds timeout) {
  std::string chunk;
  append_chunk(chunk, frames);
  co_return co_await write_with_deadline(sock, chunk, timeout);
}

net::awaitable<event_batch> next_batch(event_channel& ch) {
  co_return co_await ch.async_receive(net::use_awaitable);
}

net::awaitable<bool> write_sse(net::ip::tcp::socket& sock, event_channel& ch, sse_timing timing,
                               std::string_view request_id, std::function<void()> batch_written) {
  auto format = [request_id](std::string& out, const event_batch& batch) {
    bool done = false;
    for (auto& ev : batch) {
      if (ev.visible)
        append_sse_frame(out, ev, request_id, ev.seq);
      done = done || ev.kind == event_kind::done;
    }
    return done;
  };
  co_return co_await write_sse_as(sock, ch, timing, format, true, std::move(batch_written));
}

net::awaitable<bool> write_sse_as(net::ip::tcp::socket& sock, event_channel& ch, sse_timing timing,
                                  sse_formatter format, bool send_retry,
                                  std::function<void()> batch_written) {
  // Every write carries all that is ready: the header and `retry:` go out
  // with the first events already queued, each write takes every batch
  // waiting in the channel, and the last chunk ends the body. One write
  // (and one deadline timer) per burst instead of one per batch — a turn
  // with an instant model is a handful of writes, not twenty.
  //
  // A write goes straight to the socket when it takes it all, and waiting
  // for events needs no timer of its own (heartbeat): a slow model's
  // stream is one small write per token, and a deadline timer and a
  // parallel wait per token cost more than the write itself.
  std::string out{sse_head};
  if (send_retry)
    append_chunk(out, "retry: " + std::to_string(timing.retry.count()) + "\n\n");
  boost::system::error_code nb;
  sock.non_blocking(true, nb);  // for write_now_or_wait; async operations are unaffected
  auto hb = std::make_shared<heartbeat>(co_await net::this_coro::executor);
  arm(hb, ch, timing.heartbeat);
  struct end_heartbeat {
    std::shared_ptr<heartbeat> hb;
    ~end_heartbeat() {
      hb->over = true;
      hb->timer.cancel();
    }
  } ending{hb};
  std::string frames;
  bool first = true;
  for (;;) {
    frames.clear();
    bool done = false, closed = false;
    size_t taken = 0;
    auto take = [&](const event_batch& batch) {
      done = format(frames, batch) || done;
      ++taken;
    };
    if (!first && !hb->due) {
      auto [ec, batch] = co_await ch.async_receive(net::as_tuple(net::use_awaitable));
      if (!ec)
        take(batch);
      else if (!hb->due)
        co_return false;  // channel closed or cancelled: the client went away
    }
    bool ping = std::exchange(hb->due, false);
    first = false;
    while (!done && !closed
           && ch.try_receive([&](boost::system::error_code ec, event_batch batch) {
                ec ? void(closed = true) : take(batch);
              })) {
    }
    if (closed)
      co_return false;
    if (ping && frames.empty())
      frames = ": ping\n\n";
    append_chunk(out, frames);
    if (done)
      out += "0\r\n\r\n";
    if (!out.empty() && !co_await write_now_or_wait(sock, out, timing.write_timeout))
      co_return false;
    hb->last_write = steady::now();
    out.clear();
    if (done)
      co_return true;
    for (; taken > 0; --taken)
      batch_written();
  }
}

}  // namespace ragtor::http
