// A blocking HTTP/1.1 POST of a JSON body, for the guided workflow's HTTP
// JSON tools (seed 003's local tools). Runs on the calling thread: call it
// from a detached actor. Plain http:// only; the whole call (connect,
// write, read) is bounded by `timeout_ms`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace ragtor {

// The response body of a 2xx answer; errors: unavailable (connect, I/O,
// non-2xx status: message names it), timeout, invalid_request (bad URL).
caf::expected<std::string> post_json(std::string_view url, std::string_view body,
                                     int32_t timeout_ms, size_t max_response_bytes = 1 << 20);

}  // namespace ragtor
