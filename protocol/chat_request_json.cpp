#include "protocol/chat_request_json.hpp"

#include <algorithm>
#include <array>

#include <simdjson.h>

#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"

namespace ragtor {

namespace {

constexpr std::array<field_spec, 8> fields = {{
    {"user_id", field_kind::string, true},
    {"session_id", field_kind::string, true},
    {"message", field_kind::string, true},
    {"kb_prefix", field_kind::string, false},
    {"agent_type", field_kind::string, false},
    {"request_id", field_kind::string, false},
    {"debug", field_kind::boolean, false},
    {"incognito", field_kind::boolean, false},
}};

chat_request_parse reject(request_error e) {
  chat_request_parse result;
  result.error = std::move(e);
  return result;
}

chat_request_parse invalid(std::string message, std::string_view field = {}) {
  return reject(make_request_error("invalid_request", std::move(message), field));
}

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string agent_type_list() {
  std::string out;
  for (auto name : agent_types) {
    if (!out.empty())
      out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

bool is_valid_id(std::string_view id, size_t max_chars) {
  if (id.empty() || id.size() > max_chars)
    return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
              || c == '.' || c == ':' || c == '@' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

chat_request_parse parse_chat_request(std::string_view body, const request_limits& limits) {
  auto parsed = parse_json_object(body, limits.max_body_bytes, fields);
  if (!parsed.ok)
    return reject(std::move(parsed.error));
  auto& f = parsed.fields;
  chat_request_parse result;
  auto& req = result.request;
  req.user_id = f.string_or("user_id");
  req.session_id = f.string_or("session_id");
  req.message = f.string_or("message");
  req.kb_prefix = f.string_or("kb_prefix");
  req.agent_type = f.string_or("agent_type");
  req.request_id = f.string_or("request_id");
  req.debug = f.bool_or("debug", false);
  req.incognito = f.bool_or("incognito", false);

  auto id_error = [&](std::string_view name) {
    return reject(id_field_error(name, limits.max_id_chars));
  };
  if (!is_valid_id(req.user_id, limits.max_id_chars))
    return id_error("user_id");
  if (!is_valid_id(req.session_id, limits.max_id_chars))
    return id_error("session_id");
  // An explicitly empty request_id is an error, not a request for a
  // server-generated one.
  if (f.has("request_id") && !is_valid_id(req.request_id, limits.max_id_chars))
    return id_error("request_id");
  if (!req.kb_prefix.empty() && !is_valid_id(req.kb_prefix, limits.max_id_chars))
    return id_error("kb_prefix");
  if (req.message.size() > limits.max_message_bytes)
    return reject(make_request_error(
        "payload_too_large",
        "field \"message\" exceeds " + std::to_string(limits.max_message_bytes) + " bytes",
        "message"));
  if (is_blank(req.message))
    return invalid("field \"message\" must not be empty", "message");
  if (!req.agent_type.empty() && !is_agent_type(req.agent_type))
    return invalid("field \"agent_type\" must be one of " + agent_type_list(), "agent_type");

  result.ok = true;
  return result;
}

std::string error_body(std::string_view code, std::string_view message, std::string_view field) {
  json_writer w;
  w.begin_object().key("error").begin_object();
  w.field("code", code).field("message", message);
  if (!field.empty())
    w.field("field", field);
  w.end_object().end_object();
  return w.take();
}

}  // namespace ragtor
