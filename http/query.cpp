#include "http/query.hpp"

#include <charconv>

namespace ragtor::http {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

bool decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size())
        return false;
      int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0)
        return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

}  // namespace

target parse_target(std::string_view raw) {
  target t;
  auto q = raw.find('?');
  t.path = raw.substr(0, q);
  if (q == std::string_view::npos)
    return t;
  auto rest = raw.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (pair.empty())
      continue;
    auto eq = pair.find('=');
    std::string key, value;
    if (!decode(pair.substr(0, eq), key)
        || !decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1),
                   value)) {
      t.valid = false;
      return t;
    }
    t.query[key] = value;
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
