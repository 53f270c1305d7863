// Small text utilities every layer uses, kept once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ragtor {

// ASCII whitespace, as C's isspace in the "C" locale: " \t\n\r\f\v".
constexpr bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// `s` without leading and trailing ASCII whitespace (is_ascii_space).
std::string_view trim(std::string_view s);

// A hash for string-keyed unordered containers that also finds by
// std::string_view or const char* without making a std::string (with
// std::equal_to<>).
struct string_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// `s` with ASCII letters lower-cased; other bytes (UTF-8 included) kept.
std::string to_lower_ascii(std::string_view s);

// At most `max_bytes` of `s`, cut at a UTF-8 character boundary.
std::string utf8_prefix(std::string_view s, size_t max_bytes);

}  // namespace ragtor
