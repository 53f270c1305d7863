#include "http/request_target.hpp"

#include <charconv>

#include <boost/url/encoding_opts.hpp>
#include <boost/url/params_encoded_view.hpp>
#include <boost/url/parse_query.hpp>

namespace ragtor::http {

request_target parse_request_target(std::string_view raw) {
  request_target t;
  auto q = raw.find('?');
  t.path = std::string{raw.substr(0, q)};
  if (q == std::string_view::npos)
    return t;
  // Parsed from a NUL-terminated copy: Boost.URL 1.81 reads the last value
  // on to the next NUL, past the end of the view it was given (Beast's
  // header buffer is not NUL-terminated).
  std::string query{raw.substr(q + 1)};
  auto parsed = boost::urls::parse_query(query);
  if (!parsed) {
    t.valid = false;
    return t;
  }
  boost::urls::encoding_opts form;
  form.space_as_plus = true;
  for (auto param : *parsed) {
    if (param.key.empty() && !param.has_value)
      continue;  // "a=1&&b=2"
    t.query[param.key.decode(form)] = param.value.decode(form);
  }
  return t;
}

std::optional<int64_t> int_param(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v < min || v > max)
    return std::nullopt;
  return v;
}

}  // namespace ragtor::http
