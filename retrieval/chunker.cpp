#include "retrieval/chunker.hpp"

#include <algorithm>

#include "protocol/token_count.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

// A piece of the document text (a sentence or part of an overlong one).
struct span {
  size_t begin;  // byte offsets into the text
  size_t end;
  size_t cp_begin = 0;  // the same, in code points
  size_t cp_end = 0;
  bool paragraph_end = false;  // a blank line follows: a good place to cut
  bool heading = false;        // a Markdown heading line
};

bool is_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

size_t code_points(std::string_view s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return !is_continuation(c); }));
}

// Byte length of the longest prefix of `s` with at most `max_cp` code
// points, preferring to end after a space in its second half.
size_t cut_point(std::string_view s, size_t max_cp) {
  size_t bytes = 0;
  for (size_t cp = 0; bytes < s.size(); ++cp) {
    if (cp == max_cp)
      break;
    ++bytes;
    while (bytes < s.size() && is_continuation(s[bytes]))
      ++bytes;
  }
  if (bytes >= s.size())
    return s.size();
  for (size_t b = bytes; b > bytes / 2; --b)
    if (s[b - 1] == ' ' || s[b - 1] == '\n' || s[b - 1] == '\t')
      return b;
  return bytes;
}

bool blank_line_between(std::string_view text, size_t from, size_t to) {
  int newlines = 0;
  for (size_t i = from; i < to; ++i)
    if (text[i] == '\n' && ++newlines == 2)
      return true;
  return false;
}

std::vector<span> sentence_spans(std::string_view text, size_t max_chars) {
  std::vector<span> out;
  for (auto s : split_sentences(text)) {
    size_t begin = static_cast<size_t>(s.data() - text.data());
    while (!s.empty()) {
      auto n = code_points(s) > max_chars ? cut_point(s, max_chars) : s.size();
      auto piece_end = n;
      while (piece_end > 0
             && (s[piece_end - 1] == ' ' || s[piece_end - 1] == '\n' || s[piece_end - 1] == '\t'))
        --piece_end;  // a cut after a space: the space belongs to neither piece
      out.push_back({begin, begin + piece_end});
      begin += n;
      s.remove_prefix(n);
      // A cut after a space leaves the next piece starting with it.
      while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
        s.remove_prefix(1);
        ++begin;
      }
    }
  }
  // Code point positions, counted once over the gaps and the spans.
  size_t pos = 0, cp = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    auto& sp = out[i];
    cp += code_points(text.substr(pos, sp.begin - pos));
    sp.cp_begin = cp;
    cp += code_points(text.substr(sp.begin, sp.end - sp.begin));
    sp.cp_end = cp;
    pos = sp.end;
    size_t next = i + 1 < out.size() ? out[i + 1].begin : text.size();
    // A heading alone is not a place to end a chunk: it belongs with the
    // text below it.
    sp.heading = text[sp.begin] == '#';
    sp.paragraph_end = !sp.heading && blank_line_between(text, sp.end, next);
  }
  return out;
}

}  // namespace

std::vector<chunk> chunk_document(const document& doc, const chunker_options& opts) {
  // Tiny limits would make chunks of single words; clamp to something sane.
  auto max_chars = std::max<size_t>(opts.max_chars, 16);
  auto overlap = std::min(opts.overlap_chars, max_chars / 2);
  auto spans = sentence_spans(doc.text, max_chars);
  std::vector<chunk> out;
  auto width = [&](size_t from, size_t to) { return spans[to].cp_end - spans[from].cp_begin; };
  size_t i = 0;
  while (i < spans.size()) {
    size_t j = i;
    while (j + 1 < spans.size() && width(i, j + 1) <= max_chars)
      ++j;
    if (j + 1 < spans.size() && !spans[j].paragraph_end) {
      for (size_t p = j; p-- > i;)
        if (spans[p].paragraph_end && width(i, p) * 2 >= max_chars) {
          j = p;
          break;
        }
    }
    // A heading belongs to the chunk with its section, not before it.
    while (j > i && j + 1 < spans.size() && spans[j].heading)
      --j;
    chunk c;
    c.chunk_id = doc.id + "#" + std::to_string(out.size());
    c.doc_id = doc.id;
    c.title = doc.title;
    c.offset = static_cast<uint32_t>(spans[i].begin);
    c.text = doc.text.substr(spans[i].begin, spans[j].end - spans[i].begin);
    c.prompt_tokens = static_cast<int32_t>(approx_tokens_xml_escaped(c.text));
    out.push_back(std::move(c));
    if (j + 1 >= spans.size())
      break;
    // Overlap: step back over whole trailing sentences, but only as far as
    // still leaves room for the next new sentence (else the next chunk
    // would add nothing) and never past this chunk's first sentence.
    size_t next = j + 1;
    if (!spans[j].paragraph_end)
      while (next > i + 1 && width(next - 1, j) <= overlap && width(next - 1, j + 1) <= max_chars)
        --next;
    i = next;
  }
  return out;
}

}  // namespace ragtor
