// Following a running turn from a connection: a per-request sink actor
// subscribes to the turn's stream actor and hands event batches to the
// connection's coroutine through a channel; the client grants credit one
// batch at a time, and a client that hangs up closes the channel. Used by
// the chat endpoints, re-attaching (GET /api/v1/chat/stream/{id}) and the
// OpenAI-compatible façade, each with its own writer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "http/server.hpp"
#include "http/sse_writer.hpp"
#include "protocol/actors.hpp"

namespace ragtor::http {

struct handler_context;
struct exchange;

// Writes what arrives through the pipe in its own format until `done`;
// calls `batch_taken` after each batch so the turn sends the next (from
// the turn's thread too, when the pipe wrote a batch itself: it is
// thread-safe). Returns true once `done` went out, false when the client
// went away.
using turn_writer =
    std::function<boost::asio::awaitable<bool>(event_pipe&, const std::function<void()>&)>;

// What happens to the turn when the client goes away before `done`.
enum class on_hangup {
  detach,  // it runs on for server.detach_grace_ms, waiting to be re-attached
  cancel,  // it stops now and stores its partial answer
};

// A new request id: "req_" and a row id (new_id: the time in milliseconds,
// then 80 random bits, in hex). Both messages of a turn are indexed by
// their request id first (unique with role and conversation, migration
// 12), so ids in the order they are made land at the right end of that
// index: with 128 random bits every message dirtied a random leaf of it,
// which the writer read and wrote again at each commit
// (docs/performance.md, "Request ids in the order they are made").
std::string new_request_id();

// The SSE timing of the server's settings.
sse_timing sse_timing_of(const server_settings& s);

// Subscribes to `turn` from seq `after` (0 = everything) and runs `write`.
// Returns what `write` returned.
boost::asio::awaitable<bool> follow_turn(handler_context& ctx, exchange& ex, stream_actor turn,
                                         uint64_t after, on_hangup hangup, turn_writer write);

}  // namespace ragtor::http
