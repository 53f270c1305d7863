// Rendering of stream events as SSE frames (DESIGN §5.1) and helpers that
// build event payloads. Pure functions: used by the stream actor (payloads)
// and the HTTP layer (framing).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor {

// Appends one SSE frame (`id: <request_id>:<seq>\ndata: <json>\n\n`) for
// `ev` to `out`; a client re-attaches with that id as Last-Event-ID.
void append_sse_frame(std::string& out, const stream_event& ev, std::string_view request_id,
                      uint64_t seq);

// The JSON object of the SSE `data:` line for `ev`.
std::string event_json(const stream_event& ev, std::string_view request_id);

// Payload builders for the stream actor.
stream_event make_start_event();
stream_event make_token_event(std::string text);
stream_event make_error_event(std::string_view code, std::string_view message);
stream_event make_progress_event(std::string_view stage, int completed, int total,
                                 std::string_view agent_type, int64_t retrieval_count,
                                 std::string_view error);
stream_event make_route_event(const route_decision& rd, bool visible);

// JSON of a RouteDecision object.
std::string route_decision_json(const route_decision& rd);

// JSON array of citations.
std::string citations_json(const std::vector<citation>& cs);

struct done_content {
  std::string answer;
  std::string conversation_id;
  std::string message_id;
  std::vector<citation> citations;
  std::string citations_raw;           // a stored JSON array; used instead of `citations` when set
  std::vector<std::string> chunk_ids;  // reference.chunks
  usage_info usage;
  std::string finish_reason;  // "stop" | "length" | "cancelled"; "" = not written
  bool partial = false;
  // A guided workflow handed the conversation to a human (seed 003):
  // written as need_human_help/reason only when set.
  bool need_human_help = false;
  std::string escalation_reason;
};

stream_event make_done_event(const done_content& c);

}  // namespace ragtor
