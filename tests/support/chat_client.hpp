// The chat API as the integration tests see it: request bodies, a whole SSE
// chat read into a stream_result, the §5.1 framing rules as one gtest
// assertion, and the fixture KB's documents for checking citations.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/http_client.hpp"
#include "tests/support/json.hpp"

namespace ragtor::test {

inline constexpr std::string_view chat_stream_path = "/api/v1/chat/stream";
inline constexpr std::string_view chat_path = "/api/v1/chat";

// A ChatRequest body; `kb_prefix` is left out when empty; `extra` fields are
// appended as they are.
std::string chat_body(const std::string& user_id, const std::string& session_id,
                      const std::string& message, const std::string& kb_prefix = "test",
                      const std::vector<json_field>& extra = {});

// Everything one SSE chat produced.
struct stream_result {
  int status = 0;
  std::map<std::string, std::string> headers;
  bool chunked = false;
  std::string error_body;      // for a non-200 response
  std::vector<sse_event> raw;  // every event and comment, in order
  std::vector<json> events;    // the data events, parsed
  std::string tokens;          // token contents concatenated
  std::vector<json> errors;    // error events
  std::optional<json> done;    // the done event (the first one)
  bool ended = false;          // the server finished the body
  bool timed_out = false;
  std::vector<std::string> violations;  // unparsable data, events after done

  // done.content.answer ("" without a done event).
  std::string answer() const;
  std::string statuses() const;  // "start,token,...,done" for messages
  // Contents of the execution_log events (debug) of `node` ("" = every
  // node), in order.
  std::vector<json> execution_logs(std::string_view node = "") const;
  // The nodes those events name, in order.
  std::vector<std::string> executed_nodes() const;
};

// Reads `stream` to its end (or `timeout`), parsing every data event.
stream_result read_stream(sse_stream& stream, std::chrono::milliseconds timeout = 60s);

// POSTs `body` to /api/v1/chat/stream and reads the whole stream.
stream_result chat_stream(uint16_t port, const std::string& body,
                          std::chrono::milliseconds timeout = 60s);

// §5.1: 200, text/event-stream, chunked, one start first, one done last,
// nothing after done, matching request_ids, tokens == answer, every event a
// JSON object with a known status.
::testing::AssertionResult well_formed_stream(const stream_result& r);

// A document of the fixture KB (tests/data/kb).
struct fixture_doc {
  std::string doc_id;  // jsonl "id"; for files, the file name
  std::string title;
  std::string text;
  std::filesystem::path file;
};

// Directory and files of the fixture KB.
std::filesystem::path fixture_kb_dir();
std::vector<std::filesystem::path> fixture_kb_files();

// All fixture documents.
const std::vector<fixture_doc>& fixture_docs();

// The fixture document a server-side doc_id names: a jsonl id exactly, or a
// file by name, stem or path suffix (the server may use any of them).
const fixture_doc* find_fixture_doc(const std::string& doc_id);

// At least one citation, and every citation's doc_id names a fixture
// document whose text contains its quote verbatim (and its quote is not
// empty); `citations` is the done.content.citations array.
::testing::AssertionResult verbatim_citations(const json& citations);

}  // namespace ragtor::test
