// The request target of an HTTP request split into its raw path (which the
// router matches) and its query parameters, percent-decoded by Boost.URL
// with '+' read as a space (HTML form encoding).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ragtor::http {

using query_params = std::map<std::string, std::string, std::less<>>;

struct request_target {
  std::string path;    // as sent, still percent-encoded
  query_params query;  // a repeated key keeps its last value; empty pairs are skipped
  bool valid = true;   // false: the query is malformed (e.g. a bad percent escape)
};

request_target parse_request_target(std::string_view raw);

// A non-negative integer parameter in [min, max]; nullopt if malformed.
std::optional<int64_t> int_param(std::string_view text, int64_t min, int64_t max);

}  // namespace ragtor::http
