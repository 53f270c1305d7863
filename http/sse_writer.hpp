// A turn's events on their way to the client: the channel that carries
// event batches from the turn's sink actor (any CAF thread) to the
// connection's coroutine, and the SSE writer that turns them into a chunked
// text/event-stream response (DESIGN §5.1). A batch is written with one
// socket write (events are coalesced upstream while the client has no
// credit); silence gets a ": ping" comment; a write that does not finish in
// time cuts a stalled client off.
#pragma once

#include <chrono>
#include <functional>
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
boost::asio::awaitable<bool> write_sse(boost::asio::ip::tcp::socket& sock, event_channel& ch,
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

// Appends the SSE text of one batch to `out`; returns true when the batch
// ended the stream (it held `done`).
using sse_formatter = std::function<bool(std::string& out, const event_batch& batch)>;

// As write_sse, in another dialect of SSE (the OpenAI façade's chunks):
// `format` frames each batch; `retry` is sent only when `send_retry`.
boost::asio::awaitable<bool> write_sse_as(boost::asio::ip::tcp::socket& sock, event_channel& ch,
                                          sse_timing timing, sse_formatter format,
                                          bool send_retry, std::function<void()> batch_written);

}  // namespace ragtor::http
