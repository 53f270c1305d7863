#include "http/openai_facade.hpp"

#include <simdjson.h>

#include "protocol/json_document.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"

namespace ragtor::http::openai {

namespace {

api_error invalid(std::string message, std::string param = {}, std::string code = {}) {
  api_error e;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

parsed_request refuse(api_error e) {
  parsed_request out;
  out.error = std::move(e);
  return out;
}

// The text of a message's content: a string, or an array of text parts.
std::optional<std::string> content_text(simdjson::dom::element content, std::string& why) {
  std::string_view s;
  if (content.get_string().get(s) == simdjson::SUCCESS)
    return std::string{s};
  if (content.is_null())
    return std::string{};
  simdjson::dom::array parts;
  if (content.get_array().get(parts) != simdjson::SUCCESS) {
    why = "must be a string or an array of text parts";
    return std::nullopt;
  }
  std::string text;
  for (auto part : parts) {
    std::string_view type, t;
    if (part["type"].get_string().get(type) != simdjson::SUCCESS || type != "text"
        || part["text"].get_string().get(t) != simdjson::SUCCESS) {
      why = "only text content parts are supported";
      return std::nullopt;
    }
    text += t;
  }
  return text;
}

void write_error_object(json_writer& w, const api_error& e) {
  w.key("error").begin_object().field("message", e.message).field("type", e.type);
  w.key("param");
  e.param.empty() ? w.null() : w.value(e.param);
  w.key("code");
  e.code.empty() ? w.null() : w.value(e.code);
  w.end_object();
}

// The envelope every chunk shares, up to "choices".
void begin_chunk(json_writer& w, const completion_meta& m) {
  w.begin_object()
      .field("id", m.id)
      .field("object", "chat.completion.chunk")
      .field("created", m.created)
      .field("model", m.model)
      .field("system_fingerprint", "ragtor");
}

void write_usage(json_writer& w, const usage_info& u) {
  w.key("usage")
      .begin_object()
      .field("prompt_tokens", u.prompt_tokens)
      .field("completion_tokens", u.completion_tokens)
      .field("total_tokens", u.prompt_tokens + u.completion_tokens)
      .end_object();
}

}  // namespace

std::string error_json(const api_error& e) {
  json_writer w;
  w.begin_object();
  write_error_object(w, e);
  w.end_object();
  return w.take();
}

std::optional<model_target> parse_model(std::string_view model) {
  model_target t;
  if (model == "auto")
    return t;
  if (model == "general") {
    t.general = true;
    return t;
  }
  if (!model.starts_with("kb:"))
    return std::nullopt;
  auto rest = model.substr(3);
  auto colon = rest.find(':');
  t.kb = std::string{rest.substr(0, colon)};
  if (colon != std::string_view::npos) {
    t.agent_type = std::string{rest.substr(colon + 1)};
    if (!is_agent_type(t.agent_type))
      return std::nullopt;
  }
  if (!is_valid_kb_name(t.kb))
    return std::nullopt;
  return t;
}

std::vector<std::string> model_ids(const std::vector<std::string>& kbs) {
  std::vector<std::string> ids{"auto", "general"};
  for (auto& kb : kbs) {
    ids.push_back("kb:" + kb);
    for (auto agent : agent_types)
      ids.push_back("kb:" + kb + ":" + std::string{agent});
  }
  return ids;
}

std::string models_json(const std::vector<std::string>& ids, int64_t created) {
  json_writer w;
  w.begin_object().field("object", "list").key("data").begin_array();
  for (auto& id : ids)
    w.begin_object()
        .field("id", id)
        .field("object", "model")
        .field("created", created)
        .field("owned_by", "ragtor")
        .end_object();
  w.end_array().end_object();
  return w.take();
}

parsed_request parse_completion_request(std::string_view body, size_t max_body_bytes,
                                        size_t max_message_bytes) {
  if (body.size() > max_body_bytes) {
    auto e = invalid("the request body exceeds " + std::to_string(max_body_bytes) + " bytes");
    e.status = 413;
    return refuse(e);
  }
  json_document parsed{body};
  simdjson::dom::element doc;
  if (parsed.get(doc) != simdjson::SUCCESS)
    return refuse(invalid("the request body is not valid JSON"));
  simdjson::dom::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS)
    return refuse(invalid("the request body must be a JSON object"));

  parsed_request out;
  auto& r = out.request;
  std::string_view s;
  if (obj["model"].get_string().get(s) != simdjson::SUCCESS)
    return refuse(invalid("you must provide a model parameter (a string)", "model"));
  r.model = std::string{s};
  auto target = parse_model(r.model);
  if (!target) {
    auto e = invalid("the model `" + r.model
                         + "` does not exist: use auto, general, kb:<name> or "
                           "kb:<name>:<agent_type> (GET /v1/models lists them)",
                     "model", "model_not_found");
    e.status = 404;
    return refuse(e);
  }
  r.target = *target;

