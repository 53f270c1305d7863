// libFuzzer target: the citation parser on a model's streamed answer (tags
// like <cite id="1" quote="…"/>), fed in pieces of the sizes the first
// bytes say; and the quote check against a document.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "llm/citation_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2)
    return 0;
  std::string_view all{reinterpret_cast<const char*>(data), size};
  size_t step = 1 + static_cast<uint8_t>(all[0]) % 17;
  auto text = all.substr(1);
  std::vector<ragtor::llm::citation_source> sources(3);
  for (size_t i = 0; i < sources.size(); ++i) {
    sources[i].doc_id = "doc" + std::to_string(i + 1);
    sources[i].chunk_id = std::to_string(i + 1);
    sources[i].text = std::string{text.substr(0, text.size() / (i + 1))};
  }
  ragtor::llm::citation_stream_parser p{sources};
  std::string shown;
  for (size_t at = 0; at < text.size(); at += step)
    shown += p.feed(text.substr(at, step));
  shown += p.finish();
  if (shown.size() > text.size() * 4 + 64)
    std::abort();  // visible text never grows beyond its input (entities decode shorter)
  (void)ragtor::llm::decode_xml_entities(text);
  (void)ragtor::llm::quote_matches(text.substr(0, text.size() / 2), text);
  return 0;
}
