// libFuzzer target: what an OpenAI-compatible server streams back — the SSE
// framing (fed in two pieces split where the first byte says, which must
// give the same events as one piece) and each `data:` chunk's JSON.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "llm/openai_wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view all{reinterpret_cast<const char*>(data), size};
  auto bytes = all.substr(1);
  auto cut = std::min<size_t>(static_cast<uint8_t>(all[0]), bytes.size());
  ragtor::llm::sse_parser whole, split;
  auto events = whole.push(bytes);
  auto a = split.push(bytes.substr(0, cut));
  auto b = split.push(bytes.substr(cut));
  a.insert(a.end(), b.begin(), b.end());
  if (a != events)
    std::abort();  // framing must not depend on how the bytes arrive
  for (auto& ev : events)
    (void)ragtor::llm::parse_stream_chunk(ev);
  (void)ragtor::llm::parse_completion(bytes);
  (void)ragtor::llm::parse_embeddings(bytes);
  (void)ragtor::llm::parse_rerank(bytes, 8);
  (void)ragtor::llm::parse_error_body(bytes);
  return 0;
}
