// An absolute http(s) URL parsed with Boost.URL: the base URL of an
// OpenAI-compatible endpoint ("https://host:8443/v1": what the client
// connects to and the path prefix every request path is appended to), or a
// workflow tool's URL (posted to as written, path and query).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ragtor::llm {

struct base_url {
  bool tls = false;    // https
  std::string host;    // an IPv6 literal without its brackets
  std::string port;    // 80 / 443 when the URL names none
  std::string prefix;  // path prefix without trailing '/', e.g. "/v1"
  std::string target;  // path and query as written ("/" when none)
};

// nullopt unless `url` is an absolute http:// or https:// URL with a host.
std::optional<base_url> parse_base_url(std::string_view url);

// Whether `host` is in `allowed` ([security] allowed_outbound_hosts; ASCII
// case-insensitive; "*" allows every host).
bool host_allowed(const std::vector<std::string>& allowed, std::string_view host);

}  // namespace ragtor::llm
