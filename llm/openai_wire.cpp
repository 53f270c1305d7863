#include "llm/openai_wire.hpp"

#include <algorithm>

#include <simdjson.h>

#include "protocol/json_document.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::llm {

std::string build_chat_body(std::string_view model, const chat_params& p, bool stream) {
  json_writer w;
  w.begin_object().field("model", model);
  w.key("messages").begin_array();
  for (auto& m : p.messages) {
    w.begin_object().field("role", m.role);
    if (m.role == "assistant" && !m.tool_calls.empty() && m.content.empty())
      w.key("content").null();
    else
      w.field("content", m.content);
    if (!m.tool_call_id.empty())
      w.field("tool_call_id", m.tool_call_id);
    if (!m.tool_calls.empty()) {
      w.key("tool_calls").begin_array();
      for (auto& c : m.tool_calls) {
        w.begin_object().field("id", c.id).field("type", "function");
        w.key("function").begin_object().field("name", c.name).field("arguments", c.arguments);
        w.end_object().end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  if (!p.tools_json.empty())
    w.key("tools").raw(p.tools_json);
  if (!p.tool_choice.empty())
    w.field("tool_choice", p.tool_choice);
  if (p.temperature)
    w.field("temperature", *p.temperature);
  if (p.max_tokens)
    w.field("max_tokens", static_cast<int64_t>(*p.max_tokens));
  w.field("stream", stream);
  if (stream)
    w.key("stream_options").begin_object().field("include_usage", true).end_object();
  w.end_object();
  auto body = w.take();
  if (!p.extra_json.empty()) {
    body.pop_back();  // '}'
    body += ',';
    body += p.extra_json;
    body += '}';
  }
  return body;
}

std::string build_embeddings_body(std::string_view model, const std::vector<std::string>& inputs) {
  json_writer w;
  w.begin_object().field("model", model);
  w.key("input").begin_array();
  for (auto& s : inputs)
    w.value(s);
  w.end_array().end_object();
  return w.take();
}

std::string build_rerank_body(std::string_view model, std::string_view query,
                              const std::vector<std::string>& documents, size_t top_n) {
  json_writer w;
  w.begin_object().field("model", model).field("query", query);
  w.key("documents").begin_array();
  for (auto& d : documents)
    w.value(d);
  w.end_array().field("top_n", static_cast<int64_t>(top_n)).end_object();
  return w.take();
}

bool sse_parser::next(std::string_view& in, std::string_view& event) {
  while (!in.empty()) {
    auto nl = in.find('\n');
    if (nl == std::string_view::npos) {
      line_.append(in);
      in = {};
      return false;
    }
    std::string_view line = in.substr(0, nl);
    if (!line_.empty()) {
      line_.append(line);
      line = line_;
    }
    in.remove_prefix(nl + 1);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    bool complete = false;
    if (line.empty()) {
      complete = has_data_;
      if (!complete)
        data_.clear();
    } else if (line[0] != ':') {
      auto colon = line.find(':');
      auto field = line.substr(0, colon);
      std::string_view value;
      if (colon != std::string_view::npos) {
        value = line.substr(colon + 1);
        if (!value.empty() && value.front() == ' ')
          value.remove_prefix(1);
      }
      if (field == "data") {
        if (has_data_)
          data_ += '\n';
        data_ += value;
        has_data_ = true;
      }
    }
    line_.clear();
    if (complete) {
      event_.swap(data_);
      data_.clear();
      has_data_ = false;
      event = event_;
      return true;
    }
  }
  return false;
}

std::vector<std::string> sse_parser::push(std::string_view bytes) {
  std::vector<std::string> events;
  std::string_view event;
  while (next(bytes, event))
    events.emplace_back(event);
  return events;
}

namespace {

std::optional<usage> usage_of(simdjson::dom::element el) {
  simdjson::dom::object u;
  if (el.get_object().get(u) != simdjson::SUCCESS)
    return std::nullopt;
  usage out;
  int64_t n;
  if (u["prompt_tokens"].get_int64().get(n) == simdjson::SUCCESS)
    out.prompt_tokens = static_cast<int32_t>(n);
  if (u["completion_tokens"].get_int64().get(n) == simdjson::SUCCESS)
    out.completion_tokens = static_cast<int32_t>(n);
  return out;
}

std::string error_message_of(simdjson::dom::element err) {
  std::string_view msg;
  if (err["message"].get_string().get(msg) == simdjson::SUCCESS)
    return std::string{msg};
  if (err.get_string().get(msg) == simdjson::SUCCESS)
    return std::string{msg};
  return simdjson::minify(err);
}

}  // namespace

std::optional<stream_chunk> parse_stream_chunk(std::string_view data) {
  json_document parsed{data};
  simdjson::dom::object obj;
  if (parsed.get(obj) != simdjson::SUCCESS)
    return std::nullopt;
  stream_chunk c;
  simdjson::dom::element err;
  if (obj["error"].get(err) == simdjson::SUCCESS && !err.is_null()) {
    c.error = error_message_of(err);
    return c;
  }
  simdjson::dom::element u;
  if (obj["usage"].get(u) == simdjson::SUCCESS && !u.is_null())
    c.tokens = usage_of(u);
  simdjson::dom::array choices;
  if (obj["choices"].get_array().get(choices) == simdjson::SUCCESS && choices.size() > 0) {
    auto first = choices.at(0);
    std::string_view s;
    if (first["delta"]["content"].get_string().get(s) == simdjson::SUCCESS)
      c.delta = std::string{s};
    if (first["finish_reason"].get_string().get(s) == simdjson::SUCCESS)
      c.finish_reason = std::string{s};
  }
  return c;
}

std::optional<completion_body> parse_completion(std::string_view body) {
  json_document parsed{body};
  simdjson::dom::object obj;
  if (parsed.get(obj) != simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::array choices;
  if (obj["choices"].get_array().get(choices) != simdjson::SUCCESS || choices.size() == 0)
    return std::nullopt;
  completion_body out;
  std::string_view s;
  auto first = choices.at(0);
  if (first["message"]["content"].get_string().get(s) == simdjson::SUCCESS)
    out.text = std::string{s};
  else if (!first["message"].is_object())
    return std::nullopt;
  simdjson::dom::array calls;
  if (first["message"]["tool_calls"].get_array().get(calls) == simdjson::SUCCESS) {
    for (auto c : calls) {
      tool_call call;
      if (c["function"]["name"].get_string().get(s) != simdjson::SUCCESS || s.empty())
        continue;
      call.name = std::string{s};
      if (c["id"].get_string().get(s) == simdjson::SUCCESS)
        call.id = std::string{s};
      simdjson::dom::element args;
      if (c["function"]["arguments"].get(args) == simdjson::SUCCESS) {
        if (args.get_string().get(s) == simdjson::SUCCESS)
          call.arguments = std::string{s};
        else
          call.arguments = simdjson::minify(args);
      }
      if (call.id.empty())
        call.id = "call_" + std::to_string(out.tool_calls.size() + 1);
      out.tool_calls.push_back(std::move(call));
    }
  }
  if (first["finish_reason"].get_string().get(s) == simdjson::SUCCESS)
    out.finish_reason = std::string{s};
  simdjson::dom::element u;
  if (obj["usage"].get(u) == simdjson::SUCCESS)
    if (auto t = usage_of(u))
      out.tokens = *t;
  return out;
}

std::optional<std::vector<std::vector<float>>> parse_embeddings(std::string_view body) {
  json_document parsed{body};
  simdjson::dom::object obj;
  if (parsed.get(obj) != simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::array data;
  if (obj["data"].get_array().get(data) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<std::pair<int64_t, std::vector<float>>> rows;
  int64_t next = 0;
  for (auto item : data) {
    int64_t index = next++;
    if (item["index"].get_int64().get(index) != simdjson::SUCCESS)
      index = next - 1;
    simdjson::dom::array emb;
    if (item["embedding"].get_array().get(emb) != simdjson::SUCCESS)
      return std::nullopt;
    std::vector<float> v;
    v.reserve(emb.size());
    for (auto x : emb) {
      double d;
      if (x.get_double().get(d) != simdjson::SUCCESS)
        return std::nullopt;
      v.push_back(static_cast<float>(d));
    }
    rows.emplace_back(index, std::move(v));
  }
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<std::vector<float>> out;
  for (auto& [i, v] : rows)
    out.push_back(std::move(v));
  return out;
}

std::optional<std::vector<rerank_hit>> parse_rerank(std::string_view body, size_t documents) {
  json_document parsed{body};
  simdjson::dom::element root;
  if (parsed.get(root) != simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::array results;
  if (root.get_array().get(results) != simdjson::SUCCESS
      && root["results"].get_array().get(results) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<rerank_hit> hits;
  std::vector<bool> seen(documents, false);
  for (auto item : results) {
    int64_t index = -1;
    double score = 0;
    if (item["index"].get_int64().get(index) != simdjson::SUCCESS || index < 0
        || static_cast<size_t>(index) >= documents || seen[static_cast<size_t>(index)])
      continue;
    if (item["relevance_score"].get_double().get(score) != simdjson::SUCCESS
        && item["score"].get_double().get(score) != simdjson::SUCCESS)
      continue;
    seen[static_cast<size_t>(index)] = true;
    hits.push_back({static_cast<size_t>(index), score});
  }
  if (hits.empty())
    return std::nullopt;
  std::stable_sort(hits.begin(), hits.end(),
                   [](const rerank_hit& a, const rerank_hit& b) { return a.score > b.score; });
  return hits;
}

std::string parse_error_body(std::string_view body) {
  json_document parsed{body};
  simdjson::dom::object obj;
  if (parsed.get(obj) == simdjson::SUCCESS) {
    simdjson::dom::element err;
    if (obj["error"].get(err) == simdjson::SUCCESS)
      return error_message_of(err);
  }
  auto s = std::string{body.substr(0, 300)};
  return s;
}

}  // namespace ragtor::llm
