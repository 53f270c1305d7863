// Request parsers and response writers of the conversation-management API
// (DESIGN §5): clear, feedback, stop, conversation lists and message pages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/chat_request_json.hpp"
#include "protocol/messages.hpp"

namespace ragtor {

struct clear_request {
  std::string user_id;
  std::string session_id;
  std::string kb_prefix;
};

struct stop_request {
  std::string user_id;
  std::string request_id;
};

template <class T>
struct api_parse {
  bool ok = false;
  T value;
  request_error error;
};

api_parse<clear_request> parse_clear_request(std::string_view body, const request_limits& limits);
api_parse<stop_request> parse_stop_request(std::string_view body, const request_limits& limits);
api_parse<feedback_vote> parse_feedback_request(std::string_view body,
                                                const request_limits& limits);

std::string conversation_page_json(const conversation_page& page);
std::string messages_json(const std::string& conversation_id,
                          const std::vector<stored_message>& msgs, bool has_more);
std::string clear_json(int64_t cleared);

}  // namespace ragtor
