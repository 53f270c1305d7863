#include "retrieval/chunker.hpp"

#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

// A sentence as a byte range of the document text.
struct span {
  size_t begin;
  size_t end;
};

// Largest cut <= n that does not split a UTF-8 sequence.
size_t utf8_cut(std::string_view s, size_t n) {
  if (n >= s.size())
    return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n;
  return n;
}

std::vector<span> sentence_spans(const std::string& text, size_t max_chars) {
  std::vector<span> out;
  for (auto s : split_sentences(text)) {
    size_t begin = static_cast<size_t>(s.data() - text.data());
    // Overlong sentences are hard-split on code point boundaries.
    while (s.size() > max_chars) {
      auto cut = utf8_cut(s, max_chars);
      if (cut == 0)
        cut = max_chars;
      out.push_back({begin, begin + cut});
      begin += cut;
      s.remove_prefix(cut);
    }
    if (!s.empty())
      out.push_back({begin, begin + s.size()});
  }
  return out;
}

}  // namespace

std::vector<chunk> chunk_document(const document& doc, const chunker_options& opts) {
  auto max_chars = std::max<size_t>(opts.max_chars, 16);
  auto spans = sentence_spans(doc.text, max_chars);
  std::vector<chunk> out;
  size_t i = 0;
  while (i < spans.size()) {
    size_t j = i;
    // Pack sentences while the chunk (as a contiguous range) fits.
    while (j + 1 < spans.size() && spans[j + 1].end - spans[i].begin <= max_chars)
      ++j;
    chunk c;
    c.doc_id = doc.id;
    c.title = doc.title;
    c.offset = static_cast<uint32_t>(spans[i].begin);
    c.text = doc.text.substr(spans[i].begin, spans[j].end - spans[i].begin);
    c.chunk_id = doc.id + "#" + std::to_string(out.size());
    out.push_back(std::move(c));
    if (j + 1 >= spans.size())
      break;
    // Start the next chunk with trailing sentences worth <= overlap_chars.
    size_t next = j + 1;
    while (next > i + 1 && spans[j].end - spans[next - 1].begin <= opts.overlap_chars)
      --next;
    i = next;
  }
  return out;
}

}  // namespace ragtor
