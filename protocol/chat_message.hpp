// One chat message for an OpenAI-compatible model: role ("system", "user",
// "assistant", "tool") and text; an assistant message may carry the tool
// calls the model made, a "tool" message answers one of them.
#pragma once

#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace ragtor {

// A function call the model asked for (OpenAI tools format); `arguments`
// is the JSON text the model sent, unparsed (it may be malformed).
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call& x) {
  return f(caf::meta::type_name("tool_call"), x.id, x.name, x.arguments);
}

namespace llm {

struct chat_message {
  std::string role;
  std::string content;
  std::string tool_call_id;           // role "tool": the call it answers
  std::vector<tool_call> tool_calls;  // role "assistant": the calls it made
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_message& x) {
  return f(caf::meta::type_name("chat_message"), x.role, x.content, x.tool_call_id, x.tool_calls);
}

}  // namespace llm
}  // namespace ragtor
