#include "llm/base_url.hpp"

#include <algorithm>

#include <boost/url/parse.hpp>
#include <boost/url/scheme.hpp>

namespace ragtor::llm {

std::optional<base_url> parse_base_url(std::string_view url) {
  // A NUL-terminated copy: Boost.URL 1.81 may read a view past its end.
  std::string copy{url};
  auto parsed = boost::urls::parse_absolute_uri(copy);
  if (!parsed)
    return std::nullopt;
  base_url u;
  auto scheme = parsed->scheme_id();
  if (scheme == boost::urls::scheme::https)
    u.tls = true;
  else if (scheme != boost::urls::scheme::http)
    return std::nullopt;
  u.host = parsed->host_address();
  if (u.host.empty())
    return std::nullopt;
  u.port = parsed->port();
  if (u.port.empty())
    u.port = u.tls ? "443" : "80";
  u.prefix = parsed->encoded_path();
  u.target = parsed->encoded_target();
  if (u.target.empty())
    u.target = "/";
  // Boost.URL 1.81 reads "http://h:port/v1" as port "" and path "port/v1";
  // after an authority a path must begin with '/'.
  if (!u.prefix.empty() && u.prefix.front() != '/')
    return std::nullopt;
  while (!u.prefix.empty() && u.prefix.back() == '/')
    u.prefix.pop_back();
  return u;
}

bool host_allowed(const std::vector<std::string>& allowed, std::string_view host) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& h) {
    return h == "*"
           || (h.size() == host.size()
               && std::equal(h.begin(), h.end(), host.begin(),
                             [&](char x, char y) { return lower(x) == lower(y); }));
  });
}

}  // namespace ragtor::llm
