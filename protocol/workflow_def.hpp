// A KB's guided-workflow definition (seed 003): its intents with the
// slots they need and the sources they search, its HTTP JSON tools and its
// bounds. Part of a KB's settings (`workflow`), so it is validated wherever
// settings are; the workflow that runs a turn through it is
// pipeline/workflow.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace ragtor::wf {

struct slot_def {
  std::string name;
  std::string description;
  std::string question;  // how to ask for it; "" = generated from the description
};

struct intent_def {
  std::string l1;  // business area, e.g. "support"
  std::string l2;  // the intent's name, unique, e.g. "tech_issue"
  std::string description;
  std::vector<slot_def> slots;  // required before searching
  // Where to search, in order of preference: "kb" (this KB), "kb:<name>"
  // (another KB) or "tool:<name>" (an HTTP JSON tool of `tools`).
  std::vector<std::string> sources;
};

// An HTTP JSON tool: POST {"query", "intent", "slots"} to `url`; the answer
// is {"results":[{"id","title","text"}]} (or any JSON, used as one text).
struct tool_def {
  std::string name;
  std::string description;
  std::string url;  // http://host:port/path
  int32_t timeout_ms = 5000;
};

struct workflow_def {
  std::string business;  // what the assistant is for (chit-chat steers back to it)
  std::vector<intent_def> intents;
  std::vector<tool_def> tools;
  int32_t max_ask_rounds = 3;
  int32_t max_retrieval_rounds = 3;
  int32_t model_timeout_ms = 20000;  // per model call
  int32_t model_retries = 2;         // after the first attempt, with backoff

  const intent_def* intent(std::string_view l2) const;
  const tool_def* tool(std::string_view name) const;
};

// Parses and validates a KB's `workflow` object; errors name the field.
caf::expected<workflow_def> parse_workflow(std::string_view json);

}  // namespace ragtor::wf
