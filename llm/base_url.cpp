#include "llm/base_url.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/scheme.hpp>

namespace ragtor::llm {

std::optional<base_url> parse_base_url(std::string_view url) {
  auto parsed = boost::urls::parse_absolute_uri(url);
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
  // Boost.URL 1.81 lets a non-numeric port through; it could never connect.
  if (u.port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  if (u.port.empty())
    u.port = u.tls ? "443" : "80";
  u.prefix = parsed->encoded_path();
  while (!u.prefix.empty() && u.prefix.back() == '/')
    u.prefix.pop_back();
  return u;
}

}  // namespace ragtor::llm
