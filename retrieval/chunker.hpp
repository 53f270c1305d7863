// Splits documents into the chunks retrieval indexes and quotes from.
// Chunks are contiguous slices of the document text made of whole
// sentences (split_sentences), packed up to max_chars characters (Unicode
// code points, so CJK text gets as many characters as Latin text). A chunk
// prefers to end at a paragraph boundary once it is half full, so a chunk
// rarely mixes the tail of one topic with the head of the next. When a cut
// falls inside a paragraph, the next chunk repeats the trailing sentences
// worth at most overlap_chars, so a passage that straddles the cut is still
// found whole. Sentences longer than max_chars are cut at a space when
// possible and never inside a UTF-8 sequence.
#pragma once

#include <cstddef>
#include <vector>

#include "protocol/document.hpp"

namespace ragtor {

struct chunker_options {
  size_t max_chars = 800;
  size_t overlap_chars = 100;
  bool operator==(const chunker_options&) const = default;
};

// Chunks of `doc` in text order; chunk_id = doc.id + "#" + index, offset =
// byte offset of the chunk text in doc.text. A document without text has
// no chunks.
std::vector<chunk> chunk_document(const document& doc, const chunker_options& opts);

}  // namespace ragtor
