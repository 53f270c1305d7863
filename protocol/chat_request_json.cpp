#include "protocol/chat_request_json.hpp"

#include <algorithm>
#include <array>

#include <simdjson.h>

#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"

namespace ragtor {

namespace {

// Field names echoed back in error messages are capped so that a hostile
// key cannot make the error response as large as the request.
constexpr size_t max_echoed_name = 64;

enum class field_kind { string, boolean };

struct field_spec {
  std::string_view name;
  field_kind kind;
  bool required;
};

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

constexpr size_t index_of(std::string_view name) {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == name)
      return i;
  return fields.size();
}

std::string quoted(std::string_view name) {
  if (name.size() > max_echoed_name)
    return "\"" + std::string{name.substr(0, max_echoed_name)} + "...\"";
  return "\"" + std::string{name} + "\"";
}

chat_request_parse reject(errc code, std::string message, std::string_view field = {}) {
  chat_request_parse result;
  result.error.status = code == errc::payload_too_large ? 413 : 400;
  result.error.code = std::string{to_string(code)};
  result.error.message = std::move(message);
  result.error.field = std::string{field.substr(0, std::min(field.size(), max_echoed_name))};
  return result;
}

chat_request_parse invalid(std::string message, std::string_view field = {}) {
  return reject(errc::invalid_request, std::move(message), field);
}

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos;
}

std::string* string_slot(chat_request& req, std::string_view name) {
  if (name == "user_id") return &req.user_id;
  if (name == "session_id") return &req.session_id;
  if (name == "message") return &req.message;
  if (name == "kb_prefix") return &req.kb_prefix;
  if (name == "agent_type") return &req.agent_type;
  if (name == "request_id") return &req.request_id;
  return nullptr;
}

bool* bool_slot(chat_request& req, std::string_view name) {
  if (name == "debug") return &req.debug;
  if (name == "incognito") return &req.incognito;
  return nullptr;
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
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

chat_request_parse parse_chat_request(std::string_view body, const request_limits& limits) {
  if (body.size() > limits.max_body_bytes)
    return reject(errc::payload_too_large,
                  "request body exceeds " + std::to_string(limits.max_body_bytes) + " bytes");
  if (!is_valid_utf8(body))
    return invalid("invalid UTF-8");

  simdjson::dom::parser parser;
  simdjson::padded_string padded{body};
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS) {
    // simdjson also rejects escaped lone surrogates ("\ud800"), which would
    // decode to invalid UTF-8.
    if (err == simdjson::UTF8_ERROR || err == simdjson::STRING_ERROR)
      return invalid("invalid UTF-8 or string escape in JSON body");
    return invalid("body is not valid JSON");
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS)
    return invalid("body must be a JSON object");

  chat_request_parse result;
  auto& req = result.request;
  std::array<bool, fields.size()> seen{};
  for (auto [key, value] : obj) {
    auto spec = std::find_if(fields.begin(), fields.end(),
                             [&](const field_spec& f) { return f.name == key; });
    if (spec == fields.end())
      return invalid("unknown field " + quoted(key), key);
    auto index = static_cast<size_t>(spec - fields.begin());
    if (seen[index])
      return invalid("duplicate field " + quoted(key), key);
    seen[index] = true;
    if (spec->kind == field_kind::string) {
      std::string_view s;
      if (value.get_string().get(s) != simdjson::SUCCESS)
        return invalid("field " + quoted(key) + " must be a string", key);
      *string_slot(req, key) = std::string{s};
    } else {
      bool b;
      if (value.get_bool().get(b) != simdjson::SUCCESS)
        return invalid("field " + quoted(key) + " must be a boolean", key);
      *bool_slot(req, key) = b;
    }
  }
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].required && !seen[i])
      return invalid("field " + quoted(fields[i].name) + " is required", fields[i].name);

  auto id_error = [&](std::string_view name) {
    return invalid("field " + quoted(name) + " must be 1-" + std::to_string(limits.max_id_chars)
                     + " characters of [A-Za-z0-9_.:@-]",
                   name);
  };
  if (!is_valid_id(req.user_id, limits.max_id_chars))
    return id_error("user_id");
  if (!is_valid_id(req.session_id, limits.max_id_chars))
    return id_error("session_id");
  // An explicitly empty request_id is an error, not a request for a
  // server-generated one.
  if (seen[index_of("request_id")] && !is_valid_id(req.request_id, limits.max_id_chars))
    return id_error("request_id");
  if (!req.kb_prefix.empty() && !is_valid_id(req.kb_prefix, limits.max_id_chars))
    return id_error("kb_prefix");
  if (req.message.size() > limits.max_message_bytes)
    return reject(errc::payload_too_large,
                  "field \"message\" exceeds " + std::to_string(limits.max_message_bytes)
                    + " bytes",
                  "message");
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
