// An approximate token counter for prompt budgets, without a model's
// tokenizer: CJK code points count one token each (BPE vocabularies rarely
// merge them), a Latin word or number about one token per 4 bytes (at
// least 1), other symbols one each, whitespace nothing. Good to ~20% on
// English and Chinese prose, which is what a budget needs.
#pragma once

#include <cstddef>
#include <string_view>

namespace ragtor {

size_t approx_tokens(std::string_view utf8);

// The entity a prompt writes for `c` in its text (llm/prompt_builder.cpp),
// or nullptr: the one table of which characters it escapes, for the
// escaping and for its count below.
constexpr const char* xml_entity(char c) {
  switch (c) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    default:
      return nullptr;
  }
}

// approx_tokens of the text as a prompt writes it, XML-escaped (each
// character with an xml_entity written as it), without writing it: each of those is
// one symbol as it is and three tokens escaped (the entity's '&' and ';'
// are symbols, its name a short word between them), so the count is the
// text's own plus two for each. Exact for valid UTF-8. A chunk's is
// counted once, when the chunk is made (chunk::prompt_tokens).
size_t approx_tokens_xml_escaped(std::string_view utf8);

}  // namespace ragtor
