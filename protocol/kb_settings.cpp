#include "protocol/kb_settings.hpp"

#include <array>
#include <cmath>

#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "protocol/workflow_def.hpp"

namespace ragtor {

namespace {

constexpr size_t max_description = 4096;
constexpr size_t max_keywords = 64;
constexpr size_t max_keyword_bytes = 128;

}  // namespace

std::optional<std::string> validate(const kb_settings& s) {
  if (!is_valid_kb_name(s.name))
    return std::string{"field \"name\": "} + kb_name_rule;
  if (format_worker_name(s.name, "").empty() || s.name == "default")
    return "field \"name\": \"" + s.name + "\" is reserved (it means no knowledge base)";
  if (s.description.size() > max_description)
    return "field \"description\" is longer than " + std::to_string(max_description) + " bytes";
  if (s.keywords.size() > max_keywords)
    return "field \"keywords\" has more than " + std::to_string(max_keywords) + " entries";
  for (auto& k : s.keywords)
    if (k.empty() || k.size() > max_keyword_bytes)
      return "field \"keywords\" entries must be 1-" + std::to_string(max_keyword_bytes) + " bytes";
  if (!s.default_agent_type.empty() && !is_agent_type(s.default_agent_type))
    return "field \"default_agent_type\" must be one of naive_rag_agent, hybrid_agent, "
           "graph_agent, deep_research_agent, fusion_agent";
  if (s.top_k < 0 || s.top_k > 100)
    return "field \"top_k\" must be in [0, 100]";
  // -1 = not given (the embedder kind decides).
  auto weight_ok = [](double w) { return w == -1 || (std::isfinite(w) && w >= 0 && w <= 100); };
  if (!weight_ok(s.vector_weight))
    return "field \"vector_weight\" must be in [0, 100] (or -1: chosen by the embedder kind)";
  if (!weight_ok(s.keyword_weight))
    return "field \"keyword_weight\" must be in [0, 100] (or -1: chosen by the embedder kind)";
  if (s.vector_weight == 0 && s.keyword_weight == 0)
    return "fields \"vector_weight\" and \"keyword_weight\" must not both be 0";
  if (s.fusion != "auto" && s.fusion != "rrf" && s.fusion != "convex")
    return "field \"fusion\" must be one of auto, rrf, convex";
  if (!std::isfinite(s.bm25_threshold) || s.bm25_threshold < 0)
    return "field \"bm25_threshold\" must be >= 0";
  if (!std::isfinite(s.vector_threshold) || s.vector_threshold < -1 || s.vector_threshold > 1)
    return "field \"vector_threshold\" must be in [-1, 1]";
  if (s.rerank_top_k < 0 || s.rerank_top_k > 100)
    return "field \"rerank_top_k\" must be in [0, 100]";
  if (s.answer_mode != "pipeline" && s.answer_mode != "workflow" && s.answer_mode != "tool_agent")
    return "field \"answer_mode\" must be one of pipeline, workflow, tool_agent";
  if (s.search_mode != "hybrid" && s.search_mode != "vector" && s.search_mode != "bm25")
    return "field \"search_mode\" must be one of hybrid, vector, bm25";
  if (!std::isfinite(s.min_confidence_score) || s.min_confidence_score < 0
      || s.min_confidence_score > 1)
    return "field \"min_confidence_score\" must be in [0, 1]";
  if (!std::isfinite(s.temperature) || s.temperature > 2 || (s.temperature < 0 && s.temperature != -1))
    return "field \"temperature\" must be in [0, 2] (or -1: the [llm] default)";
  if (s.max_tokens < 0 || s.max_tokens > 32768)
    return "field \"max_tokens\" must be in [0, 32768] (0: the [llm] default)";
  if (s.max_tool_calls < 1 || s.max_tool_calls > 16)
    return "field \"max_tool_calls\" must be in [1, 16]";
  if (s.answer_mode == "workflow" && s.workflow_json.empty())
    return "field \"workflow\" is required when answer_mode is \"workflow\"";
  if (!s.workflow_json.empty()) {
    auto wf = wf::parse_workflow(s.workflow_json);
    if (!wf)
      return "field \"workflow\": " + error_message(wf.error());
  }
  return std::nullopt;
}

std::string to_json(const kb_settings& s) {
  json_writer w;
  w.begin_object().field("name", s.name).field("description", s.description);
  w.key("keywords").begin_array();
  for (auto& k : s.keywords)
    w.value(k);
  w.end_array();
  w.field("default_agent_type", s.default_agent_type)
      .field("top_k", static_cast<int64_t>(s.top_k))
      .field("vector_weight", s.vector_weight)
      .field("keyword_weight", s.keyword_weight)
      .field("fusion", s.fusion)
      .field("typo_tolerance", s.typo_tolerance)
      .field("bm25_threshold", s.bm25_threshold)
      .field("vector_threshold", s.vector_threshold)
      .field("enable_rerank", s.enable_rerank)
      .field("rerank_top_k", static_cast<int64_t>(s.rerank_top_k))
      .field("answer_mode", s.answer_mode)
      .field("enable_query_rewrite", s.enable_query_rewrite)
      .field("search_mode", s.search_mode)
      .field("min_confidence_score", s.min_confidence_score)
      .field("enable_source_citation", s.enable_source_citation)
      .field("temperature", s.temperature)
      .field("max_tokens", static_cast<int64_t>(s.max_tokens))
      .field("max_tool_calls", static_cast<int64_t>(s.max_tool_calls));
  if (!s.workflow_json.empty())
    w.key("workflow").raw(s.workflow_json);
  w.end_object();
  return w.take();
}

caf::expected<kb_settings> kb_settings_from_json(std::string_view json) {
  static constexpr std::array<field_spec, 24> specs{{
      {"name", field_kind::string, true},
      {"description", field_kind::string, false},
      {"keywords", field_kind::string_array, false},
      {"default_agent_type", field_kind::string, false},
      {"top_k", field_kind::integer, false},
      {"vector_weight", field_kind::number, false},
      {"keyword_weight", field_kind::number, false},
      {"fusion", field_kind::string, false},
      {"typo_tolerance", field_kind::boolean, false},
      {"bm25_threshold", field_kind::number, false},
      {"vector_threshold", field_kind::number, false},
      {"enable_rerank", field_kind::boolean, false},
      {"rerank_top_k", field_kind::integer, false},
      {"default_top_k", field_kind::integer, false},  // seed 004's name for top_k
      {"answer_mode", field_kind::string, false},
      {"enable_query_rewrite", field_kind::boolean, false},
      {"search_mode", field_kind::string, false},
      {"min_confidence_score", field_kind::number, false},
      {"enable_source_citation", field_kind::boolean, false},
      {"temperature", field_kind::number, false},
      {"max_tokens", field_kind::integer, false},
      {"max_tool_calls", field_kind::integer, false},
      {"workflow", field_kind::object, false},
  }};
  auto parsed = parse_json_object(json, 1 << 20, specs);
  if (!parsed.ok)
    return make_error(errc::invalid_request, parsed.error.message);
  auto& f = parsed.fields;
  kb_settings s;
  s.name = f.string_or("name");
  s.description = f.string_or("description");
  if (auto i = f.string_arrays.find("keywords"); i != f.string_arrays.end())
    s.keywords = i->second;
  s.default_agent_type = f.string_or("default_agent_type");
  if (f.has("top_k") && f.has("default_top_k"))
    return make_error(errc::invalid_request,
                      "fields \"top_k\" and \"default_top_k\" are the same setting; give one");
  for (auto name : {"top_k", "default_top_k"})
    if (auto i = f.integers.find(name); i != f.integers.end()) {
      if (i->second < 0 || i->second > 100)
        return make_error(errc::invalid_request,
                          "field \"" + std::string{name} + "\" must be in [0, 100]");
      s.top_k = static_cast<int32_t>(i->second);
    }
  auto number = [&](std::string_view name, double& out) {
    if (auto i = f.numbers.find(name); i != f.numbers.end())
      out = i->second;
  };
  number("vector_weight", s.vector_weight);
  number("keyword_weight", s.keyword_weight);
  s.fusion = f.string_or("fusion", s.fusion);
  s.typo_tolerance = f.bool_or("typo_tolerance", s.typo_tolerance);
  number("bm25_threshold", s.bm25_threshold);
  number("vector_threshold", s.vector_threshold);
  if (auto i = f.bools.find("enable_rerank"); i != f.bools.end())
    s.enable_rerank = i->second;
  if (auto i = f.integers.find("rerank_top_k"); i != f.integers.end()) {
    if (i->second < 0 || i->second > 100)
      return make_error(errc::invalid_request, "field \"rerank_top_k\" must be in [0, 100]");
    s.rerank_top_k = static_cast<int32_t>(i->second);
  }
  s.answer_mode = f.string_or("answer_mode", s.answer_mode);
  s.enable_query_rewrite = f.bool_or("enable_query_rewrite", s.enable_query_rewrite);
  s.search_mode = f.string_or("search_mode", s.search_mode);
  number("min_confidence_score", s.min_confidence_score);
  s.enable_source_citation = f.bool_or("enable_source_citation", s.enable_source_citation);
  number("temperature", s.temperature);
  for (auto [name, out] : {std::pair{"max_tokens", &s.max_tokens},
                           std::pair{"max_tool_calls", &s.max_tool_calls}})
    if (auto i = f.integers.find(name); i != f.integers.end()) {
      if (i->second < -1 || i->second > 1 << 20)
        return make_error(errc::invalid_request, "field \"" + std::string{name} + "\" is out of range");
      *out = static_cast<int32_t>(i->second);
    }
  if (auto i = f.objects.find("workflow"); i != f.objects.end())
    s.workflow_json = i->second;
  if (auto problem = validate(s))
    return make_error(errc::invalid_request, *problem);
  return s;
}

}  // namespace ragtor
