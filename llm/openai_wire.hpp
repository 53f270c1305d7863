// The OpenAI wire format, without sockets: request bodies, the SSE line
// protocol of streamed completions, and the JSON of streamed chunks,
// completions, embeddings and error bodies. Unit-testable byte by byte.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/chat_message.hpp"

namespace ragtor::llm {

struct chat_params {
  std::vector<chat_message> messages;
  std::optional<double> temperature;
  std::optional<int32_t> max_tokens;
  std::string extra_json;  // raw members spliced into the body, e.g. "\"tools\":[...]"
  std::string tools_json;   // a JSON array of tools (OpenAI format); "" = none
  std::string tool_choice;  // "" = omitted; auto | none | required
};

struct usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

// POST /chat/completions body; streaming bodies ask for a usage chunk.
std::string build_chat_body(std::string_view model, const chat_params& p, bool stream);
// POST /embeddings body.
std::string build_embeddings_body(std::string_view model, const std::vector<std::string>& inputs);
// POST /rerank body (the Cohere/Jina format served by vLLM, llama.cpp
// server, TEI-compatible gateways and hosted rerankers):
// {"model","query","documents":[...],"top_n"}.
std::string build_rerank_body(std::string_view model, std::string_view query,
                              const std::vector<std::string>& documents, size_t top_n);

// Server-sent events: push bytes as they arrive, get complete events.
// Handles LF and CRLF, "data:" with or without a space, multi-line data,
// comments (":"), other fields (ignored) and lines split across pushes.
class sse_parser {
public:
  // Reads `in` up to the end of the next complete event (blank-line
  // terminated) and points `event` at its data: true then, with `in` left
  // at the rest. False once `in` is used up without completing one (a
  // partial line or event is kept for the next call). `event` is valid
  // until the next call. Lines are scanned with memchr, and a line that
  // arrived whole is not copied: no allocation per event once the buffers
  // have grown.
  bool next(std::string_view& in, std::string_view& event);
  // The data of every event completed by `bytes`.
  std::vector<std::string> push(std::string_view bytes);

private:
  std::string line_;  // a line split across reads, so far
  std::string data_;  // the event being read
  std::string event_;  // the last event completed (what `event` points at)
  bool has_data_ = false;
};

// One streamed chunk (`data: {...}`).
struct stream_chunk {
  std::string delta;          // choices[0].delta.content ("" when absent)
  std::string finish_reason;  // "" while streaming
  std::optional<usage> tokens;
  std::string error;  // an {"error": {...}} chunk: its message
};

// nullopt when `data` is not a JSON object.
std::optional<stream_chunk> parse_stream_chunk(std::string_view data);

struct completion_body {
  std::string text;  // "" when the model only called tools (content null)
  std::string finish_reason;
  usage tokens;
  // choices[0].message.tool_calls; entries without a function name are
  // skipped; object arguments are turned back into JSON text.
  std::vector<tool_call> tool_calls;
};
std::optional<completion_body> parse_completion(std::string_view body);

// data[i].embedding ordered by index; nullopt when malformed.
std::optional<std::vector<std::vector<float>>> parse_embeddings(std::string_view body);

// A reranker's verdict on one document: its index in the request and score.
struct rerank_hit {
  size_t index = 0;
  double score = 0;
};
// {"results":[{"index","relevance_score"|"score"}]} or a bare array of such
// objects, sorted best first; out-of-range and repeated indexes are
// dropped. nullopt when malformed or when no valid hit remains.
std::optional<std::vector<rerank_hit>> parse_rerank(std::string_view body, size_t documents);

// The message of an OpenAI error body ({"error":{"message":...}}), else
// the body itself (truncated).
std::string parse_error_body(std::string_view body);

}  // namespace ragtor::llm
