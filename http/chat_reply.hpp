// The JSON answer of POST /api/v1/chat (DESIGN §5), built from the events
// of a finished turn: the same content as the SSE stream's `done`, with
// request_id and route_decision (and execution_log when debugging, error
// when the turn failed) in front of it. Pure: unit-tested without a turn.
#pragma once

#include <string>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::http {

class chat_reply {
public:
  // Takes what the answer needs from one event.
  void add(const stream_event& ev);

  // Whether the turn's `done` arrived.
  bool done() const { return !done_json_.empty(); }

  // The HTTP status: 200, or the one of the error code the turn reported.
  unsigned status() const;

  // `{"request_id", "route_decision", "execution_log"? (when `debug`),
  // "error"?, <the members of done.content>}`.
  std::string json(const std::string& request_id, bool debug) const;

private:
  std::string route_json_ = "null";
  std::string error_json_;
  std::vector<std::string> logs_;  // execution_log contents
  std::string done_json_;
};

}  // namespace ragtor::http
