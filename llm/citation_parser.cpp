#include "llm/citation_parser.hpp"

#include <cstdlib>
#include <optional>

#include <utf8proc.h>

#include "retrieval/html_text.hpp"

namespace ragtor::llm {

namespace {

constexpr size_t max_tag_bytes = 1000;
constexpr size_t min_quote_chars = 8;

// Case-folded, NFKC, typographic quotes folded, whitespace runs collapsed
// to one space, trimmed.
std::string normalise(std::string_view s) {
  utf8proc_uint8_t* folded = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                        static_cast<utf8proc_ssize_t>(s.size()), &folded,
                        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE
                                                       | UTF8PROC_COMPAT | UTF8PROC_CASEFOLD));
  std::string text;
  if (n >= 0) {
    text.assign(reinterpret_cast<char*>(folded), static_cast<size_t>(n));
    std::free(folded);
  } else {
    text.assign(s);
  }
  std::string out;
  bool space = false;
  for (size_t i = 0; i < text.size();) {
    std::string_view rest{text.data() + i, text.size() - i};
    // U+2018/2019 ’ ‘ -> ', U+201C/201D “ ” -> "
    if (rest.starts_with("\xE2\x80\x98") || rest.starts_with("\xE2\x80\x99")) {
      out += space && !out.empty() ? " '" : "'";
      space = false;
      i += 3;
      continue;
    }
    if (rest.starts_with("\xE2\x80\x9C") || rest.starts_with("\xE2\x80\x9D")) {
      out += space && !out.empty() ? " \"" : "\"";
      space = false;
      i += 3;
      continue;
    }
    char c = text[i++];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80)
      ++n;
  return n;
}

// The value of attribute `name` in a start tag's attribute text.
std::optional<std::string> attribute(std::string_view attrs, std::string_view name) {
  size_t i = 0;
  while (i < attrs.size()) {
    while (i < attrs.size()
           && (attrs[i] == ' ' || attrs[i] == '\t' || attrs[i] == '\n' || attrs[i] == '\r'
               || attrs[i] == '/'))
      ++i;
    auto key_start = i;
    while (i < attrs.size() && attrs[i] != '=' && attrs[i] != ' ' && attrs[i] != '\t'
           && attrs[i] != '\n')
      ++i;
    auto key = attrs.substr(key_start, i - key_start);
    while (i < attrs.size() && (attrs[i] == ' ' || attrs[i] == '\t'))
      ++i;
    if (i >= attrs.size() || attrs[i] != '=') {
      if (key.empty())
        ++i;
      continue;
    }
    ++i;
    while (i < attrs.size() && (attrs[i] == ' ' || attrs[i] == '\t'))
      ++i;
    std::string_view value;
    if (i < attrs.size() && (attrs[i] == '"' || attrs[i] == '\'')) {
      char q = attrs[i++];
      auto end = attrs.find(q, i);
      if (end == std::string_view::npos)
        end = attrs.size();
      value = attrs.substr(i, end - i);
      i = end + 1;
    } else {
      auto start = i;
      while (i < attrs.size() && attrs[i] != ' ' && attrs[i] != '\t' && attrs[i] != '/')
        ++i;
      value = attrs.substr(start, i - start);
    }
    if (key == name)
      return decode_xml_entities(value);
  }
  return std::nullopt;
}

}  // namespace

std::string decode_xml_entities(std::string_view s) {
  return decode_html_entities(s);
}

bool quote_matches(std::string_view quote, std::string_view document) {
  auto q = normalise(quote);
  if (code_points(q) < min_quote_chars)
    return false;
  return normalise(document).find(q) != std::string::npos;
}

citation_stream_parser::citation_stream_parser(std::vector<citation_source> sources)
    : sources_(std::move(sources)) {}

void citation_stream_parser::add_citation(std::string_view attrs) {
  citation c;
  c.doc_id = attribute(attrs, "doc_id").value_or("");
  c.quote = attribute(attrs, "quote").value_or("");
  const citation_source* same_doc = nullptr;
  for (auto& s : sources_) {
    if (s.doc_id != c.doc_id)
      continue;
    if (!same_doc)
      same_doc = &s;
    if (quote_matches(c.quote, s.text)) {
      c.chunk_id = s.chunk_id;
      c.title = s.title;
      c.verified = true;
      break;
    }
  }
  if (!c.verified && same_doc) {
    c.chunk_id = same_doc->chunk_id;
    c.title = same_doc->title;
  }
  citations_.push_back(std::move(c));
}

std::string citation_stream_parser::drain(bool final) {
  static constexpr std::string_view open = "<cite";
  static constexpr std::string_view close = "</cite>";
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    auto lt = pending_.find('<', i);
    if (lt == std::string::npos) {
      out.append(pending_, i, std::string::npos);
      i = pending_.size();
      break;
    }
    out.append(pending_, i, lt - i);
    std::string_view rest{pending_.data() + lt, pending_.size() - lt};
    // A closing tag (or what may still become one).
    if (rest.size() < close.size() && close.starts_with(rest) && !final) {
      i = lt;
      pending_.erase(0, i);
      return out;
    }
    if (rest.starts_with(close)) {
      i = lt + close.size();
      continue;
    }
    // An opening tag: "<cite" then whitespace, '>' or '/'.
    if (rest.size() <= open.size() && open.starts_with(rest) && !final) {
      pending_.erase(0, lt);
      return out;
    }
    bool is_open =
        rest.starts_with(open) && rest.size() > open.size()
        && (rest[open.size()] == ' ' || rest[open.size()] == '>' || rest[open.size()] == '/'
            || rest[open.size()] == '\t' || rest[open.size()] == '\n' || rest[open.size()] == '\r');
    if (is_open) {
      auto gt = rest.find('>');
      if (gt == std::string_view::npos) {
        if (!final && rest.size() < max_tag_bytes) {
          pending_.erase(0, lt);
          return out;
        }
        // Never closed: it was text after all.
        out += '<';
        i = lt + 1;
        continue;
      }
      auto attrs = rest.substr(open.size(), gt - open.size());
      add_citation(attrs);
      i = lt + gt + 1;
      continue;
    }
    out += '<';
    i = lt + 1;
  }
  pending_.erase(0, i);
  return out;
}

std::string citation_stream_parser::feed(std::string_view delta) {
  pending_.append(delta);
  return drain(false);
}

std::string citation_stream_parser::finish() {
  auto out = drain(true);
  out += pending_;
  pending_.clear();
  return out;
}

}  // namespace ragtor::llm
