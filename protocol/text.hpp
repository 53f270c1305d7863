// Small text utilities every layer uses, kept once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace ragtor {

// ASCII whitespace, as C's isspace in the "C" locale: " \t\n\r\f\v".
constexpr bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// ASCII letters and digits, as C's isalpha, isdigit, isupper in the "C"
// locale (bytes of UTF-8 sequences are none of them).
constexpr bool is_ascii_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
constexpr bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr bool is_ascii_alpha(char c) {
  return is_ascii_upper(c) || (c >= 'a' && c <= 'z');
}
constexpr bool is_ascii_alnum(char c) {
  return is_ascii_alpha(c) || is_ascii_digit(c);
}

// `s` without leading and trailing ASCII whitespace (is_ascii_space).
std::string_view trim(std::string_view s);

// A hash for string-keyed unordered containers that also finds by
// std::string_view or const char* without making a std::string (with
// std::equal_to<>).
struct string_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// `s` with ASCII letters lower-cased; other bytes (UTF-8 included) kept.
std::string to_lower_ascii(std::string_view s);

// Where a scanner of `s` must look at bytes one by one, from `from` on:
// 16 bytes at a time (SSE2) are passed over while none is one of
// `Specials` nor, with `StopAtControlOrNonAscii`, below 0x20 or from 0x80.
// The result is the position of such a byte, or where fewer than 16 bytes
// are left; the caller goes on byte by byte from it. For escaping text
// that is mostly plain (prompts, documents, JSON). Inline, with the bytes
// fixed at compile time: a prompt's JSON stops at every newline, and a
// call that set its compares up each time cost more than it saved.
template <bool StopAtControlOrNonAscii, char... Specials>
inline size_t skip_plain_blocks(std::string_view s, size_t from) {
#ifdef __SSE2__
  for (; from + 16 <= s.size(); from += 16) {
    auto v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + from));
    auto stop = _mm_setzero_si128();
    ((stop = _mm_or_si128(stop, _mm_cmpeq_epi8(v, _mm_set1_epi8(Specials)))), ...);
    if constexpr (StopAtControlOrNonAscii)  // signed: bytes from 0x80 are below 0x20 too
      stop = _mm_or_si128(stop, _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
    if (int m = _mm_movemask_epi8(stop))
      return from + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(m)));
  }
#endif
  return from;
}

// At most `max_bytes` of `s`, cut at a UTF-8 character boundary.
std::string utf8_prefix(std::string_view s, size_t max_bytes);

}  // namespace ragtor
