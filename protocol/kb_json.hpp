// Request parsers and response writers of the knowledge-base API
// (DESIGN §5): create, list, info, document ingestion (JSON or NDJSON) and
// hit testing (search -> RetrievalResult, DESIGN §4.3).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/api_json.hpp"
#include "protocol/messages.hpp"
#include "protocol/document.hpp"

namespace ragtor {

class json_writer;
struct ingest_report;

struct search_request {
  std::string query;
  std::string agent_type;  // "" = the KB's / router's default
  int32_t top_k = 0;       // 0 = the KB's / global default
};

// `{"documents":[{id, text, title?, source?}, ...]}` when `ndjson` is false,
// else one such document object per non-blank line. Ids follow the API's
// id rule; text must be a non-empty string. Errors name the field or line.
api_parse<std::vector<document>> parse_documents_body(std::string_view body, bool ndjson,
                                                      size_t max_documents);

// NDJSON documents parsed as the bytes arrive (a large ingestion body is
// never held whole): feed() any split of the body, then finish(). The first
// bad line stops it; error() names the line and field.
class ndjson_documents {
public:
  explicit ndjson_documents(size_t max_documents);
  ~ndjson_documents();
  ndjson_documents(const ndjson_documents&) = delete;
  ndjson_documents& operator=(const ndjson_documents&) = delete;

  bool feed(std::string_view bytes);
  bool finish();  // the last line may lack its newline
  bool ok() const { return ok_; }
  const request_error& error() const { return error_; }
  std::vector<document>& documents() { return docs_; }

private:
  bool line(std::string_view text);
  struct impl;
  std::unique_ptr<impl> impl_;
  size_t max_documents_;
  size_t line_no_ = 0;
  std::string partial_;
  std::vector<document> docs_;
  bool ok_ = true;
  request_error error_;
};

// `{"query", "agent_type"?, "top_k"?}`; query 1..max_query_bytes.
api_parse<search_request> parse_search_request(std::string_view body, size_t max_body_bytes,
                                               size_t max_query_bytes);

std::string ingest_report_json(std::string_view kb, const ingest_report& r);
// RetrievalResult as in DESIGN §4.3.
std::string retrieval_result_json(const retrieval_result& r);
// The "trace" array of a RetrievalResult: {step, detail, duration_ms}.
void write_trace(json_writer& w, const std::vector<trace_step>& trace);

}  // namespace ragtor
