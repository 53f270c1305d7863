// The base URL of an OpenAI-compatible endpoint ("https://host:8443/v1"),
// parsed with Boost.URL: what the client connects to and the path prefix
// every request path is appended to.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ragtor::llm {

struct base_url {
  bool tls = false;    // https
  std::string host;    // an IPv6 literal without its brackets
  std::string port;    // 80 / 443 when the URL names none
  std::string prefix;  // path prefix without trailing '/', e.g. "/v1"
};

// nullopt unless `url` is an absolute http:// or https:// URL with a host.
std::optional<base_url> parse_base_url(std::string_view url);

}  // namespace ragtor::llm
