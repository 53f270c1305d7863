// libFuzzer target: the SSE writer. Whatever a token or an error message
// contains (newlines, "data:", control bytes, invalid UTF-8), each event is
// exactly one SSE frame: `id:` and `data:` lines and one blank line at the
// end — a client can never be fed an event nobody sent.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/stream_events.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text{reinterpret_cast<const char*>(data), size};
  for (auto ev : {ragtor::make_token_event(text), ragtor::make_error_event("internal", text)}) {
    std::string out;
    ragtor::append_sse_frame(out, ev, "req-1", 7);
    if (out.size() < 2 || out.compare(out.size() - 2, 2, "\n\n") != 0)
      std::abort();
    if (out.find("\n\n") != out.size() - 2 || out.find('\r') != std::string::npos)
      std::abort();
    size_t at = 0;
    while (at + 1 < out.size()) {
      auto end = out.find('\n', at);
      std::string_view line{out.data() + at, end - at};
      if (!line.starts_with("id: ") && !line.starts_with("data: "))
        std::abort();
      at = end + 1;
    }
  }
  return 0;
}
