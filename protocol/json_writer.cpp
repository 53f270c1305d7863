#include "protocol/json_writer.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

#include "protocol/text.hpp"

namespace ragtor {

namespace {

constexpr std::string_view replacement_char = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when the
// bytes there are not one. On failure `consumed` is the length of the
// maximal ill-formed subpart (at least 1), so that each broken sequence is
// replaced by exactly one U+FFFD (Unicode §3.9, "substitution of maximal
// subparts").
size_t utf8_sequence(std::string_view s, size_t i, size_t& consumed) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b0 = byte(i);
  consumed = 1;
  if (b0 < 0x80)
    return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // valid range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0)
      lo = 0xA0;  // no overlong forms
    else if (b0 == 0xED)
      hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0)
      lo = 0x90;  // no overlong forms
    else if (b0 == 0xF4)
      hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // continuation byte, C0, C1 or F5..FF
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size())
      return 0;
    unsigned char b = byte(i + k);
    unsigned char min = k == 1 ? lo : 0x80;
    unsigned char max = k == 1 ? hi : 0xBF;
    if (b < min || b > max)
      return 0;
    consumed = k + 1;
  }
  consumed = len;
  return len;
}

void append_escaped_control(std::string& out, unsigned char c) {
  static constexpr char hex[] = "0123456789abcdef";
  switch (c) {
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xF];
  }
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed;
    if (utf8_sequence(s, i, consumed) == 0)
      return false;
    i += consumed;
  }
  return true;
}

namespace {

// 1 for the bytes a JSON string cannot hold as they are (controls, the
// quote, the backslash) and for those that start or continue UTF-8, which
// must be checked; 0 for the rest.
constexpr std::array<uint8_t, 256> not_plain = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[c] = c < 0x20 || c >= 0x80 || c == '"' || c == '\\';
  return t;
}();

// Appends "s" and then `suffix` (unless it is 0) in one append when `s` is
// short and plain (a key, an id, a name); false, with nothing appended,
// otherwise. Strings this short cost more in the block scan's setup and
// in single-character appends than in their bytes.
bool append_short_plain(std::string& out, std::string_view s, char suffix) {
  constexpr size_t max_short = 32;
  if (s.size() > max_short)
    return false;
  uint8_t bad = 0;
  for (char c : s)
    bad |= not_plain[static_cast<unsigned char>(c)];
  if (bad)
    return false;
  char buf[max_short + 3];
  buf[0] = '"';
  std::memcpy(buf + 1, s.data(), s.size());
  size_t n = s.size() + 1;
  buf[n++] = '"';
  if (suffix)
    buf[n++] = suffix;
  out.append(buf, n);
  return true;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  if (append_short_plain(out, s, 0))
    return;
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  // Bytes that stay as they are (printable ASCII but the quote and the
  // backslash, and well-formed UTF-8) are appended as runs, not one by one.
  size_t i = 0, run = 0;
  auto end_run = [&] { out.append(s.data() + run, i - run); };
  while (i < s.size()) {
    // Plain runs 16 bytes at a time (a model request is mostly a prompt).
    i = skip_plain_blocks<true, '"', '\\'>(s, i);
    if (i >= s.size())
      break;
    auto c = static_cast<unsigned char>(s[i]);
    if (!not_plain[c]) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t consumed;
      bool valid = utf8_sequence(s, i, consumed) != 0;
      if (!valid) {
        end_run();
        out += replacement_char;
        run = i + consumed;
      }
      i += consumed;
      continue;
    }
    end_run();
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else
      append_escaped_control(out, c);
    run = ++i;
  }
  end_run();
  out += '"';
}

void json_writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ == 0)
    return;
  size_t top = depth_ - 1;
  if (top < 64) {
    uint64_t bit = uint64_t{1} << top;
    if (!(first_bits_ & bit))
      out_ += ',';
    first_bits_ &= ~bit;
  } else {
    if (!deeper_.back())
      out_ += ',';
    deeper_.back() = false;
  }
}

void json_writer::open(char bracket) {
  before_value();
  out_ += bracket;
  if (depth_ < 64)
    first_bits_ |= uint64_t{1} << depth_;
  else
    deeper_.push_back(true);
  ++depth_;
}

void json_writer::close(char bracket) {
  out_ += bracket;
  if (depth_ == 0)
    return;
  --depth_;
  if (depth_ >= 64)
    deeper_.pop_back();
}

json_writer& json_writer::begin_object() {
  open('{');
  return *this;
}

json_writer& json_writer::end_object() {
  close('}');
  return *this;
}

json_writer& json_writer::begin_array() {
  open('[');
  return *this;
}

json_writer& json_writer::end_array() {
  close(']');
  return *this;
}

json_writer& json_writer::key(std::string_view k) {
  before_value();
  if (!append_short_plain(out_, k, ':')) {
    append_json_string(out_, k);
    out_ += ':';
  }
  after_key_ = true;
  return *this;
}

json_writer& json_writer::value(std::string_view s) {
  before_value();
  append_json_string(out_, s);
  return *this;
}

json_writer& json_writer::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

json_writer& json_writer::value(int64_t i) {
  before_value();
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, i);
  out_.append(buf, res.ptr);
  return *this;
}

json_writer& json_writer::value(uint64_t i) {
  before_value();
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, i);
  out_.append(buf, res.ptr);
  return *this;
}

json_writer& json_writer::value(double d) {
  if (!std::isfinite(d))
    return null();
  before_value();
  // Shortest representation that parses back to the same double; its
  // output ("1e+300", "-0", "0.1") is always a valid JSON number.
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  out_.append(buf, res.ptr);
  return *this;
}

json_writer& json_writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

json_writer& json_writer::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

std::string json_strings(std::initializer_list<std::pair<std::string_view, std::string>> fields) {
  size_t bytes = 2;
  for (auto& [k, v] : fields)
    bytes += k.size() + v.size() + 6;
  json_writer w{bytes};
  w.begin_object();
  for (auto& [k, v] : fields)
    w.field(k, v);
  w.end_object();
  return w.take();
}

}  // namespace ragtor
