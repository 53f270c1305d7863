#include "http/chat_reply.hpp"

#include <simdjson.h>

#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::http {

namespace {

// The "code" member of an error payload written by make_error_event.
std::string error_code_in(const std::string& error_json) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded{error_json};
  std::string_view code;
  auto doc = parser.iterate(padded);
  if (doc["code"].get_string().get(code) != simdjson::SUCCESS)
    return "internal";
  return std::string{code};
}

unsigned status_of_code(std::string_view code) {
  for (uint8_t i = 0; i <= static_cast<uint8_t>(errc::internal); ++i) {
    auto e = http_error_of(static_cast<errc>(i));
    if (e.code == code)
      return e.status;
  }
  if (code == "slow_client")
    return 499;
  return 500;
}

// Writes the members of the serialized object `object_json` into the
// object `w` is writing, values verbatim.
void copy_members(json_writer& w, const std::string& object_json) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded{object_json};
  auto doc = parser.iterate(padded);
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS)
    return;
  for (auto field : obj) {
    std::string_view key;
    simdjson::ondemand::value value;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS
        || field.value().get(value) != simdjson::SUCCESS)
      return;
    std::string_view raw;
    simdjson::ondemand::json_type type;
    if (value.type().get(type) != simdjson::SUCCESS)
      return;
    if (type == simdjson::ondemand::json_type::object) {
      simdjson::ondemand::object o;
      if (value.get_object().get(o) != simdjson::SUCCESS || o.raw_json().get(raw))
        return;
    } else if (type == simdjson::ondemand::json_type::array) {
      simdjson::ondemand::array a;
      if (value.get_array().get(a) != simdjson::SUCCESS || a.raw_json().get(raw))
        return;
    } else {
      raw = value.raw_json_token();  // with the whitespace after it
      while (
          !raw.empty()
          && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\t' || raw.back() == '\r'))
        raw.remove_suffix(1);
    }
    w.key(key).raw(raw);
  }
}

}  // namespace

void chat_reply::add(const stream_event& ev) {
  switch (ev.kind) {
    case event_kind::route_decision:
      route_json_ = ev.data;
      break;
    case event_kind::error:
      error_json_ = ev.data;
      break;
    case event_kind::execution_log:
      logs_.push_back(ev.data);
      break;
    case event_kind::done:
      done_json_ = ev.data;
      break;
    default:
      break;
  }
}

unsigned chat_reply::status() const {
  return error_json_.empty() ? 200 : status_of_code(error_code_in(error_json_));
}

std::string chat_reply::json(const std::string& request_id, bool debug) const {
  json_writer w;
  w.begin_object().field("request_id", request_id);
  w.key("route_decision").raw(route_json_);
  if (debug) {
    w.key("execution_log").begin_array();
    for (auto& log : logs_)
      w.raw(log);
    w.end_array();
  }
  if (!error_json_.empty())
    w.key("error").raw(error_json_);
  copy_members(w, done_json_);
  w.end_object();
  return w.take();
}

}  // namespace ragtor::http
