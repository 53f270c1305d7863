// JSON for test assertions: parse response bodies and SSE event data with the
// simdjson DOM and read fields by JSON pointer ("/content/answer"); build
// request bodies with proper string escaping. Accessors throw json_error
// naming the pointer and the document, which gtest reports as a failure.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

namespace ragtor::test {

class json_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A parsed document, or a value inside one (sharing the document).
class json {
public:
  // Throws json_error when `text` is not valid JSON.
  static json parse(std::string_view text);

  // Whether `pointer` names a value (null counts as present).
  bool has(std::string_view pointer) const;
  bool is_null(std::string_view pointer = "") const;
  bool is_string(std::string_view pointer = "") const;

  json at(std::string_view pointer) const;
  std::string str(std::string_view pointer = "") const;
  bool boolean(std::string_view pointer = "") const;
  int64_t integer(std::string_view pointer = "") const;
  // Integers too.
  double number(std::string_view pointer = "") const;
  // The elements of an array.
  std::vector<json> items(std::string_view pointer = "") const;
  // The keys of an object.
  std::vector<std::string> keys(std::string_view pointer = "") const;

  // Compact JSON text of this value.
  std::string dump() const;

private:
  json(std::shared_ptr<simdjson::dom::parser> parser, simdjson::dom::element value)
      : parser_(std::move(parser)), value_(value) {}

  simdjson::dom::element lookup(std::string_view pointer) const;
  [[noreturn]] void fail(std::string_view pointer, std::string_view what) const;

  // The parser owns the document the elements point into.
  std::shared_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element value_;
};

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

// A field of a request body under construction; `raw` values are inserted
// verbatim (numbers, booleans, nested JSON).
struct json_field {
  std::string name;
  std::string value;
  bool raw = false;
};

// {"name":value,...} in the given order.
std::string json_object(const std::vector<json_field>& fields);

}  // namespace ragtor::test
