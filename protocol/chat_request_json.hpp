// Strict parsing and validation of ChatRequest bodies (DESIGN §5):
// required fields, id charset/length, message length, unknown fields and
// invalid UTF-8 are rejected with errc::invalid_request (or
// payload_too_large) and the offending field named.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "protocol/messages.hpp"

namespace ragtor {

struct request_limits {
  size_t max_body_bytes = 1 << 20;      // 1 MiB
  size_t max_message_bytes = 32 << 10;  // 32 KiB
  size_t max_id_chars = 128;
};

// Why a request was rejected; `field` is "" when not about one field.
struct request_error {
  int status = 400;  // 400 or 413
  std::string code;  // "invalid_request" | "payload_too_large"
  std::string message;
  std::string field;
};

struct chat_request_parse {
  bool ok = false;
  chat_request request;
  request_error error;
};

// Parses and validates one ChatRequest JSON body.
chat_request_parse parse_chat_request(std::string_view body, const request_limits& limits);

// True when `id` is 1..max chars of [A-Za-z0-9_.:@-].
bool is_valid_id(std::string_view id, size_t max_chars);

// JSON body {"error":{"code","message","field"?}} for an error response.
std::string error_body(std::string_view code, std::string_view message,
                       std::string_view field = {});

}  // namespace ragtor
