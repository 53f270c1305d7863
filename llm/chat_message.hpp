// One chat message for an OpenAI-compatible model: role ("system", "user", "assistant") and text.
#pragma once

#include <string>

namespace ragtor::llm {

struct chat_message {
  std::string role;
  std::string content;
};

}  // namespace ragtor::llm
