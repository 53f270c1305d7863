// An approximate token counter for prompt budgets, without a model's
// tokenizer: CJK code points count one token each (BPE vocabularies rarely
// merge them), a Latin word or number about one token per 4 bytes (at
// least 1), other symbols one each, whitespace nothing. Good to ~20% on
// English and Chinese prose, which is what a budget needs.
#pragma once

#include <cstddef>
#include <string_view>

namespace ragtor::llm {

size_t approx_tokens(std::string_view utf8);

}  // namespace ragtor::llm
