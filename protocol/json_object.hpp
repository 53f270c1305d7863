// Strict parsing of a JSON request body that must be one object with known
// fields: size limit (413), UTF-8, valid JSON, object, unknown / duplicate /
// wrongly typed / missing fields (400 naming the field). Every API body
// parser (chat, clear, feedback, stop) is built on it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/chat_request_json.hpp"

namespace ragtor {

// number: any JSON number as a double; string_array: an array of strings;
// array: any array, kept as minified JSON text (like objects).
enum class field_kind { string, boolean, integer, number, object, string_array, array };

struct field_spec {
  std::string_view name;
  field_kind kind;
  bool required;
};

// The fields present in a body; objects are kept as minified JSON text.
struct json_fields {
  std::map<std::string, std::string, std::less<>> strings;
  std::map<std::string, bool, std::less<>> bools;
  std::map<std::string, int64_t, std::less<>> integers;
  std::map<std::string, double, std::less<>> numbers;
  std::map<std::string, std::string, std::less<>> objects;  // objects and arrays, minified
  std::map<std::string, std::vector<std::string>, std::less<>> string_arrays;

  bool has(std::string_view name) const;
  std::string string_or(std::string_view name, std::string fallback = {}) const;
  bool bool_or(std::string_view name, bool fallback) const;
};

struct object_parse {
  bool ok = false;
  json_fields fields;
  request_error error;
};

object_parse parse_json_object(std::string_view body, size_t max_body_bytes,
                               std::span<const field_spec> specs);

// A body that must be any JSON object (e.g. a free-form profile), minified;
// 413 above `max_bytes`, 400 when not valid UTF-8 JSON or not an object.
struct minified_object {
  bool ok = false;
  std::string value;
  request_error error;
};
minified_object minify_json_object(std::string_view body, size_t max_bytes);

// A 400 (or 413 for payload_too_large) request_error.
request_error make_request_error(std::string_view code, std::string message,
                                 std::string_view field = {});

// `"name"` for messages, capped so hostile keys cannot bloat responses.
std::string quoted_field(std::string_view name);

// The standard message for an id field that fails is_valid_id.
request_error id_field_error(std::string_view field, size_t max_chars);

}  // namespace ragtor
