#include "http/sse_writer.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "protocol/metrics.hpp"
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

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

// One heartbeat timer per stream instead of one per wait for events: it
// fires `every` after the latest write and, if nothing was written since,
// marks a ping due and wakes the writer's pending receive (cancel() ends
// it with channel_cancelled). Shared with the timer's handler, which runs
// on the writer's thread and touches nothing once the writer is `over`.
// The latest write is the pipe's: a direct write (event_pipe::deliver)
// counts too.
struct heartbeat {
  heartbeat(net::any_io_executor ex, std::atomic<int64_t>& last) : timer{std::move(ex)}, last_write{last} {}
  net::steady_timer timer;
  std::atomic<int64_t>& last_write;
  bool due = false;
  bool over = false;
};

void arm(std::shared_ptr<heartbeat> hb, event_channel& ch, std::chrono::seconds every) {
  auto every_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(every).count();
  hb->timer.expires_at(steady::time_point{std::chrono::nanoseconds{hb->last_write.load() + every_ns}});
  hb->timer.async_wait([hb, &ch, every, every_ns](boost::system::error_code ec) {
    if (ec || hb->over)
      return;
    if (now_ns() >= hb->last_write.load() + every_ns) {
      hb->due = true;
      hb->last_write = now_ns();
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

bool holds_done(const event_batch& batch) {
  for (auto& ev : batch)
    if (ev.kind == event_kind::done)
      return true;
  return false;
}

}  // namespace

// write_sse_as's side of an event_pipe: attach while it writes, idle while
// it waits, and what direct writes left.
struct pipe_writer {
  static void attach(event_pipe& p, int fd, const sse_formatter& format,
                     std::shared_ptr<std::function<void()>> written) {
    std::lock_guard lock{p.mu_};
    p.fd_ = fd;
    p.format_ = &format;
    p.written_ = std::move(written);
    p.last_write_ns_ = now_ns();
  }
  // Before the socket can close: deliver() writes to it no more.
  static void detach(event_pipe& p) {
    std::lock_guard lock{p.mu_};
    p.fd_ = -1;
    p.idle_ = false;
    p.format_ = nullptr;
    p.written_.reset();
    p.pending_.clear();
    p.pending_batches_ = 0;
  }
  // Whether the writer may wait for a batch: nothing left by direct writes
  // and nothing queued. Then the pipe writes batches itself meanwhile.
  static bool go_idle(event_pipe& p) {
    std::lock_guard lock{p.mu_};
    // ready() is also true for a closed channel, whose receive then fails.
    if (!p.pending_.empty() || (p.ch_.ready() && p.ch_.is_open()))
      return false;
    p.idle_ = true;
    return true;
  }
  static std::atomic<int64_t>& last_write(event_pipe& p) { return p.last_write_ns_; }
  static void busy(event_pipe& p) {
    std::lock_guard lock{p.mu_};
    p.idle_ = false;
  }
  // Frames `batches` after what direct writes left (appended to `out`);
  // returns the batches this write carries (for batch_written).
  static size_t frame(event_pipe& p, const sse_formatter& format,
                      const std::vector<event_batch>& batches, std::string& out) {
    std::string frames;
    size_t n = 0;
    std::lock_guard lock{p.mu_};
    out += p.pending_;
    p.pending_.clear();
    n += std::exchange(p.pending_batches_, 0);
    for (auto& b : batches) {
      if (b.empty())
        continue;  // the wake-up a direct write that did not fit sends
      format(frames, b);
      ++n;
    }
    append_chunk(out, frames);
    return n;
  }
};

bool event_pipe::deliver(event_batch&& batch) {
  std::shared_ptr<std::function<void()>> written;
  {
    std::lock_guard lock{mu_};
    if (fd_ < 0 || !idle_ || holds_done(batch) || now_ns() - last_write_ns_ < direct_after_.count()) {
      if (fd_ >= 0)
        idle_ = false;  // the writer has a batch coming: no direct write may overtake it
      return ch_.try_send(boost::system::error_code{}, std::move(batch));
    }
    std::string frames, chunk;
    (*format_)(frames, batch);
    append_chunk(chunk, frames);
    size_t sent = 0;
    if (!chunk.empty()) {
      // MSG_DONTWAIT: the turn's thread never blocks on a client. An error
      // (the client went away) leaves the chunk to the writer, whose write
      // fails and ends the stream as before.
      auto n = ::send(fd_, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      sent = n > 0 ? static_cast<size_t>(n) : 0;
    }
    if (sent < chunk.size()) {
      pending_.append(chunk, sent);
      ++pending_batches_;
      idle_ = false;
      return ch_.try_send(boost::system::error_code{}, event_batch{});  // wakes the writer
    }
    last_write_ns_ = now_ns();
    metrics::global().sse_direct_writes.inc();
    written = written_;
  }
  (*written)();  // the turn's credit (thread-safe: follow_turn's grant)
  return true;
}

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

net::awaitable<bool> write_sse(net::ip::tcp::socket& sock, event_pipe& pipe, sse_timing timing,
                               std::string_view request_id, std::function<void()> batch_written) {
  auto format = [request_id](std::string& out, const event_batch& batch) {
    for (auto& ev : batch)
      if (ev.visible)
        append_sse_frame(out, ev, request_id, ev.seq);
  };
  co_return co_await write_sse_as(sock, pipe, timing, format, true, std::move(batch_written));
}

net::awaitable<bool> write_sse_as(net::ip::tcp::socket& sock, event_pipe& pipe, sse_timing timing,
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
  // parallel wait per token cost more than the write itself. While this
  // writer waits, the turn's thread writes a batch itself
  // (event_pipe::deliver) when the socket takes it all.
  auto& ch = pipe.channel();
  std::string out{sse_head};
  if (send_retry)
    append_chunk(out, "retry: " + std::to_string(timing.retry.count()) + "\n\n");
  boost::system::error_code nb;
  sock.non_blocking(true, nb);  // for write_now_or_wait and direct writes; async operations are unaffected
  auto written = std::make_shared<std::function<void()>>(std::move(batch_written));
  pipe_writer::attach(pipe, sock.native_handle(), format, written);
  auto hb = std::make_shared<heartbeat>(co_await net::this_coro::executor,
                                        pipe_writer::last_write(pipe));
  arm(hb, ch, timing.heartbeat);
  struct end_writer {
    event_pipe& pipe;
    std::shared_ptr<heartbeat> hb;
    ~end_writer() {
      pipe_writer::detach(pipe);
      hb->over = true;
      hb->timer.cancel();
    }
  } ending{pipe, hb};
  std::vector<event_batch> got;
  bool first = true;
  for (;;) {
    got.clear();
    bool done = false, closed = false;
    if (!first && !hb->due && pipe_writer::go_idle(pipe)) {
      auto [ec, batch] = co_await ch.async_receive(net::as_tuple(net::use_awaitable));
      pipe_writer::busy(pipe);
      if (!ec) {
        done = holds_done(batch);
        got.push_back(std::move(batch));
      } else if (!hb->due) {
        co_return false;  // channel closed or cancelled: the client went away
      }
    }
    bool ping = std::exchange(hb->due, false);
    first = false;
    while (!done && !closed
           && ch.try_receive([&](boost::system::error_code ec, event_batch batch) {
                if (ec) {
                  closed = true;
                  return;
                }
                done = holds_done(batch);
                got.push_back(std::move(batch));
              })) {
    }
    if (closed)
      co_return false;
    auto taken = pipe_writer::frame(pipe, format, got, out);
    if (ping && out.empty())
      append_chunk(out, ": ping\n\n");
    if (done)
      out += "0\r\n\r\n";
    if (!out.empty() && !co_await write_now_or_wait(sock, out, timing.write_timeout))
      co_return false;
    hb->last_write = now_ns();
    out.clear();
    if (done)
      co_return true;
    for (; taken > 0; --taken)
      (*written)();
  }
}

}  // namespace ragtor::http
