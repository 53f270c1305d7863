// The OpenAI-compatible façade's wire format (POST /v1/chat/completions,
// GET /v1/models), as pure functions: parsing a chat completions request,
// naming knowledge bases as models, and rendering `chat.completion`,
// `chat.completion.chunk` and OpenAI error objects from a turn's events.
// The handlers (openai_handlers.cpp) run the turn through the same session
// and stream actors as /api/v1/chat; nothing here knows about actors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::http::openai {

// {"error":{"message","type","param","code"}} with its HTTP status.
struct api_error {
  unsigned status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
};

std::string error_json(const api_error& e);

// What a model id names: "auto" (the router picks the KB), "general" (no
// KB), "kb:<name>" or "kb:<name>:<agent_type>".
struct model_target {
  std::string kb;          // "" for auto and general
  std::string agent_type;  // "" = the KB's default
  bool general = false;
};

// nullopt when `model` is none of the forms above (or names an unknown
// agent type); whether the KB exists is the caller's question.
std::optional<model_target> parse_model(std::string_view model);

// The model ids for the served KBs: auto, general, then per KB kb:<name>
// and kb:<name>:<agent_type> for every agent type.
std::vector<std::string> model_ids(const std::vector<std::string>& kbs);

// {"object":"list","data":[{"id","object":"model","created","owned_by":"ragtor"}...]}
std::string models_json(const std::vector<std::string>& ids, int64_t created);

struct completion_request {
  std::string model;
  model_target target;
  std::string question;                 // the last message (role user)
  std::vector<stored_message> history;  // the user/assistant messages before it
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  double temperature = -1;     // < 0: not given
  int32_t max_tokens = 0;      // max_tokens or max_completion_tokens; 0: not given
  std::string user;            // "" = not given
};

struct parsed_request {
  bool ok = false;
  completion_request request;
  api_error error;
};

// Parses and validates a request body. Unknown fields are ignored (clients
// send many); `tools`, `functions`, `n` > 1, non-text content parts and a
// conversation that does not end with a user message are refused.
parsed_request parse_completion_request(std::string_view body, size_t max_body_bytes,
                                        size_t max_message_bytes);

// What a turn produced, gathered from its events.
class turn_outcome {
public:
  // Takes one event; returns the answer text it adds ("" for none).
  std::string add(const stream_event& ev);
  bool done() const { return done_; }
  const std::string& content() const { return content_; }
  // "stop", "length"; a cancelled turn (the client stopped it) is "stop".
  const std::string& finish_reason() const { return finish_reason_; }
  const usage_info& usage() const { return usage_; }
  const std::string& citations_json() const { return citations_; }
  // The turn failed (not a cancel): the error to report, else nullopt.
  std::optional<api_error> failure() const;
  // The citations as text appended to the answer ("\n\nSources: [1] ...");
  // "" without citations. Streamed and non-streamed answers both end with it.
  std::string sources_text() const;

private:
  std::string content_;
  std::string finish_reason_ = "stop";
  usage_info usage_;
  std::string citations_ = "[]";
  std::string error_code_;
  std::string error_message_;
  bool done_ = false;
};

// What every object of one completion shares.
struct completion_meta {
  std::string id;  // "chatcmpl-<request_id>"
  int64_t created = 0;
  std::string model;
};

// chat.completion.chunk objects: the first (role), content, the last
// (finish_reason, plus `citations`), and the usage chunk (choices: []).
std::string role_chunk(const completion_meta& m);
std::string content_chunk(const completion_meta& m, std::string_view text);
std::string finish_chunk(const completion_meta& m, std::string_view finish_reason,
                         std::string_view citations_json);
std::string usage_chunk(const completion_meta& m, const usage_info& u);

// The chat.completion object of a non-streamed reply.
std::string completion_json(const completion_meta& m, const turn_outcome& out);

}  // namespace ragtor::http::openai
