#include "protocol/stream_events.hpp"

#include "protocol/json_writer.hpp"

#include <charconv>

namespace ragtor {

namespace {

void append_event_json(std::string& out, const stream_event& ev, std::string_view request_id) {
  out += "{\"status\":";
  append_json_string(out, to_string(ev.kind));
  switch (ev.kind) {
    case event_kind::start:
      out += ",\"request_id\":";
      append_json_string(out, request_id);
      out += '}';
      break;
    case event_kind::token:
      out += ",\"content\":";
      append_json_string(out, ev.data);
      out += '}';
      break;
    case event_kind::error:
      // data is an object: splice its members after "status".
      if (ev.data.size() > 2) {
        out += ',';
        out.append(ev.data, 1, std::string::npos);
      } else {
        out += '}';
      }
      break;
    case event_kind::done:
      out += ",\"request_id\":";
      append_json_string(out, request_id);
      [[fallthrough]];
    default:
      out += ",\"content\":";
      out += ev.data.empty() ? std::string_view{"null"} : std::string_view{ev.data};
      out += '}';
  }
}

}  // namespace

std::string event_json(const stream_event& ev, std::string_view request_id) {
  std::string out;
  out.reserve(ev.data.size() + request_id.size() + 64);
  append_event_json(out, ev, request_id);
  return out;
}

void append_sse_frame(std::string& out, const stream_event& ev, std::string_view request_id,
                      uint64_t seq) {
  // Sized once for the frame: a batch of frames is one string.
  out.reserve(out.size() + ev.data.size() + 2 * request_id.size() + 96);
  out += "id: ";
  out += request_id;
  out += ':';
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, seq).ptr);
  out += "\ndata: ";
  // JSON never contains a raw newline (the writer escapes it), so one
  // data line per event is enough.
  append_event_json(out, ev, request_id);
  out += "\n\n";
}

stream_event make_start_event() {
  return {event_kind::start, {}, true};
}

stream_event make_token_event(std::string text) {
  return {event_kind::token, std::move(text), true};
}

stream_event make_error_event(std::string_view code, std::string_view message) {
  json_writer w{32 + code.size() + message.size()};
  w.begin_object().field("message", message).field("code", code).end_object();
  return {event_kind::error, w.take(), true};
}

stream_event make_progress_event(std::string_view stage, int completed, int total,
                                 std::string_view agent_type, int64_t retrieval_count,
                                 std::string_view error) {
  json_writer w{128 + stage.size() + agent_type.size() + error.size()};
  w.begin_object().field("stage", stage).field("completed", completed).field("total", total);
  w.key("error");
  if (error.empty())
    w.null();
  else
    w.value(error);
  w.field("agent_type", agent_type);
  w.key("retrieval_count");
  if (retrieval_count < 0)
    w.null();
  else
    w.value(retrieval_count);
  w.end_object();
  return {event_kind::progress, w.take(), true};
}

std::string route_decision_json(const route_decision& rd) {
  json_writer w{192 + rd.requested_kb_prefix.size() + rd.routed_kb_prefix.size()
                + rd.kb_prefix.size() + rd.method.size() + rd.reason.size() + rd.worker_name.size()
                + rd.intent.size() + rd.agent_type.size()};
  w.begin_object()
      .field("requested_kb_prefix", rd.requested_kb_prefix)
      .field("routed_kb_prefix", rd.routed_kb_prefix)
      .field("kb_prefix", rd.kb_prefix)
      .field("confidence", rd.confidence)
      .field("method", rd.method)
      .field("reason", rd.reason)
      .field("worker_name", rd.worker_name)
      .field("intent", rd.intent)
      .field("agent_type", rd.agent_type)
      .end_object();
  return w.take();
}

stream_event make_route_event(const route_decision& rd, bool visible) {
  return {event_kind::route_decision, route_decision_json(rd), visible};
}

std::string citations_json(const std::vector<citation>& cs) {
  json_writer w;
  w.begin_array();
  for (auto& c : cs)
    w.begin_object()
        .field("doc_id", c.doc_id)
        .field("chunk_id", c.chunk_id)
        .field("title", c.title)
        .field("quote", c.quote)
        .field("verified", c.verified)
        .end_object();
  w.end_array();
  return w.take();
}

stream_event make_done_event(const done_content& c) {
  json_writer w{320 + c.answer.size() + c.citations_raw.size() + 48 * c.chunk_ids.size()};
  w.begin_object()
      .field("answer", c.answer)
      .field("conversation_id", c.conversation_id)
      .field("message_id", c.message_id);
  w.key("citations").raw(c.citations_raw.empty() ? citations_json(c.citations) : c.citations_raw);
  w.key("reference").begin_object().key("chunks").begin_array();
  for (auto& id : c.chunk_ids)
    w.begin_object().field("chunk_id", id).end_object();
  w.end_array();
  w.key("entities").begin_array().end_array();
  w.key("relationships").begin_array().end_array();
  w.end_object();
  w.key("usage")
      .begin_object()
      .field("prompt_tokens", c.usage.prompt_tokens)
      .field("completion_tokens", c.usage.completion_tokens)
      .field("total_tokens", c.usage.prompt_tokens + c.usage.completion_tokens)
      .end_object();
  w.field("partial", c.partial);
  if (!c.finish_reason.empty())
    w.field("finish_reason", c.finish_reason);
  if (c.need_human_help)
    w.field("need_human_help", true).field("reason", c.escalation_reason);
  w.end_object();
  return {event_kind::done, w.take(), true};
}

}  // namespace ragtor
