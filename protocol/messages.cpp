#include "protocol/messages.hpp"

namespace ragtor {

std::string_view to_string(event_kind k) {
  switch (k) {
    case event_kind::start:
      return "start";
    case event_kind::route_decision:
      return "route_decision";
    case event_kind::progress:
      return "progress";
    case event_kind::token:
      return "token";
    case event_kind::execution_log:
      return "execution_log";
    case event_kind::error:
      return "error";
    case event_kind::done:
      return "done";
  }
  return "token";
}

}  // namespace ragtor
