#include "protocol/token_count.hpp"

#include <array>
#include <cstdint>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace ragtor {

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
    t[c] = is_word_byte(c)                                   ? ascii_kind::word
           : c == ' ' || c == '\t' || c == '\n' || c == '\r' ? ascii_kind::space
                                                             : ascii_kind::symbol;
  return t;
}();

#ifdef __SSE2__
// Bit i set where s[i] is an ASCII word byte, where it is white space,
// and where it is not ASCII, for 64 bytes.
struct block_masks {
  uint64_t word = 0, space = 0, non_ascii = 0;
};

block_masks classify64(const char* p) {
  block_masks m;
  auto in = [](__m128i x, char lo, char hi) {
    return _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8(static_cast<char>(lo - 1))),
                         _mm_cmplt_epi8(x, _mm_set1_epi8(static_cast<char>(hi + 1))));
  };
  for (int k = 0; k < 4; ++k) {
    auto v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    auto lower = _mm_or_si128(v, _mm_set1_epi8(0x20));  // only letters land in a..z
    auto word = _mm_or_si128(_mm_or_si128(in(lower, 'a', 'z'), in(v, '0', '9')),
                             _mm_cmpeq_epi8(v, _mm_set1_epi8('_')));
    auto space = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))),
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\r'))));
    auto bits = [k](__m128i x) {
      return static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(x))) << (16 * k);
    };
    m.word |= bits(word);
    m.space |= bits(space);
    m.non_ascii |= bits(v);  // the sign bits
  }
  return m;
}
#endif

}  // namespace

// Byte by byte, the rule reads: a word byte (or a word-like code point)
// lengthens the current word; anything else ends it (ceil(bytes / 4)
// tokens), and a symbol or CJK character is one token more. 64 ASCII bytes
// at a time give the same count from bit masks: the symbols' popcount,
// and each run of word bits a word (a run that reaches the block's end
// carries on into the next). Prompts are mostly ASCII, and this count ran
// over every document of every turn (2 % of ragtor's CPU at 64 streams).
size_t approx_tokens(std::string_view s) {
  size_t tokens = 0;
  size_t word_bytes = 0;
  auto end_word = [&] {
    if (word_bytes > 0)
      tokens += (word_bytes + 3) / 4;
    word_bytes = 0;
  };
  size_t i = 0;
  // One step of the rule at s[i] (i < s.size()).
  auto step = [&] {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {  // a table look-up, no branch on the text
      ++i;
      auto kind = ascii_kinds[b];
      bool word = kind == ascii_kind::word;
      tokens += word ? 0 : (word_bytes + 3) / 4 + (kind == ascii_kind::symbol);
      word_bytes = word ? word_bytes + 1 : 0;
      return;
    }
    auto start = i;
    auto cp = next_cp(s, i);
    if (is_word_byte(cp)) {
      word_bytes += i - start;
      return;
    }
    end_word();
    if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r')
      return;
    ++tokens;  // a CJK character or a symbol
  };
#ifdef __SSE2__
  while (i + 64 <= s.size()) {
    auto m = classify64(s.data() + i);
    if (m.non_ascii) {
      // Byte by byte to the block's end (a code point may run past it).
      for (auto end = i + 64; i < end;)
        step();
      continue;
    }
    tokens += static_cast<size_t>(__builtin_popcountll(~(m.word | m.space)));
    uint64_t w = m.word;
    int at = 0;            // bits below `at` are done
    if (word_bytes > 0) {  // a word carried from before
      if (w == ~uint64_t{0}) {
        word_bytes += 64;
        i += 64;
        continue;
      }
      int run = __builtin_ctzll(~w);  // 0 when the block starts with no word byte
      word_bytes += static_cast<size_t>(run);
      end_word();
      at = run;
    }
    w = at >= 64 ? 0 : w >> at << at;
    while (w) {
      int from = __builtin_ctzll(w);
      uint64_t rest = ~(w >> from);  // ones from the run's end on
      int run = rest == 0 ? 64 - from : __builtin_ctzll(rest);
      if (from + run >= 64) {  // carries on into the next block
        word_bytes = static_cast<size_t>(64 - from);
        break;
      }
      tokens += static_cast<size_t>(run + 3) / 4;
      w &= ~uint64_t{0} << (from + run);
    }
    i += 64;
  }
#endif
  while (i < s.size())
    step();
  end_word();
  return tokens;
}

size_t approx_tokens_xml_escaped(std::string_view s) {
  size_t escaped = 0;
  for (char c : s)
    escaped += xml_entity(c) != nullptr;
  return approx_tokens(s) + 2 * escaped;
}

}  // namespace ragtor
