// URL target helpers: path/query split and percent-decoded query parameters.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ragtor::http {

struct target {
  std::string_view path;
  std::map<std::string, std::string, std::less<>> query;
  bool valid = true;  // false: malformed percent-encoding
};

target parse_target(std::string_view raw);

// A non-negative integer parameter in [min, max]; nullopt if malformed.
std::optional<int64_t> int_param(std::string_view text, int64_t min, int64_t max);

}  // namespace ragtor::http
