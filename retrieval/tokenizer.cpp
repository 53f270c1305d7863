#include "retrieval/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

#include <libstemmer.h>
#include <utf8proc.h>

namespace ragtor {

namespace {

constexpr std::array<std::string_view, 64> stopwords = {
    "a",    "about", "after", "all",  "also", "an",    "and",   "any",  "are",   "as",    "at",
    "be",   "been",  "but",   "by",   "can",  "could", "did",   "do",   "does",  "for",   "from",
    "had",  "has",   "have",  "he",   "her",  "his",   "how",   "i",    "if",    "in",    "into",
    "is",   "it",    "its",   "me",   "my",   "no",    "not",   "of",   "on",    "or",    "our",
    "she",  "so",    "than",  "that", "the",  "their", "them",  "then", "there", "these", "they",
    "this", "to",    "was",   "we",   "were", "what",  "which", "with", "you"};

bool is_stopword(std::string_view w) {
  return std::find(stopwords.begin(), stopwords.end(), w) != stopwords.end();
}

bool is_cjk(utf8proc_int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF)
         || (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0xF900 && c <= 0xFAFF)
         || (c >= 0x3040 && c <= 0x30FF) || (c >= 0xAC00 && c <= 0xD7AF);
}

bool is_word_char(utf8proc_int32_t c) {
  auto cat = utf8proc_category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)
         || (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME)
         || (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// sb_stemmer is not thread-safe: one per thread.
struct stemmer_deleter {
  void operator()(sb_stemmer* s) const { sb_stemmer_delete(s); }
};

std::string stem(const std::string& word) {
  thread_local std::unique_ptr<sb_stemmer, stemmer_deleter> st{sb_stemmer_new("english", nullptr)};
  if (!st)
    return word;
  auto* out = sb_stemmer_stem(st.get(), reinterpret_cast<const sb_symbol*>(word.data()),
                              static_cast<int>(word.size()));
  if (!out)
    return word;
  return std::string{reinterpret_cast<const char*>(out),
                     static_cast<size_t>(sb_stemmer_length(st.get()))};
}

std::string normalize(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                        static_cast<utf8proc_ssize_t>(text.size()), &out,
                        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE
                                                       | UTF8PROC_COMPAT | UTF8PROC_CASEFOLD));
  if (n < 0)
    return {};  // invalid UTF-8 is rejected upstream; index nothing
  std::string s{reinterpret_cast<char*>(out), static_cast<size_t>(n)};
  std::free(out);
  return s;
}

}  // namespace

std::vector<std::string> tokenize(std::string_view text, const tokenizer_options& opts) {
  auto norm = normalize(text);
  std::vector<std::string> out;
  std::string word;
  std::string prev_cjk;  // previous CJK character, for bigrams
  auto flush_word = [&] {
    if (word.empty())
      return;
    if (!(opts.drop_stopwords && is_stopword(word)))
      out.push_back(opts.stem ? stem(word) : word);
    word.clear();
  };
  auto* p = reinterpret_cast<const utf8proc_uint8_t*>(norm.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(norm.size());
  while (left > 0) {
    utf8proc_int32_t c;
    auto n = utf8proc_iterate(p, left, &c);
    if (n <= 0)
      break;
    std::string ch{reinterpret_cast<const char*>(p), static_cast<size_t>(n)};
    p += n;
    left -= n;
    if (is_cjk(c)) {
      flush_word();
      out.push_back(ch);
      if (!prev_cjk.empty())
        out.push_back(prev_cjk + ch);
      prev_cjk = std::move(ch);
    } else if (is_word_char(c)) {
      prev_cjk.clear();
      word += ch;
    } else {
      prev_cjk.clear();
      flush_word();
    }
  }
  flush_word();
  return out;
}

namespace {

// Hard-wrapped prose continues across a single newline; a blank line, a
// heading, a list item or a quote starts something new.
bool line_break_ends_sentence(std::string_view text, size_t sentence_start, size_t nl) {
  size_t first = sentence_start;
  while (first < nl && std::isspace(static_cast<unsigned char>(text[first])))
    ++first;
  if (first < nl && text[first] == '#')
    return true;  // a heading is a line of its own
  size_t next = nl + 1;
  while (next < text.size() && (text[next] == ' ' || text[next] == '\t' || text[next] == '\r'))
    ++next;
  if (next >= text.size())
    return true;
  char c = text[next];
  return c == '\n' || c == '#' || c == '-' || c == '*' || c == '>' || c == '|'
         || (std::isdigit(static_cast<unsigned char>(c)) && next + 1 < text.size()
             && (text[next + 1] == '.' || text[next + 1] == ')'));
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view text) {
  std::vector<std::string_view> out;
  auto push = [&](size_t from, size_t to) {
    while (from < to && std::isspace(static_cast<unsigned char>(text[from])))
      ++from;
    while (to > from && std::isspace(static_cast<unsigned char>(text[to - 1])))
      --to;
    if (to > from)
      out.push_back(text.substr(from, to - from));
  };
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' && line_break_ends_sentence(text, start, i)) {
      push(start, i);
      start = i + 1;
    } else if ((c == '.' || c == '!' || c == '?') && i + 1 < text.size()
               && std::isspace(static_cast<unsigned char>(text[i + 1]))) {
      push(start, i + 1);
      start = i + 1;
    } else if (static_cast<unsigned char>(c) == 0xE3 || static_cast<unsigned char>(c) == 0xEF) {
      // 。 = E3 80 82; ！ = EF BC 81; ？ = EF BC 9F; ； = EF BC 9B
      auto rest = text.substr(i, 3);
      if (rest == "\xE3\x80\x82" || rest == "\xEF\xBC\x81" || rest == "\xEF\xBC\x9F"
          || rest == "\xEF\xBC\x9B") {
        push(start, i + 3);
        start = i + 3;
        i += 2;
      }
    }
  }
  push(start, text.size());
  return out;
}

}  // namespace ragtor
