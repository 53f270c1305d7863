// Documents as ingested and the chunks retrieval works on.
#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace ragtor {

struct document {
  std::string id;
  std::string title;
  std::string text;
  std::string source;  // where it came from (path), for display only
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, document& x) {
  return f(caf::meta::type_name("document"), x.id, x.title, x.text, x.source);
}

struct chunk {
  std::string chunk_id;  // doc_id + "#" + index
  std::string doc_id;
  std::string title;
  std::string text;
  uint32_t offset = 0;  // byte offset of `text` in the document text
};

}  // namespace ragtor
