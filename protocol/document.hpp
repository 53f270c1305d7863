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
  // approx_tokens_xml_escaped(text): what the text adds to a prompt,
  // counted once by the chunker instead of in every turn's prompt; -1 when
  // not counted (a chunk made elsewhere).
  int32_t prompt_tokens = -1;
};

}  // namespace ragtor
