// Text -> index terms, shared by indexing and querying: Unicode NFKC with
// case folding (utf8proc); Latin/digit words with English Snowball stemming
// and stopwords dropped; CJK (Han, Kana, Hangul) as unigrams plus bigrams of
// adjacent characters; punctuation, symbols and emoji separate terms.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ragtor {

struct tokenizer_options {
  bool stem = true;
  bool drop_stopwords = true;
};

std::vector<std::string> tokenize(std::string_view text, const tokenizer_options& opts = {});

// Sentences of `text` (after . ! ? + whitespace, after 。！？；, at line
// breaks), trimmed, empty ones dropped; views point into `text`.
std::vector<std::string_view> split_sentences(std::string_view text);

}  // namespace ragtor
