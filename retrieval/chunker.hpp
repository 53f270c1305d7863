// Splits documents into retrieval chunks: paragraphs first, then sentences,
// packed up to max_chars bytes, with whole trailing sentences repeated as
// overlap; never splits inside a UTF-8 sequence.
#pragma once

#include <cstddef>
#include <vector>

#include "retrieval/document.hpp"

namespace ragtor {

struct chunker_options {
  size_t max_chars = 800;
  size_t overlap_chars = 100;
};

std::vector<chunk> chunk_document(const document& doc, const chunker_options& opts);

}  // namespace ragtor
