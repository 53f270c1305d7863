#include "llm/token_count.hpp"

#include <array>
#include <cstdint>

namespace ragtor::llm {

namespace {

// Decodes one code point at s[i] (invalid bytes count as one symbol).
uint32_t next_cp(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + len > s.size())
    len = 1;
  uint32_t cp = len == 1 ? b : b & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

constexpr bool is_word_byte(uint32_t cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')
         || cp == '_'
         || (cp >= 0x80 && cp < 0x2E80);  // accented Latin, Cyrillic, ...; CJK starts at U+2E80
}

// What an ASCII byte is to the count: part of a word, white space, or a
// symbol (one token of its own).
enum class ascii_kind : unsigned char { symbol, word, space };

constexpr std::array<ascii_kind, 128> ascii_kinds = [] {
  std::array<ascii_kind, 128> t{};
  for (uint32_t c = 0; c < 128; ++c)
    t[c] = is_word_byte(c)                                       ? ascii_kind::word
           : c == ' ' || c == '\t' || c == '\n' || c == '\r' ? ascii_kind::space
                                                                : ascii_kind::symbol;
  return t;
}();

}  // namespace

size_t approx_tokens(std::string_view s) {
  size_t tokens = 0;
  size_t word_bytes = 0;
  auto end_word = [&] {
    if (word_bytes > 0)
      tokens += (word_bytes + 3) / 4;
    word_bytes = 0;
  };
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {  // most prompt text: a table look-up, no branch on the text
      ++i;
      auto kind = ascii_kinds[b];
      bool word = kind == ascii_kind::word;
      tokens += word ? 0 : (word_bytes + 3) / 4 + (kind == ascii_kind::symbol);
      word_bytes = word ? word_bytes + 1 : 0;
      continue;
    }
    auto start = i;
    auto cp = next_cp(s, i);
    if (is_word_byte(cp)) {
      word_bytes += i - start;
      continue;
    }
    end_word();
    if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r')
      continue;
    ++tokens;  // a CJK character or a symbol
  }
  end_word();
  return tokens;
}

}  // namespace ragtor::llm
