#include "protocol/text.hpp"

namespace ragtor {

std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  auto first = s.find_first_not_of(ws);
  if (first == std::string_view::npos)
    return {};
  auto last = s.find_last_not_of(ws);
  return s.substr(first, last - first + 1);
}

std::string utf8_prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes)
    return std::string{s};
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n;
  return std::string{s.substr(0, n)};
}

std::string to_lower_ascii(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace ragtor