  for (auto refused : {"tools", "functions", "tool_choice", "function_call"}) {
    simdjson::dom::element el;
    if (obj[refused].get(el) == simdjson::SUCCESS && !el.is_null())
      return refuse(invalid(std::string{"`"} + refused
                                + "` is not supported: ragtor calls its own tools inside a turn",
                            refused, "unsupported_parameter"));
  }
  simdjson::dom::element el;
  if (obj["n"].get(el) == simdjson::SUCCESS && !el.is_null()) {
    int64_t n = 0;
    if (el.get_int64().get(n) != simdjson::SUCCESS || n != 1)
      return refuse(invalid("only n = 1 is supported", "n"));
  }
  if (obj["stream"].get(el) == simdjson::SUCCESS && !el.is_null()
      && el.get_bool().get(r.stream) != simdjson::SUCCESS)
    return refuse(invalid("`stream` must be a boolean", "stream"));
  if (obj["stream_options"].get(el) == simdjson::SUCCESS && !el.is_null()) {
    simdjson::dom::element iu;
    if (el["include_usage"].get(iu) == simdjson::SUCCESS && !iu.is_null()
        && iu.get_bool().get(r.include_usage) != simdjson::SUCCESS)
      return refuse(invalid("`stream_options.include_usage` must be a boolean",
                            "stream_options.include_usage"));
  }
  if (obj["temperature"].get(el) == simdjson::SUCCESS && !el.is_null()) {
    double t = 0;
    if (el.get_double().get(t) != simdjson::SUCCESS || t < 0 || t > 2)
      return refuse(invalid("`temperature` must be a number in [0, 2]", "temperature"));
    r.temperature = t;
  }
  for (auto name : {"max_tokens", "max_completion_tokens"}) {
    if (obj[name].get(el) == simdjson::SUCCESS && !el.is_null()) {
      int64_t n = 0;
      if (el.get_int64().get(n) != simdjson::SUCCESS || n < 1 || n > 1'000'000)
        return refuse(invalid(std::string{"`"} + name + "` must be a positive integer", name));
      r.max_tokens = static_cast<int32_t>(n);
    }
  }
  if (obj["user"].get(el) == simdjson::SUCCESS && !el.is_null()) {
    if (el.get_string().get(s) != simdjson::SUCCESS)
      return refuse(invalid("`user` must be a string", "user"));
    r.user = std::string{s};
  }

