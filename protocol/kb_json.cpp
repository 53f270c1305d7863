#include "protocol/kb_json.hpp"

#include <array>

#include <simdjson.h>

#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {

template <class T>
api_parse<T> failed(request_error e) {
  api_parse<T> r;
  r.error = std::move(e);
  return r;
}

constexpr size_t max_doc_id_chars = 256;

// One document object; `where` prefixes error messages ("documents[3]",
// "line 7").
api_parse<document> parse_document(simdjson::dom::element el, const std::string& where) {
  auto bad = [&](std::string msg, std::string_view field = {}) {
    return failed<document>(make_request_error("invalid_request", where + ": " + msg, field));
  };
  simdjson::dom::object obj;
  if (el.get_object().get(obj) != simdjson::SUCCESS)
    return bad("a document must be a JSON object");
  api_parse<document> out;
  bool has_id = false, has_text = false;
  for (auto [key, value] : obj) {
    std::string_view s;
    if (key != "id" && key != "text" && key != "title" && key != "source")
      return bad("unknown field " + quoted_field(key), key);
    if (value.get_string().get(s) != simdjson::SUCCESS)
      return bad("field " + quoted_field(key) + " must be a string", key);
    if (key == "id") {
      if (s.empty() || s.size() > max_doc_id_chars)
        return bad("field \"id\" must be 1-" + std::to_string(max_doc_id_chars) + " bytes", "id");
      out.value.id = std::string{s};
      has_id = true;
    } else if (key == "text") {
      out.value.text = std::string{s};
      has_text = !s.empty();
    } else if (key == "title") {
      out.value.title = std::string{s};
    } else {
      out.value.source = std::string{s};
    }
  }
  if (!has_id)
    return bad("field \"id\" is required", "id");
  if (!has_text)
    return bad("field \"text\" is required and must not be empty", "text");
  out.ok = true;
  return out;
}

}  // namespace

struct ndjson_documents::impl {
  simdjson::dom::parser parser;
};

ndjson_documents::ndjson_documents(size_t max_documents)
    : impl_(std::make_unique<impl>()), max_documents_(max_documents) {}

ndjson_documents::~ndjson_documents() = default;

