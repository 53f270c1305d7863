#include "protocol/errc.hpp"

#include <caf/sec.hpp>

namespace ragtor {

std::string_view to_string(errc x) {
  switch (x) {
    case errc::none:
      return "none";
    case errc::invalid_request:
      return "invalid_request";
    case errc::payload_too_large:
      return "payload_too_large";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::unavailable:
      return "unavailable";
    case errc::overloaded:
      return "overloaded";
    case errc::llm_failed:
      return "llm_failed";
    case errc::retrieval_failed:
      return "retrieval_failed";
    case errc::cancelled:
      return "cancelled";
    case errc::timeout:
      return "timeout";
    case errc::internal:
      return "internal";
  }
  return "internal";
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), errc_category,
                    caf::make_message(std::move(message))};
}

std::string error_message(const caf::error& err) {
  if (err.category() == errc_category) {
    auto& ctx = err.context();
    if (ctx.match_elements<std::string>())
      return ctx.get_as<std::string>(0);
    return {};
  }
  if (err.category() == caf::atom("system"))
    return std::string{caf::to_string(static_cast<caf::sec>(err.code()))};
  return "error " + std::to_string(err.code());
}

errc code_of(const caf::error& err) {
  if (!err)
    return errc::none;
  if (err.category() == errc_category)
    return static_cast<errc>(err.code());
  if (err.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(err.code())) {
      case caf::sec::request_timeout:
        return errc::timeout;
      case caf::sec::request_receiver_down:
      case caf::sec::remote_linking_failed:
      case caf::sec::no_route_to_receiving_node:
        return errc::unavailable;
      default:
        return errc::internal;
    }
  }
  if (err.category() == caf::atom("exit"))
    return errc::unavailable;
  return errc::internal;
}

http_error http_error_of(errc code) {
  switch (code) {
    case errc::none:
      return {200, "ok"};
    case errc::invalid_request:
      return {400, "invalid_request"};
    case errc::payload_too_large:
      return {413, "payload_too_large"};
    case errc::not_found:
      return {404, "not_found"};
    case errc::conflict:
      return {409, "conflict"};
    case errc::unavailable:
      return {503, "unavailable"};
    case errc::overloaded:
      return {503, "overloaded"};
    case errc::llm_failed:
      return {502, "llm_failed"};
    case errc::retrieval_failed:
      return {502, "retrieval_failed"};
    case errc::cancelled:
      return {499, "cancelled"};
    case errc::timeout:
      return {504, "timeout"};
    case errc::internal:
      return {500, "internal"};
  }
  return {500, "internal"};
}

}  // namespace ragtor
