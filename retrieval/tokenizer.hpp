// Text -> index terms, shared by indexing and querying so both agree on
// what a term is: Unicode NFKC with case folding (utf8proc); Latin/digit
// words (apostrophes inside a word kept) with English Snowball stemming and
// stopwords dropped; CJK (Han, Kana, Hangul) as unigrams plus bigrams of
// adjacent characters, since CJK text has no spaces to find words by;
// punctuation, symbols and emoji only separate terms.
// Also the sentence splitter used by the chunker and the extractive
// generator, so chunk boundaries and quoted sentences line up.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ragtor {

struct tokenizer_options {
  bool stem = true;
  bool drop_stopwords = true;
};

// Terms of `text` in order of appearance (duplicates kept: BM25 counts
// them). Invalid UTF-8 yields no terms; callers validate input upstream.
std::vector<std::string> tokenize(std::string_view text, const tokenizer_options& opts = {});

// Sentences of `text`, as views into it, trimmed of surrounding whitespace,
// empty ones dropped. A sentence ends after . ! ? (plus closing quotes or
// brackets) followed by whitespace, except after common abbreviations and
// initials; after 。！？； ; and at a line break that starts something new
// (blank line, heading, list item, quote, table row). A single line break
// inside hard-wrapped prose does not end a sentence.
std::vector<std::string_view> split_sentences(std::string_view text);

}  // namespace ragtor
