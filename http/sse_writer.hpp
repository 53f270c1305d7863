// A turn's events on their way to the client: the pipe that carries event
// batches from the turn's thread (any CAF thread) to the connection's
// coroutine, or straight to its socket while that waits, and the SSE
// writer that turns them into a chunked text/event-stream response (DESIGN
// §5.1). A batch is written with one socket write (events are coalesced
// upstream while the client has no credit); silence gets a ": ping"
// comment; a write that does not finish in time cuts a stalled client off.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "protocol/messages.hpp"

namespace ragtor::http {

using event_batch = std::vector<stream_event>;
using event_channel =
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, event_batch)>;

// Appends the SSE text of one batch to `out` (the writer ends the body
// after the batch that holds `done`).
using sse_formatter = std::function<void(std::string& out, const event_batch& batch)>;

// A turn's way to its connection: the channel that carries batches to the
// connection's writer, and, while an SSE writer (write_sse_as) waits for
// one with nothing left to write, the socket itself. deliver() then frames
// the batch and writes it at once from the turn's thread (non-blocking),
// instead of waking the connection's thread to do it: one thread hand-off
// fewer per token of a slow model, and on the first token's path. A batch
// holding `done`, whatever the socket does not take at once, and every
// batch while the writer is busy go through the channel, in order; the
// writer writes what a direct write left first.
//
// Only a batch at least `direct_after` after the connection's last write
// goes straight to the socket. Batches far apart (a slow model's tokens,
// the first token after the model's delay) find the connection's thread
// asleep, and writing them at once saves waking it; a burst of batches (a
// fast model) finds it awake, and there the writer carries several batches
// in one write. At 64 streams of an instant model, writing every batch
// directly cost the turns' threads more than it saved the connections'.
class event_pipe {
public:
  static constexpr std::chrono::nanoseconds default_direct_after = std::chrono::milliseconds{1};

  event_pipe(boost::asio::any_io_executor ex, size_t capacity,
             std::chrono::nanoseconds direct_after = default_direct_after)
      : ch_(std::move(ex), capacity), direct_after_(direct_after) {}

  event_channel& channel() { return ch_; }

  // From the turn's thread (its stream actor, or the sink actor of a turn
  // on another node), batches in order. False when the connection has gone
  // (the batch is dropped).
  bool deliver(event_batch&& batch);

  // Whether a writer waits with nothing left to write (tests).
  bool writer_waiting() {
    std::lock_guard lock{mu_};
    return fd_ >= 0 && idle_;
  }

private:
  friend struct pipe_writer;  // write_sse_as's side, in sse_writer.cpp

  std::mutex mu_;
  event_channel ch_;
  std::chrono::nanoseconds direct_after_;
  int fd_ = -1;          // the socket, while a writer is attached
  bool idle_ = false;    // the writer waits for a batch with nothing left to write
  const sse_formatter* format_ = nullptr;
  std::shared_ptr<std::function<void()>> written_;  // the writer's batch_written
  std::string pending_;   // what direct writes left for the writer to write
  size_t pending_batches_ = 0;
  std::atomic<int64_t> last_write_ns_{0};  // steady_clock, for the heartbeat
};

// Receives the next batch; throws when the channel was closed or
// cancelled (the client went away). No timer: a turn ends itself on its
// own timeout, with error + done.
boost::asio::awaitable<event_batch> next_batch(event_channel& ch);

struct sse_timing {
  std::chrono::seconds heartbeat;      // ": ping" after this much silence
  std::chrono::seconds write_timeout;  // a write taking longer ends the stream
  // Sent once as `retry:`: how long an EventSource waits before it
  // reconnects (with Last-Event-ID) after the connection dropped.
  std::chrono::milliseconds retry{1000};
};

// Writes the response header, `retry:`, and then every batch from `ch` as
// SSE frames (`id: <request_id>:<seq>`, the seq the turn gave the event)
// until `done`, calling `batch_written` after each batch so the turn can
// send more. Returns true once `done` was written, false when the client
// went away, stalled or the channel closed.
boost::asio::awaitable<bool> write_sse(boost::asio::ip::tcp::socket& sock, event_pipe& pipe,
                                       sse_timing timing, std::string_view request_id,
                                       std::function<void()> batch_written);

// The header of a chunked text/event-stream response (Connection: close);
// false when the client is gone or stalled past `timeout`.
boost::asio::awaitable<bool> write_sse_head(boost::asio::ip::tcp::socket& sock,
                                            std::chrono::seconds timeout);
// One chunk of SSE frames, likewise.
boost::asio::awaitable<bool> write_sse_chunk(boost::asio::ip::tcp::socket& sock,
                                             std::string_view frames,
                                             std::chrono::seconds timeout);

// As write_sse, in another dialect of SSE (the OpenAI façade's chunks):
// `format` frames each batch; `retry` is sent only when `send_retry`.
boost::asio::awaitable<bool> write_sse_as(boost::asio::ip::tcp::socket& sock, event_pipe& pipe,
                                          sse_timing timing, sse_formatter format,
                                          bool send_retry, std::function<void()> batch_written);

}  // namespace ragtor::http
