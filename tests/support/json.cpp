#include "tests/support/json.hpp"

#include <cstdio>

namespace ragtor::test {

namespace {

std::string excerpt(std::string_view text) {
  constexpr size_t max_chars = 400;
  if (text.size() <= max_chars)
    return std::string{text};
  return std::string{text.substr(0, max_chars)} + "...";
}

}  // namespace

json json::parse(std::string_view text) {
  auto parser = std::make_shared<simdjson::dom::parser>();
  simdjson::dom::element root;
  if (auto err = parser->parse(text.data(), text.size()).get(root); err != simdjson::SUCCESS)
    throw json_error{std::string{"invalid JSON ("} + simdjson::error_message(err)
                     + "): " + excerpt(text)};
  return json{std::move(parser), root};
}

simdjson::dom::element json::lookup(std::string_view pointer) const {
  if (pointer.empty())
    return value_;
  simdjson::dom::element out;
  if (value_.at_pointer(pointer).get(out) != simdjson::SUCCESS)
    fail(pointer, "is missing");
  return out;
}

void json::fail(std::string_view pointer, std::string_view what) const {
  throw json_error{"JSON value at \"" + std::string{pointer} + "\" " + std::string{what} + " in "
                   + excerpt(dump())};
}

bool json::has(std::string_view pointer) const {
  simdjson::dom::element out;
  return pointer.empty() || value_.at_pointer(pointer).get(out) == simdjson::SUCCESS;
}

bool json::is_null(std::string_view pointer) const {
  return lookup(pointer).is_null();
}

bool json::is_string(std::string_view pointer) const {
  return lookup(pointer).is_string();
}

json json::at(std::string_view pointer) const {
  return json{parser_, lookup(pointer)};
}

std::string json::str(std::string_view pointer) const {
  std::string_view s;
  if (lookup(pointer).get_string().get(s) != simdjson::SUCCESS)
    fail(pointer, "is not a string");
  return std::string{s};
}

bool json::boolean(std::string_view pointer) const {
  bool b = false;
  if (lookup(pointer).get_bool().get(b) != simdjson::SUCCESS)
    fail(pointer, "is not a boolean");
  return b;
}

int64_t json::integer(std::string_view pointer) const {
  auto v = lookup(pointer);
  int64_t i = 0;
  if (v.get_int64().get(i) == simdjson::SUCCESS)
    return i;
  uint64_t u = 0;
  if (v.get_uint64().get(u) == simdjson::SUCCESS)
    return static_cast<int64_t>(u);
  fail(pointer, "is not an integer");
}

double json::number(std::string_view pointer) const {
  auto v = lookup(pointer);
  double d = 0;
  if (v.get_double().get(d) == simdjson::SUCCESS)
    return d;
  fail(pointer, "is not a number");
}

std::vector<json> json::items(std::string_view pointer) const {
  simdjson::dom::array arr;
  if (lookup(pointer).get_array().get(arr) != simdjson::SUCCESS)
    fail(pointer, "is not an array");
  std::vector<json> out;
  for (auto element : arr)
    out.push_back(json{parser_, element});
  return out;
}

std::vector<std::string> json::keys(std::string_view pointer) const {
  simdjson::dom::object obj;
  if (lookup(pointer).get_object().get(obj) != simdjson::SUCCESS)
    fail(pointer, "is not an object");
  std::vector<std::string> out;
  for (auto [key, value] : obj)
    out.emplace_back(key);
  return out;
}

std::string json::dump() const {
  return simdjson::minify(value_);
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // UTF-8 bytes pass through, valid or not
        }
    }
  }
  out += '"';
  return out;
}

std::string json_object(const std::vector<json_field>& fields) {
  std::string out = "{";
  for (const auto& f : fields) {
    if (out.size() > 1)
      out += ',';
    out += json_quote(f.name);
    out += ':';
    out += f.raw ? f.value : json_quote(f.value);
  }
  out += '}';
  return out;
}

}  // namespace ragtor::test
