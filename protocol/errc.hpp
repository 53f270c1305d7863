// ragtor's single error enum. Every failure that crosses an actor or HTTP
// boundary is a caf::error carrying one of these codes (category "ragtor"),
// and exactly one function (http_error_of) turns it into an HTTP status and
// a stable JSON error code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

namespace ragtor {

enum class errc : uint8_t {
  none = 0,
  invalid_request,    // malformed JSON, bad field, bad id
  payload_too_large,  // body or message above the configured limit
  not_found,          // unknown conversation, KB, request
  conflict,           // e.g. a request_id reused for a different message
  unavailable,        // store or dependency down: retry later
  overloaded,         // admission control refused the work
  llm_failed,         // the language model failed or timed out
  retrieval_failed,   // a retrieval agent failed
  cancelled,          // the client went away or asked to stop
  timeout,            // a deadline passed
  internal,           // a bug: never expected
};

constexpr caf::atom_value errc_category = caf::atom("ragtor");

std::string_view to_string(errc x);

// Builds a ragtor error with a human-readable message as its context.
caf::error make_error(errc code, std::string message);
inline caf::error make_error(errc code) {
  return make_error(code, std::string{});
}

// The message a ragtor error carries ("" when none).
std::string error_message(const caf::error& err);

// ragtor code of any error: CAF's own errors (timeouts, dead actors) are
// mapped to the closest ragtor code.
errc code_of(const caf::error& err);

struct http_error {
  unsigned status;        // HTTP status code
  std::string_view code;  // stable machine-readable code for JSON bodies
};

// The one errc -> HTTP mapping used by every endpoint.
http_error http_error_of(errc code);

}  // namespace ragtor
