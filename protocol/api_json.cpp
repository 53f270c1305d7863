#include "protocol/api_json.hpp"

#include <array>

#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {

// Checks that each named string field is a valid id.
bool ids_valid(const json_fields& f, std::initializer_list<std::string_view> names,
               const request_limits& limits, request_error& err) {
  for (auto name : names) {
    if (!f.has(name))
      continue;
    if (!is_valid_id(f.string_or(name), limits.max_id_chars)) {
      err = id_field_error(name, limits.max_id_chars);
      return false;
    }
  }
  return true;
}

template <class T, size_t N>
api_parse<T> parse_with(std::string_view body, const request_limits& limits,
                        const std::array<field_spec, N>& specs,
                        std::initializer_list<std::string_view> id_fields,
                        T (*build)(const json_fields&)) {
  api_parse<T> out;
  auto parsed = parse_json_object(body, limits.max_body_bytes, specs);
  if (!parsed.ok) {
    out.error = std::move(parsed.error);
    return out;
  }
  if (!ids_valid(parsed.fields, id_fields, limits, out.error))
    return out;
  out.value = build(parsed.fields);
  out.ok = true;
  return out;
}

constexpr std::array<field_spec, 3> clear_fields = {{
    {"user_id", field_kind::string, true},
    {"session_id", field_kind::string, true},
    {"kb_prefix", field_kind::string, false},
}};

constexpr std::array<field_spec, 2> stop_fields = {{
    {"request_id", field_kind::string, true},
    {"user_id", field_kind::string, true},
}};

constexpr std::array<field_spec, 6> feedback_fields = {{
    {"message_id", field_kind::string, true},
    {"query", field_kind::string, true},
    {"is_positive", field_kind::boolean, true},
    {"thread_id", field_kind::string, true},
    {"agent_type", field_kind::string, false},
    {"metadata", field_kind::object, false},
}};

void write_message(json_writer& w, const stored_message& m) {
  w.begin_object()
      .field("message_id", m.message_id)
      .field("seq", m.seq)
      .field("role", m.role)
      .field("content", m.content);
  w.key("citations").raw(m.citations_json.empty() ? "[]" : m.citations_json);
  w.field("completed", m.completed)
      .field("request_id", m.request_id)
      .field("created_at_ms", m.created_at_ms)
      .end_object();
}

}  // namespace

api_parse<clear_request> parse_clear_request(std::string_view body, const request_limits& limits) {
  return parse_with<clear_request>(
      body, limits, clear_fields, {"user_id", "session_id"}, +[](const json_fields& f) {
        return clear_request{f.string_or("user_id"), f.string_or("session_id"),
                             f.string_or("kb_prefix")};
      });
}

api_parse<stop_request> parse_stop_request(std::string_view body, const request_limits& limits) {
  return parse_with<stop_request>(
      body, limits, stop_fields, {"user_id", "request_id"}, +[](const json_fields& f) {
        return stop_request{f.string_or("user_id"), f.string_or("request_id")};
      });
}

api_parse<feedback_vote> parse_feedback_request(std::string_view body,
                                                const request_limits& limits) {
  return parse_with<feedback_vote>(
      body, limits, feedback_fields, {"message_id", "thread_id"}, +[](const json_fields& f) {
        feedback_vote v;
        v.message_id = f.string_or("message_id");
        v.thread_id = f.string_or("thread_id");
        v.query = f.string_or("query");
        v.is_positive = f.bool_or("is_positive", true);
        v.agent_type = f.string_or("agent_type");
        if (auto i = f.objects.find("metadata"); i != f.objects.end())
          v.metadata_json = i->second;
        return v;
      });
}

std::string conversation_page_json(const conversation_page& page) {
  json_writer w;
  w.begin_object().key("conversations").begin_array();
  for (auto& c : page.conversations)
    w.begin_object()
        .field("conversation_id", c.conversation_id)
        .field("session_id", c.session_id)
        .field("title", c.title)
        .field("first_message", c.first_message)
        .field("message_count", c.message_count)
        .field("created_at_ms", c.created_at_ms)
        .field("updated_at_ms", c.updated_at_ms)
        .end_object();
  w.end_array();
  w.key("next_cursor");
  if (page.next_cursor.empty())
    w.null();
  else
    w.value(page.next_cursor);
  w.end_object();
  return w.take();
}

std::string messages_json(const std::string& conversation_id,
                          const std::vector<stored_message>& msgs, bool has_more) {
  json_writer w;
  w.begin_object().field("conversation_id", conversation_id).key("messages").begin_array();
  for (auto& m : msgs)
    write_message(w, m);
  w.end_array().field("has_more", has_more);
  w.key("next_before");
  if (has_more && !msgs.empty())
    w.value(msgs.front().seq);
  else
    w.null();
  w.end_object();
  return w.take();
}

std::string clear_json(int64_t cleared) {
  json_writer w;
  w.begin_object()
      .field("status", "ok")
      .field("cleared_messages", cleared)
      .field("remaining_messages", "0")
      .end_object();
  return w.take();
}

}  // namespace ragtor