bool ndjson_documents::feed(std::string_view bytes) {
  while (ok_ && !bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      break;
    }
    if (partial_.empty()) {
      line(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      line(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
  return ok_;
}

bool ndjson_documents::finish() {
  if (ok_ && !partial_.empty()) {
    std::string last;
    last.swap(partial_);
    line(last);
  }
  return ok_;
}

bool ndjson_documents::line(std::string_view text) {
  ++line_no_;
  if (text.find_first_not_of(" \t\r") == std::string_view::npos)
    return true;
  auto where = "line " + std::to_string(line_no_);
  auto fail = [&](request_error e) {
    ok_ = false;
    error_ = std::move(e);
    return false;
  };
  if (!is_valid_utf8(text))
    return fail(make_request_error("invalid_request", where + ": invalid UTF-8"));
  simdjson::dom::element el;
  if (impl_->parser.parse(simdjson::padded_string{text}).get(el) != simdjson::SUCCESS)
    return fail(make_request_error("invalid_request", where + ": not valid JSON"));
  auto doc = parse_document(el, where);
  if (!doc.ok)
    return fail(std::move(doc.error));
  if (docs_.size() == max_documents_)
    return fail(make_request_error("invalid_request", "more than " + std::to_string(max_documents_)
                                                          + " documents in one request"));
  docs_.push_back(std::move(doc.value));
  return true;
}

api_parse<std::vector<document>> parse_documents_body(std::string_view body, bool ndjson,
                                                      size_t max_documents) {
  using result_t = api_parse<std::vector<document>>;
  auto bad = [](std::string msg, std::string_view field = {}) {
    return failed<std::vector<document>>(
        make_request_error("invalid_request", std::move(msg), field));
  };
  if (!is_valid_utf8(body))
    return bad("invalid UTF-8");
  result_t out;
  simdjson::dom::parser parser;
  auto too_many = [&] {
    return bad("more than " + std::to_string(max_documents) + " documents in one request");
  };
  if (ndjson) {
    ndjson_documents nd{max_documents};
    if (!nd.feed(body) || !nd.finish())
      return failed<std::vector<document>>(nd.error());
    out.value = std::move(nd.documents());
  } else {
    simdjson::dom::element root;
    if (parser.parse(simdjson::padded_string{body}).get(root) != simdjson::SUCCESS)
      return bad("body is not valid JSON");
    simdjson::dom::object obj;
    if (root.get_object().get(obj) != simdjson::SUCCESS)
      return bad("body must be a JSON object {\"documents\": [...]}");
    simdjson::dom::array docs;
    bool seen = false;
    for (auto [key, value] : obj) {
      if (key != "documents")
        return bad("unknown field " + quoted_field(key), key);
      if (value.get_array().get(docs) != simdjson::SUCCESS)
        return bad("field \"documents\" must be an array", "documents");
      seen = true;
    }
    if (!seen)
      return bad("field \"documents\" is required", "documents");
    size_t i = 0;
    for (auto el : docs) {
      auto doc = parse_document(el, "documents[" + std::to_string(i++) + "]");
      if (!doc.ok)
        return failed<std::vector<document>>(std::move(doc.error));
      if (out.value.size() == max_documents)
        return too_many();
      out.value.push_back(std::move(doc.value));
    }
  }
  if (out.value.empty())
    return bad("no documents in the request", "documents");
  out.ok = true;
  return out;
}

api_parse<search_request> parse_search_request(std::string_view body, size_t max_body_bytes,
                                               size_t max_query_bytes) {
  static constexpr std::array<field_spec, 3> specs{{
      {"query", field_kind::string, true},
      {"agent_type", field_kind::string, false},
      {"top_k", field_kind::integer, false},
  }};
  auto parsed = parse_json_object(body, max_body_bytes, specs);
  if (!parsed.ok)
    return failed<search_request>(std::move(parsed.error));
  auto& f = parsed.fields;
  api_parse<search_request> out;
  out.value.query = f.string_or("query");
  if (out.value.query.find_first_not_of(" \t\r\n") == std::string::npos)
    return failed<search_request>(
        make_request_error("invalid_request", "field \"query\" must not be empty", "query"));
  if (out.value.query.size() > max_query_bytes)
    return failed<search_request>(make_request_error(
        "payload_too_large",
        "field \"query\" exceeds " + std::to_string(max_query_bytes) + " bytes", "query"));
  out.value.agent_type = f.string_or("agent_type");
  if (auto i = f.integers.find("top_k"); i != f.integers.end()) {
    if (i->second < 1 || i->second > 100)
      return failed<search_request>(
          make_request_error("invalid_request", "field \"top_k\" must be in [1, 100]", "top_k"));
    out.value.top_k = static_cast<int32_t>(i->second);
  }
  out.ok = true;
  return out;
}

std::string ingest_report_json(std::string_view kb, const ingest_report& r) {
  json_writer w;
  w.begin_object()
      .field("kb", kb)
      .field("documents_added", static_cast<uint64_t>(r.documents_added))
      .field("documents_replaced", static_cast<uint64_t>(r.documents_replaced))
      .field("documents", static_cast<uint64_t>(r.documents))
      .field("chunks", static_cast<uint64_t>(r.chunks))
      .end_object();
  return w.take();
}

std::string retrieval_result_json(const retrieval_result& r) {
  json_writer w;
  w.begin_object().field("context", r.context);
  w.key("retrieval_results").begin_array();
  for (auto& it : r.retrieval_results) {
    w.begin_object()
        .field("result_id", it.result_id)
        .field("granularity", it.granularity)
        .field("evidence", it.evidence)
        .field("source", it.source)
        .field("score", it.score);
    w.key("metadata")
        .begin_object()
        .field("source_id", it.source_id)
        .field("source_type", it.source_type)
        .field("doc_id", it.doc_id)
        .field("title", it.title)
        .field("kb_prefix", it.kb_prefix)
        .end_object();
    w.end_object();
  }
  w.end_array();
  auto ids = [&](std::string_view name, const std::vector<std::string>& v, std::string_view key) {
    w.key(name).begin_array();
    for (auto& id : v)
      w.begin_object().field(key, id).end_object();
    w.end_array();
  };
  w.key("reference").begin_object();
  ids("chunks", r.chunk_ids, "chunk_id");
  ids("entities", r.entity_ids, "id");
  ids("relationships", r.relationship_ids, "id");
  w.end_object();
  write_trace(w, r.trace);
  // The node whose agent searched (docs/cluster.md).
  for (auto& t : r.trace)
    if (t.step == "served_by")
      w.field("served_by", t.detail);
  w.end_object();
  return w.take();
}

void write_trace(json_writer& w, const std::vector<trace_step>& trace) {
  w.key("trace").begin_array();
  for (auto& t : trace)
    w.begin_object()
        .field("step", t.step)
        .field("detail", t.detail)
        .field("duration_ms", t.duration_ms)
        .end_object();
  w.end_array();
}

}  // namespace ragtor
