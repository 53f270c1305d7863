// Small text utilities every layer uses, kept once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ragtor {

// `s` without leading and trailing ASCII whitespace (" \t\n\r\f\v").
std::string_view trim(std::string_view s);

// `s` with ASCII letters lower-cased; other bytes (UTF-8 included) kept.
std::string to_lower_ascii(std::string_view s);

// At most `max_bytes` of `s`, cut at a UTF-8 character boundary.
std::string utf8_prefix(std::string_view s, size_t max_bytes);

}  // namespace ragtor
