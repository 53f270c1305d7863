#include "retrieval/tokenizer.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <unordered_map>

#include <libstemmer.h>
#include <utf8proc.h>

namespace ragtor {

namespace {

// Function words that match almost every passage and so only add noise to
// BM25 and to the extractive generator's overlap score. Kept small on
// purpose: words like "down" or "off" carry meaning in technical text.
// Sorted, for binary search (checked at compile time).
constexpr std::string_view stopwords[] = {
    "a",         "about",   "after",  "again", "all",   "also",    "am",      "an",     "and",
    "any",       "are",     "aren't", "as",    "at",    "be",      "because", "been",   "before",
    "being",     "both",    "but",    "by",    "can",   "can't",   "could",   "did",    "do",
    "does",      "doesn't", "doing",  "don't", "each",  "for",     "from",    "had",    "has",
    "have",      "having",  "he",     "her",   "here",  "hers",    "him",     "his",    "how",
    "i",         "i'm",     "i've",   "if",    "in",    "into",    "is",      "isn't",  "it",
    "it's",      "its",     "itself", "just",  "let's", "me",      "my",      "myself", "no",
    "nor",       "not",     "of",     "on",    "once",  "only",    "or",      "our",    "ours",
    "she",       "should",  "so",     "some",  "such",  "than",    "that",    "that's", "the",
    "their",     "theirs",  "them",   "then",  "there", "there's", "these",   "they",   "they're",
    "this",      "those",   "to",     "too",   "very",  "was",     "we",      "we're",  "were",
    "what",      "what's",  "when",   "where", "which", "while",   "who",     "whom",   "why",
    "will",      "with",    "won't",  "would", "you",   "you're",  "your",    "yours",  "yourself",
    "yourselves"};
static_assert(std::is_sorted(std::begin(stopwords), std::end(stopwords)));

bool is_stopword(std::string_view w) {
  return std::binary_search(std::begin(stopwords), std::end(stopwords), w);
}

// Scripts written without spaces between words (plus Hangul, which the
// design asks to treat the same way). Letters only: the kana block also
// holds punctuation such as the middle dot U+30FB.
bool is_cjk(utf8proc_int32_t c) {
  bool in_block = (c >= 0x1100 && c <= 0x11FF)        // Hangul Jamo
                  || (c >= 0x3005 && c <= 0x3007)     // 々 〆 〇
                  || (c >= 0x3040 && c <= 0x30FF)     // Hiragana, Katakana
                  || (c >= 0x3130 && c <= 0x318F)     // Hangul compatibility Jamo
                  || (c >= 0x31F0 && c <= 0x31FF)     // Katakana phonetic extensions
                  || (c >= 0x3400 && c <= 0x4DBF)     // CJK extension A
                  || (c >= 0x4E00 && c <= 0x9FFF)     // CJK unified ideographs
                  || (c >= 0xA960 && c <= 0xA97F)     // Hangul Jamo extended A
                  || (c >= 0xAC00 && c <= 0xD7FF)     // Hangul syllables, Jamo extended B
                  || (c >= 0xF900 && c <= 0xFAFF)     // CJK compatibility ideographs
                  || (c >= 0x20000 && c <= 0x323AF);  // CJK extensions B-H
  if (!in_block)
    return false;
  auto cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)
         || cat == UTF8PROC_CATEGORY_NL;
}

bool is_word_char(utf8proc_int32_t c) {
  auto cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)
         || (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME)
         || (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool is_apostrophe(utf8proc_int32_t c) {
  return c == '\'' || c == 0x2019;  // ASCII and typographic
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

struct stemmer_deleter {
  void operator()(sb_stemmer* s) const { sb_stemmer_delete(s); }
};

std::string stem_now(std::string_view word) {
  // sb_stemmer keeps per-call state, so it is not thread-safe: one per
  // thread, created on first use and freed when the thread exits.
  thread_local std::unique_ptr<sb_stemmer, stemmer_deleter> st{sb_stemmer_new("english", nullptr)};
  if (!st || word.empty())
    return std::string{word};
  auto* out = sb_stemmer_stem(st.get(), reinterpret_cast<const sb_symbol*>(word.data()),
                              static_cast<int>(word.size()));
  if (!out)
    return std::string{word};  // out of memory: the unstemmed word still matches itself
  return std::string{reinterpret_cast<const char*>(out),
                     static_cast<size_t>(sb_stemmer_length(st.get()))};
}

// Stemming was half of tokenising (libstemmer's own code), and the words of
// questions, answers and memories repeat: each thread keeps the stems of
// the words it stemmed last, at most stem_memo_words of them (cleared
// whole when full; ~0.2 MiB a thread), looked up without a copy.
constexpr size_t stem_memo_words = 2048;

std::string stem(std::string_view word) {
  thread_local std::unordered_map<std::string, std::string, string_hash, std::equal_to<>> memo;
  if (auto i = memo.find(word); i != memo.end())
    return i->second;
  auto s = stem_now(word);
  if (memo.size() >= stem_memo_words)
    memo.clear();
  memo.emplace(std::string{word}, s);
  return s;
}

std::string normalize(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                        static_cast<utf8proc_ssize_t>(text.size()), &out,
                        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE
                                                       | UTF8PROC_COMPAT | UTF8PROC_CASEFOLD));
  if (n < 0)
    return {};
  std::string s{reinterpret_cast<char*>(out), static_cast<size_t>(n)};
  std::free(out);
  return s;
}

// Decodes one code point; returns its length in bytes (0 at the end).
size_t decode(std::string_view s, size_t at, utf8proc_int32_t& c) {
  if (at >= s.size())
    return 0;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + at),
                            static_cast<utf8proc_ssize_t>(s.size() - at), &c);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

