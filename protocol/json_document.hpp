// One JSON document parsed with simdjson's DOM parser, without the
// allocations of a fresh parser per document. A new simdjson::dom::parser
// allocates its tape, string buffer and structural index for every
// document, and parsing a std::string_view needs a padded copy too; on the
// model client's thread, one document per streamed chunk, that was a third
// of the thread's time in malloc. Documents up to kReusedMaxBytes use a
// parser kept per thread, whose buffers stay allocated between documents;
// a larger document, or one parsed while another document of the same
// thread is still alive, gets a parser of its own, so nesting is safe and a
// thread keeps at most the buffers of one small document.
//
// Elements read from the document are valid while it lives.
#pragma once

#include <simdjson.h>

#include <memory>
#include <string_view>

namespace ragtor {

class json_document {
public:
  static constexpr size_t kReusedMaxBytes = 16 * 1024;

  explicit json_document(std::string_view text);
  ~json_document();
  json_document(const json_document&) = delete;
  json_document& operator=(const json_document&) = delete;

  // The root, or the parse error.
  const simdjson::simdjson_result<simdjson::dom::element>& root() const { return root_; }
  simdjson::error_code error() const { return root_.error(); }
  // root().get(out): SUCCESS when the document parsed and its root is a T.
  template <class T>
  simdjson::error_code get(T& out) const {
    return simdjson::simdjson_result<simdjson::dom::element>{root_}.get(out);
  }

  // Whether this document uses its thread's parser (for tests).
  bool reused() const { return reused_from_ != nullptr; }

private:
  struct thread_parser;
  thread_parser* reused_from_ = nullptr;  // the thread parser this document holds
  std::unique_ptr<simdjson::dom::parser> own_;
  simdjson::simdjson_result<simdjson::dom::element> root_;
};

}  // namespace ragtor
