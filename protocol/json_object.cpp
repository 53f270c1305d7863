#include "protocol/json_object.hpp"

#include <algorithm>
#include <vector>

#include <simdjson.h>

#include "protocol/json_document.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {

constexpr size_t max_echoed_name = 64;

object_parse fail(request_error e) {
  object_parse r;
  r.error = std::move(e);
  return r;
}

}  // namespace

bool json_fields::has(std::string_view name) const {
  return strings.count(name) || bools.count(name) || integers.count(name) || numbers.count(name)
         || objects.count(name) || string_arrays.count(name);
}

std::string json_fields::string_or(std::string_view name, std::string fallback) const {
  auto i = strings.find(name);
  return i == strings.end() ? std::move(fallback) : i->second;
}

bool json_fields::bool_or(std::string_view name, bool fallback) const {
  auto i = bools.find(name);
  return i == bools.end() ? fallback : i->second;
}

std::string quoted_field(std::string_view name) {
  if (name.size() > max_echoed_name)
    return "\"" + std::string{name.substr(0, max_echoed_name)} + "...\"";
  return "\"" + std::string{name} + "\"";
}

request_error make_request_error(std::string_view code, std::string message,
                                 std::string_view field) {
  request_error e;
  e.status = code == "payload_too_large" ? 413 : 400;
  e.code = std::string{code};
  e.message = std::move(message);
  e.field = std::string{field.substr(0, std::min(field.size(), max_echoed_name))};
  return e;
}

request_error id_field_error(std::string_view field, size_t max_chars) {
  return make_request_error("invalid_request",
                            "field " + quoted_field(field) + " must be 1-"
                                + std::to_string(max_chars) + " characters of [A-Za-z0-9_.:@-]",
                            field);
}

object_parse parse_json_object(std::string_view body, size_t max_body_bytes,
                               std::span<const field_spec> specs) {
  auto invalid = [](std::string msg, std::string_view field = {}) {
    return fail(make_request_error("invalid_request", std::move(msg), field));
  };
  if (body.size() > max_body_bytes)
    return fail(make_request_error(
        "payload_too_large", "request body exceeds " + std::to_string(max_body_bytes) + " bytes"));
  if (!is_valid_utf8(body))
    return invalid("invalid UTF-8");
  json_document parsed{body};
  simdjson::dom::element doc;
  if (auto err = parsed.get(doc); err != simdjson::SUCCESS) {
    // simdjson also rejects escaped lone surrogates ("\ud800"), which would
    // decode to invalid UTF-8.
    if (err == simdjson::UTF8_ERROR || err == simdjson::STRING_ERROR)
      return invalid("invalid UTF-8 or string escape in JSON body");
    return invalid("body is not valid JSON");
  }
  simdjson::dom::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS)
    return invalid("body must be a JSON object");
  object_parse result;
  auto& out = result.fields;
  std::vector<bool> seen(specs.size(), false);
  for (auto [key, value] : obj) {
    std::string_view k = key;  // (clang 14 lambdas cannot capture bindings)
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [k](const field_spec& f) { return f.name == k; });
    if (spec == specs.end())
      return invalid("unknown field " + quoted_field(key), key);
    auto index = static_cast<size_t>(spec - specs.begin());
    if (seen[index])
      return invalid("duplicate field " + quoted_field(key), key);
    seen[index] = true;
    std::string name{key};
    switch (spec->kind) {
      case field_kind::string: {
        std::string_view s;
        if (value.get_string().get(s) != simdjson::SUCCESS)
          return invalid("field " + quoted_field(key) + " must be a string", key);
        out.strings.emplace(name, s);
        break;
      }
      case field_kind::boolean: {
        bool b;
        if (value.get_bool().get(b) != simdjson::SUCCESS)
          return invalid("field " + quoted_field(key) + " must be a boolean", key);
        out.bools.emplace(name, b);
        break;
      }
      case field_kind::integer: {
        int64_t i;
        if (value.get_int64().get(i) != simdjson::SUCCESS)
          return invalid("field " + quoted_field(key) + " must be an integer", key);
        out.integers.emplace(name, i);
        break;
      }
      case field_kind::number: {
        double d;
        // get_double also converts integers.
        if (value.get_double().get(d) != simdjson::SUCCESS)
          return invalid("field " + quoted_field(key) + " must be a number", key);
        out.numbers.emplace(name, d);
        break;
      }
      case field_kind::object:
        if (!value.is_object())
          return invalid("field " + quoted_field(key) + " must be an object", key);
        out.objects.emplace(name, simdjson::minify(value));
        break;
      case field_kind::array:
        if (!value.is_array())
          return invalid("field " + quoted_field(key) + " must be an array", key);
        out.objects.emplace(name, simdjson::minify(value));
        break;
      case field_kind::string_array: {
        simdjson::dom::array arr;
        if (value.get_array().get(arr) != simdjson::SUCCESS)
          return invalid("field " + quoted_field(key) + " must be an array of strings", key);
        std::vector<std::string> items;
        for (auto item : arr) {
          std::string_view s;
          if (item.get_string().get(s) != simdjson::SUCCESS)
            return invalid("field " + quoted_field(key) + " must be an array of strings", key);
          items.emplace_back(s);
        }
        out.string_arrays.emplace(name, std::move(items));
        break;
      }
    }
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].required && !seen[i])
      return invalid("field " + quoted_field(specs[i].name) + " is required", specs[i].name);
  result.ok = true;
  return result;
}

minified_object minify_json_object(std::string_view body, size_t max_bytes) {
  minified_object out;
  if (body.size() > max_bytes) {
    out.error = make_request_error("payload_too_large",
                                   "body exceeds " + std::to_string(max_bytes) + " bytes");
    return out;
  }
  if (!is_valid_utf8(body)) {
    out.error = make_request_error("invalid_request", "invalid UTF-8");
    return out;
  }
  json_document parsed{body};
  simdjson::dom::element doc;
  if (parsed.get(doc) != simdjson::SUCCESS) {
    out.error = make_request_error("invalid_request", "body is not valid JSON");
    return out;
  }
  if (!doc.is_object()) {
    out.error = make_request_error("invalid_request", "body must be a JSON object");
    return out;
  }
  out.value = simdjson::minify(doc);
  out.ok = true;
  return out;
}

}  // namespace ragtor
