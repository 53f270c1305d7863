#include "protocol/json_document.hpp"

namespace ragtor {

struct json_document::thread_parser {
  simdjson::dom::parser parser;
  bool busy = false;
};

json_document::json_document(std::string_view text) {
  thread_local thread_parser tp;
  simdjson::dom::parser* p = nullptr;
  if (!tp.busy && text.size() <= kReusedMaxBytes) {
    tp.busy = true;
    reused_from_ = &tp;
    p = &tp.parser;
  } else {
    own_ = std::make_unique<simdjson::dom::parser>();
    p = own_.get();
  }
  // realloc_if_needed: the parser copies the text into its own padded
  // buffer, which a reused parser keeps.
  root_ = p->parse(text.data(), text.size(), true);
}

json_document::~json_document() {
  // The parser of the thread that made the document, even if a coroutine
  // holding it moved to another thread meanwhile.
  if (reused_from_)
    reused_from_->busy = false;
}

}  // namespace ragtor