// The same terms for ASCII text without utf8proc: NFKC leaves ASCII as it
// is and case folding only lowers A-Z; the word characters are letters and
// digits ('_' is punctuation), and no character is CJK. Most of what a
// turn tokenises (questions, answers, the episodes embedded after each
// turn) is ASCII, and decoding each byte as a code point and looking up its
// category was most of the tokeniser's time.
template <class Flush>
void tokenize_ascii(std::string_view s, std::string& word, Flush&& flush_word) {
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_ascii_alnum(c)) {
      word += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    } else if (c == '\'' && !word.empty() && i + 1 < s.size() && is_ascii_alnum(s[i + 1])) {
      word += '\'';
    } else {
      flush_word();
    }
  }
}

}  // namespace

std::vector<std::string> tokenize(std::string_view text, const tokenizer_options& opts) {
  std::vector<std::string> out;
  std::string word;
  auto flush_word = [&] {
    if (word.empty())
      return;
    if (!(opts.drop_stopwords && is_stopword(word)))
      out.push_back(opts.stem && is_ascii(word) ? stem(word) : word);
    word.clear();
  };
  if (is_ascii(text)) {
    tokenize_ascii(text, word, flush_word);
    flush_word();
    return out;
  }
  auto norm = normalize(text);
  std::string_view s{norm};
  std::string_view prev_cjk;  // the CJK character just before, for bigrams
  size_t i = 0;
  utf8proc_int32_t c = 0;
  while (size_t n = decode(s, i, c)) {
    auto ch = s.substr(i, n);
    i += n;
    if (is_cjk(c)) {
      flush_word();
      out.emplace_back(ch);
      if (!prev_cjk.empty()) {
        std::string bigram{prev_cjk};
        bigram += ch;
        out.push_back(std::move(bigram));
      }
      prev_cjk = ch;
      continue;
    }
    prev_cjk = {};
    if (is_word_char(c)) {
      word += ch;
    } else if (is_apostrophe(c) && !word.empty()) {
      // "ragtor's", "don't": keep the word whole (the stemmer strips a
      // possessive) when a letter follows the apostrophe.
      utf8proc_int32_t next = 0;
      if (decode(s, i, next) && is_word_char(next) && !is_cjk(next))
        word += '\'';
      else
        flush_word();
    } else {
      flush_word();
    }
  }
  flush_word();
  return out;
}

