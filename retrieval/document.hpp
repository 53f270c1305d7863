// Documents as ingested and the chunks retrieval works on.
#pragma once

#include <cstdint>
#include <string>

namespace ragtor {

struct document {
  std::string id;
  std::string title;
  std::string text;
  std::string source;  // where it came from (path), for display only
};

struct chunk {
  std::string chunk_id;  // doc_id + "#" + index
  std::string doc_id;
  std::string title;
  std::string text;
  uint32_t offset = 0;  // byte offset of `text` in the document text
};

}  // namespace ragtor
