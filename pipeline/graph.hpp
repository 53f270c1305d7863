// The answer pipeline of a KB as a graph (GET /api/v1/kbs/{kb}/pipeline):
// its nodes (with whether each runs under the KB's switches), edges and
// switches as JSON, and the same graph as Mermaid flowchart text.
#pragma once

#include <string>
#include <string_view>

#include "protocol/kb_settings.hpp"

namespace ragtor {

struct pipeline_node {
  std::string id;
  std::string label;
  bool enabled = true;
  std::string note;  // when it runs, what it does
};

struct pipeline_edge {
  std::string from;
  std::string to;
  std::string label;  // the condition; "" = always
};

struct pipeline_graph {
  std::vector<pipeline_node> nodes;
  std::vector<pipeline_edge> edges;
};

// The graph of `s.answer_mode` under the settings' switches. `reranker`
// says who reranks ("" = nobody is configured to).
pipeline_graph pipeline_graph_of(const kb_settings& s, std::string_view reranker = "the model, listwise");

// Mermaid "flowchart TD" text; disabled nodes are drawn dashed.
std::string to_mermaid(const pipeline_graph& g);

// {"kb","answer_mode","switches":{...},"nodes":[...],"edges":[...],"mermaid"}.
std::string pipeline_json(const kb_settings& s, std::string_view reranker = "the model, listwise");

}  // namespace ragtor
