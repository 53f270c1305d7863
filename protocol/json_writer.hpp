// A small streaming JSON writer: the only way ragtor produces JSON.
// Commas and escaping are handled for the caller; invalid UTF-8 in string
// values is replaced by U+FFFD so the output is always valid JSON.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

namespace ragtor {

class json_writer {
public:
  json_writer() = default;
  // Room for `reserve_bytes` of output from the start: a writer that knows
  // about how much it writes grows its string once instead of doubling it
  // from nothing (an event, a node log: half a dozen reallocations each).
  explicit json_writer(size_t reserve_bytes) { out_.reserve(reserve_bytes); }

  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();

  // Writes an object key; the next call writes its value.
  json_writer& key(std::string_view k);

  json_writer& value(std::string_view s);
  json_writer& value(const char* s) { return value(std::string_view{s}); }
  json_writer& value(const std::string& s) { return value(std::string_view{s}); }
  json_writer& value(bool b);
  json_writer& value(int64_t i);
  json_writer& value(int32_t i) { return value(static_cast<int64_t>(i)); }
  json_writer& value(uint64_t i);
  json_writer& value(double d);  // non-finite values are written as null
  json_writer& null();
  // Inserts an already-serialized JSON value verbatim.
  json_writer& raw(std::string_view json);

  // Shorthand for key(k).value(v).
  template <class T>
  json_writer& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

private:
  void before_value();
  void open(char bracket);
  void close(char bracket);
  std::string out_;
  // Per open container, whether no element is written yet: a bit per
  // level for the first 64 levels (no allocation), `deeper_` beyond.
  uint64_t first_bits_ = 0;
  size_t depth_ = 0;
  std::vector<bool> deeper_;
  bool after_key_ = false;
};

// {"k1":"v1",...}: an object of string fields, in order (node logs).
std::string json_strings(std::initializer_list<std::pair<std::string_view, std::string>> fields);

// Appends `s` as a JSON string literal (with quotes) to `out`.
void append_json_string(std::string& out, std::string_view s);

// True when `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

}  // namespace ragtor