  simdjson::dom::array messages;
  if (obj["messages"].get_array().get(messages) != simdjson::SUCCESS || messages.size() == 0)
    return refuse(invalid("`messages` must be a non-empty array", "messages"));
  size_t i = 0;
  for (auto m : messages) {
    auto param = "messages[" + std::to_string(i++) + "]";
    std::string_view role;
    if (m["role"].get_string().get(role) != simdjson::SUCCESS)
      return refuse(invalid(param + ".role must be a string", param + ".role"));
    if (role == "tool" || role == "function")
      return refuse(invalid(param + ": tool messages are not supported", param + ".role",
                            "unsupported_parameter"));
    if (role != "system" && role != "developer" && role != "user" && role != "assistant")
      return refuse(invalid(param + ".role must be system, developer, user or assistant",
                            param + ".role"));
    simdjson::dom::element content;
    std::string why;
    std::optional<std::string> text;
    if (m["content"].get(content) == simdjson::SUCCESS)
      text = content_text(content, why);
    else
      text = std::string{};
    if (!text)
      return refuse(invalid(param + ".content " + why, param + ".content"));
    // System instructions are ragtor's and the KB's own; a client's are
    // ignored (documented in docs/openai.md).
    if (role == "system" || role == "developer")
      continue;
    stored_message sm;
    sm.role = std::string{role};
    sm.content = std::move(*text);
    r.history.push_back(std::move(sm));
  }
  if (r.history.empty() || r.history.back().role != "user")
    return refuse(invalid("the last message must have role \"user\"", "messages"));
  r.question = std::move(r.history.back().content);
  r.history.pop_back();
  if (r.question.empty())
    return refuse(invalid("the last user message is empty", "messages"));
  if (r.question.size() > max_message_bytes)
    return refuse(invalid("the last user message exceeds " + std::to_string(max_message_bytes)
                              + " bytes",
                          "messages"));
  out.ok = true;
  return out;
}

std::string turn_outcome::add(const stream_event& ev) {
  switch (ev.kind) {
    case event_kind::token:
      content_ += ev.data;
      return ev.data;
    case event_kind::error: {
      json_document parsed{ev.data};
      simdjson::dom::element e;
      std::string_view s;
      if (parsed.get(e) == simdjson::SUCCESS) {
        if (e["code"].get_string().get(s) == simdjson::SUCCESS)
          error_code_ = std::string{s};
        if (e["message"].get_string().get(s) == simdjson::SUCCESS)
          error_message_ = std::string{s};
      }
      return {};
    }
    case event_kind::done: {
      done_ = true;
      json_document parsed{ev.data};
      simdjson::dom::element d;
      if (parsed.get(d) != simdjson::SUCCESS)
        return {};
      std::string_view s;
      if (d["finish_reason"].get_string().get(s) == simdjson::SUCCESS)
        finish_reason_ = s == "length" ? "length" : "stop";
      simdjson::dom::element c;
      if (d["citations"].get(c) == simdjson::SUCCESS)
        citations_ = simdjson::minify(c);
      int64_t n = 0;
      if (d["usage"]["prompt_tokens"].get_int64().get(n) == simdjson::SUCCESS)
        usage_.prompt_tokens = static_cast<int32_t>(n);
      if (d["usage"]["completion_tokens"].get_int64().get(n) == simdjson::SUCCESS)
        usage_.completion_tokens = static_cast<int32_t>(n);
      return {};
    }
    default:
      return {};
  }
}

std::optional<api_error> turn_outcome::failure() const {
  if (error_code_.empty() || error_code_ == "cancelled")
    return std::nullopt;
  api_error e;
  e.message = error_message_.empty() ? error_code_ : error_message_;
  e.code = error_code_;
  e.type = "server_error";
  e.status = error_code_ == "overloaded" ? 429 : error_code_ == "timeout" ? 504 : 502;
  if (error_code_ == "overloaded")
    e.type = "rate_limit_error";
  return e;
}

std::string turn_outcome::sources_text() const {
  json_document parsed{citations_};
  simdjson::dom::array cites;
  if (parsed.get(cites) != simdjson::SUCCESS
      || cites.size() == 0)
    return {};
  std::string out = "\n\nSources:";
  size_t n = 0;
  for (auto c : cites) {
    std::string_view title, doc;
    if (c["title"].get_string().get(title) != simdjson::SUCCESS)
      title = {};
    if (c["doc_id"].get_string().get(doc) != simdjson::SUCCESS)
      doc = {};
    out += n == 0 ? " [" : "; [";
    out += std::to_string(++n) + "] ";
    out += title.empty() ? doc : title;
  }
  return out;
}

std::string role_chunk(const completion_meta& m) {
  json_writer w;
  begin_chunk(w, m);
  w.key("choices").begin_array().begin_object().field("index", int64_t{0});
  w.key("delta").begin_object().field("role", "assistant").field("content", "").end_object();
  w.key("logprobs").null().key("finish_reason").null();
  w.end_object().end_array().end_object();
  return w.take();
}

std::string content_chunk(const completion_meta& m, std::string_view text) {
  json_writer w;
  begin_chunk(w, m);
  w.key("choices").begin_array().begin_object().field("index", int64_t{0});
  w.key("delta").begin_object().field("content", text).end_object();
  w.key("logprobs").null().key("finish_reason").null();
  w.end_object().end_array().end_object();
  return w.take();
}

std::string finish_chunk(const completion_meta& m, std::string_view finish_reason,
                         std::string_view citations_json) {
  json_writer w;
  begin_chunk(w, m);
  w.key("choices").begin_array().begin_object().field("index", int64_t{0});
  w.key("delta").begin_object().end_object();
  w.key("logprobs").null().field("finish_reason", finish_reason);
  w.end_object().end_array();
  w.key("citations").raw(citations_json);
  w.end_object();
  return w.take();
}

std::string usage_chunk(const completion_meta& m, const usage_info& u) {
  json_writer w;
  begin_chunk(w, m);
  w.key("choices").begin_array().end_array();
  write_usage(w, u);
  w.end_object();
  return w.take();
}

std::string completion_json(const completion_meta& m, const turn_outcome& out) {
  json_writer w;
  w.begin_object()
      .field("id", m.id)
      .field("object", "chat.completion")
      .field("created", m.created)
      .field("model", m.model)
      .field("system_fingerprint", "ragtor");
  w.key("choices").begin_array().begin_object().field("index", int64_t{0});
  w.key("message")
      .begin_object()
      .field("role", "assistant")
      .field("content", out.content() + out.sources_text())
      .key("refusal")
      .null()
      .end_object();
  w.key("logprobs").null().field("finish_reason", out.finish_reason());
  w.end_object().end_array();
  write_usage(w, out.usage());
  w.key("citations").raw(out.citations_json());
  w.end_object();
  return w.take();
}

}  // namespace ragtor::http::openai