namespace {

// Abbreviations whose period rarely ends a sentence ("etc." often does, so
// it is not here). Lower case, without the final period.
constexpr std::string_view abbreviations[] = {"approx", "cf", "dr", "e.g", "eg", "fig",  "i.e",
                                              "ie",     "jr", "mr", "mrs", "ms", "prof", "vs"};

// Whether the '.' at `dot` ends an abbreviation, an initial ("J. Smith")
// or a list number rather than a sentence.
bool is_abbreviation(std::string_view text, size_t dot) {
  size_t begin = dot;
  while (begin > 0 && !is_ascii_space(text[begin - 1]) && text[begin - 1] != '(')
    --begin;
  auto word = text.substr(begin, dot - begin);
  if (word.size() == 1 && word[0] >= 'A' && word[0] <= 'Z')
    return true;
  // "1. " at the start of a line numbers a list item.
  if (!word.empty() && word.size() <= 3
      && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    size_t line_start = begin;
    while (line_start > 0 && (text[line_start - 1] == ' ' || text[line_start - 1] == '\t'))
      --line_start;
    return line_start == 0 || text[line_start - 1] == '\n';
  }
  if (word.empty() || word.size() > 6)
    return false;
  std::string lower;
  for (char c : word) {
    if (!is_ascii_alpha(c) && c != '.')
      return false;
    lower += static_cast<char>(c | 0x20);
  }
  return std::find(std::begin(abbreviations), std::end(abbreviations), lower)
         != std::end(abbreviations);
}

// Closing quotes and brackets that belong to the sentence they follow:
// ASCII " ' ) ], and ” ’ 」 』 ） as UTF-8. Returns the byte length or 0.
size_t closer_at(std::string_view text, size_t i) {
  if (i >= text.size())
    return 0;
  char c = text[i];
  if (c == '"' || c == '\'' || c == ')' || c == ']')
    return 1;
  auto three = text.substr(i, 3);
  if (three == "\xE2\x80\x9D" || three == "\xE2\x80\x99" || three == "\xE3\x80\x8D"
      || three == "\xE3\x80\x8F" || three == "\xEF\xBC\x89")
    return 3;
  return 0;
}

// 。！？；as UTF-8: byte length or 0.
size_t cjk_terminator_at(std::string_view text, size_t i) {
  auto three = text.substr(i, 3);
  if (three == "\xE3\x80\x82" || three == "\xEF\xBC\x81" || three == "\xEF\xBC\x9F"
      || three == "\xEF\xBC\x9B")
    return 3;
  return 0;
}

// Hard-wrapped prose continues across a single newline; a blank line, a
// heading, a list item, a quote, a table row or a code fence starts
// something new.
bool line_break_ends_sentence(std::string_view text, size_t sentence_start, size_t nl) {
  size_t first = sentence_start;
  while (first < nl && is_ascii_space(text[first]))
    ++first;
  if (first < nl && text[first] == '#')
    return true;  // a heading is a line of its own
  size_t next = nl + 1;
  while (next < text.size() && (text[next] == ' ' || text[next] == '\t' || text[next] == '\r'))
    ++next;
  if (next >= text.size())
    return true;
  char c = text[next];
  return c == '\n' || c == '#' || c == '-' || c == '*' || c == '+' || c == '>' || c == '|'
         || text.substr(next, 3) == "```"
         || (std::isdigit(static_cast<unsigned char>(c)) && next + 1 < text.size()
             && (text[next + 1] == '.' || text[next + 1] == ')'));
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view text) {
  std::vector<std::string_view> out;
  auto push = [&](size_t from, size_t to) {
    while (from < to && is_ascii_space(text[from]))
      ++from;
    while (to > from && is_ascii_space(text[to - 1]))
      --to;
    if (to > from)
      out.push_back(text.substr(from, to - from));
  };
  // Extends an end position over closing quotes and brackets.
  auto past_closers = [&](size_t end) {
    while (size_t n = closer_at(text, end))
      end += n;
    return end;
  };
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\n' && line_break_ends_sentence(text, start, i)) {
      push(start, i);
      start = ++i;
    } else if (c == '.' || c == '!' || c == '?') {
      size_t end = past_closers(i + 1);
      bool boundary = end >= text.size() || is_ascii_space(text[end]);
      if (boundary && !(c == '.' && is_abbreviation(text, i))) {
        push(start, end);
        start = i = end;
      } else {
        ++i;
      }
    } else if (size_t n = cjk_terminator_at(text, i)) {
      size_t end = past_closers(i + n);
      push(start, end);
      start = i = end;
    } else {
      ++i;
    }
  }
  push(start, text.size());
  return out;
}

}  // namespace ragtor
