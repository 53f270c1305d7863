// libFuzzer target: a ChatRequest body (POST /api/v1/chat[/stream]).
// Whatever the bytes, parsing answers ok or a 400/413 naming a problem.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/api_json.hpp"
#include "protocol/chat_request_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body{reinterpret_cast<const char*>(data), size};
  ragtor::request_limits limits;
  limits.max_body_bytes = 64 << 10;
  limits.max_message_bytes = 4 << 10;
  auto r = ragtor::parse_chat_request(body, limits);
  if (!r.ok && (r.error.message.empty() || (r.error.status != 400 && r.error.status != 413)))
    std::abort();  // a refusal must say why, with a client-error status
  if (r.ok && r.request.message.size() > limits.max_message_bytes)
    std::abort();
  (void)ragtor::parse_clear_request(body, limits);
  (void)ragtor::parse_stop_request(body, limits);
  return 0;
}
