#include "retrieval/html_text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <utility>

namespace ragtor {

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

constexpr std::array<std::pair<std::string_view, uint32_t>, 16> named_entities{{
    {"amp", '&'},
    {"lt", '<'},
    {"gt", '>'},
    {"quot", '"'},
    {"apos", '\''},
    {"nbsp", 0xA0},
    {"ndash", 0x2013},
    {"mdash", 0x2014},
    {"hellip", 0x2026},
    {"lsquo", 0x2018},
    {"rsquo", 0x2019},
    {"ldquo", 0x201C},
    {"rdquo", 0x201D},
    {"copy", 0xA9},
    {"reg", 0xAE},
    {"middot", 0xB7},
}};

// Elements whose boundaries are paragraph breaks / line breaks.
bool is_paragraph_tag(std::string_view t) {
  static constexpr std::string_view tags[] = {
      "p",      "h1",    "h2", "h3", "h4",         "h5",  "h6",   "section", "article", "header",
      "footer", "table", "ul", "ol", "blockquote", "pre", "main", "aside",   "nav",     "figure"};
  return std::find(std::begin(tags), std::end(tags), t) != std::end(tags);
}

bool is_line_tag(std::string_view t) {
  static constexpr std::string_view tags[] = {"br", "div",        "li",      "tr", "dt", "dd",
                                              "hr", "figcaption", "caption", "td", "th"};
  return std::find(std::begin(tags), std::end(tags), t) != std::end(tags);
}

// Removes trailing spaces and ensures `out` ends with `n` newlines (unless
// empty).
void break_line(std::string& out, int n) {
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  if (out.empty())
    return;
  int have = 0;
  for (auto i = out.rbegin(); i != out.rend() && *i == '\n'; ++i)
    ++have;
  for (; have < n; ++have)
    out += '\n';
}

std::string collapse_spaces(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
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

}  // namespace

std::string decode_html_entities(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '&') {
      out += s[i++];
      continue;
    }
    auto semi = s.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12) {
      out += s[i++];
      continue;
    }
    auto name = s.substr(i + 1, semi - i - 1);
    bool decoded = false;
    if (name.size() >= 2 && name[0] == '#') {
      uint32_t cp = 0;
      auto hex = name[1] == 'x' || name[1] == 'X';
      auto digits = name.substr(hex ? 2 : 1);
      auto [p, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (ec == std::errc{} && p == digits.data() + digits.size() && !digits.empty()) {
        append_utf8(out, cp);
        decoded = true;
      }
    } else {
      for (auto& [n, cp] : named_entities)
        if (n == name) {
          append_utf8(out, cp);
          decoded = true;
          break;
        }
    }
    if (decoded) {
      i = semi + 1;
    } else {
      out += s[i++];
    }
  }
  return out;
}

html_text html_to_text(std::string_view html) {
  html_text result;
  std::string text;  // raw text with entities, spaces not yet collapsed
  std::string out;   // final text
  std::string first_h1;
  bool in_h1 = false;
  auto flush = [&] {
    if (text.empty())
      return;
    auto decoded = decode_html_entities(collapse_spaces(text));
    if (in_h1)
      first_h1 += decoded;
    if (!decoded.empty()) {
      if (!out.empty() && out.back() != '\n' && out.back() != ' ' && text.front() == ' ')
        out += ' ';
      out += decoded;
      if (text.back() == ' ' || text.back() == '\n' || text.back() == '\t')
        out += ' ';
    }
    text.clear();
  };
  size_t i = 0;
  while (i < html.size()) {
    if (html[i] != '<') {
      text += html[i++];
      continue;
    }
    if (html.substr(i, 4) == "<!--") {
      auto end = html.find("-->", i + 4);
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    auto close = html.find('>', i + 1);
    if (close == std::string_view::npos) {
      text += html.substr(i);
      break;
    }
    auto tag = html.substr(i + 1, close - i - 1);
    bool closing = !tag.empty() && tag[0] == '/';
    if (closing)
      tag.remove_prefix(1);
    size_t name_end = 0;
    while (name_end < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[name_end]))))
      ++name_end;
    auto name = lower(tag.substr(0, name_end));
    if (name.empty()) {  // "<!DOCTYPE", "< 3": doctype dropped, stray '<' kept as text
      if (!tag.empty() && (tag[0] == '!' || tag[0] == '?'))
        i = close + 1;
      else
        text += html[i++];
      continue;
    }
    i = close + 1;
    if (!closing
        && (name == "script" || name == "style" || name == "template" || name == "title"
            || name == "head")) {
      // Skip to the matching end tag; keep the title's text.
      auto end_tag = "</" + name;
      auto lower_rest = lower(html.substr(i));
      auto end = lower_rest.find(end_tag);
      auto inner = html.substr(i, end == std::string::npos ? html.size() - i : end);
      if (name == "title" && result.title.empty())
        result.title = decode_html_entities(collapse_spaces(inner));
      if (name == "head") {
        auto lower_inner = lower(inner);
        auto t = lower_inner.find("<title");
        if (t != std::string::npos && result.title.empty()) {
          auto gt = lower_inner.find('>', t);
          auto te = lower_inner.find("</title", t);
          if (gt != std::string::npos && te != std::string::npos && gt < te)
            result.title = decode_html_entities(collapse_spaces(inner.substr(gt + 1, te - gt - 1)));
        }
      }
      if (end == std::string::npos) {
        i = html.size();
      } else {
        auto gt = html.find('>', i + end);
        i = gt == std::string_view::npos ? html.size() : gt + 1;
      }
      continue;
    }
    if (is_paragraph_tag(name)) {
      flush();
      break_line(out, 2);
      if (name == "h1")
        in_h1 = !closing && first_h1.empty();
    } else if (is_line_tag(name)) {
      flush();
      break_line(out, 1);
    }
  }
  flush();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  result.text = std::move(out);
  if (result.title.empty())
    result.title = collapse_spaces(first_h1);
  return result;
}

}  // namespace ragtor
