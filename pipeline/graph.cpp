#include "pipeline/graph.hpp"

#include "pipeline/workflow.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {

void node(pipeline_graph& g, std::string id, std::string label, bool enabled, std::string note) {
  g.nodes.push_back({std::move(id), std::move(label), enabled, std::move(note)});
}

void edge(pipeline_graph& g, std::string from, std::string to, std::string label = "") {
  g.edges.push_back({std::move(from), std::move(to), std::move(label)});
}

void plain_pipeline(pipeline_graph& g, const kb_settings& s, std::string_view reranker,
                    const std::string& from, const std::string& label) {
  node(g, "rewrite", "rewrite query", s.enable_query_rewrite,
       s.enable_query_rewrite ? "the model rewrites the question with the conversation window; "
                                "skipped without a model"
                              : "off (enable_query_rewrite = false)");
  node(g, "search", "search (" + s.search_mode + ")", true,
       "agent " + (s.default_agent_type.empty() ? std::string{"(router default)"}
                                                : s.default_agent_type)
           + ", top_k " + (s.top_k > 0 ? std::to_string(s.top_k) : std::string{"(default)"})
           + "; a failure yields no documents and an honest answer");
  bool reranks = s.enable_rerank && !reranker.empty();
  node(g, "rerank", "rerank", reranks,
       !s.enable_rerank ? std::string{"off (enable_rerank = false)"}
       : reranks ? "by " + std::string{reranker}
                       + " when more than 3 results; failure keeps the fused order"
                 : std::string{"skipped: no model or rerank endpoint is configured"});
  node(g, "generate", "generate", true,
       s.enable_source_citation ? "answer with citations" : "answer without citations");
  edge(g, from, "rewrite", label);
  edge(g, "rewrite", "search");
  edge(g, "search", "rerank");
  edge(g, "rerank", "generate");
}

void workflow(pipeline_graph& g, const kb_settings& s, std::string_view reranker) {
  auto def = wf::parse_workflow(s.workflow_json);
  auto ask = def ? def->max_ask_rounds : 3;
  auto rounds = def ? def->max_retrieval_rounds : 3;
  std::string intents;
  if (def)
    for (auto& i : def->intents)
      intents += (intents.empty() ? "" : ", ") + i.l2;
  node(g, "intent", "intent", true, "the model classifies the message: " + intents + ", chitchat");
  node(g, "chitchat", "general reply", true, "a brief reply that steers back to the business");
  node(g, "slots", "slot filling", true, "merges what the message states into the conversation's slots");
  node(g, "ask", "ask for missing slots", true, "at most " + std::to_string(ask) + " rounds");
  node(g, "retrieval", "search + evaluate", true,
       "the intent's sources in order; rewrite or switch source, at most "
           + std::to_string(rounds) + " rounds");
  node(g, "verify", "verify", true, "the model judges that the evidence answers the question");
  node(g, "escalate", "escalate to a human", true, "done carries need_human_help and the reason");
  edge(g, "history", "intent");
  edge(g, "intent", "chitchat", "chitchat");
  edge(g, "intent", "slots", "business intent");
  edge(g, "slots", "ask", "slots missing");
  edge(g, "ask", "escalate", "after " + std::to_string(ask) + " rounds");
  edge(g, "slots", "retrieval", "slots complete");
  edge(g, "retrieval", "retrieval", "insufficient");
  edge(g, "retrieval", "verify", "sufficient");
  edge(g, "retrieval", "escalate", "still insufficient");
  edge(g, "verify", "generate", "answers");
  edge(g, "verify", "escalate", "does not answer");
  // Without a model (or an unusable intent) the plain pipeline answers;
  // its generate node is the workflow's too.
  plain_pipeline(g, s, reranker, "intent", "no model");
}

void tool_agent(pipeline_graph& g, const kb_settings& s, std::string_view reranker) {
  node(g, "agent", "tool-calling agent", true,
       "the model calls vector_retrieve, rerank, grade, query_rewrite, memory_retrieve; at most "
           + std::to_string(s.max_tool_calls) + " calls");
  node(g, "tools", "tools", true, "unknown tools and malformed arguments are refused to the model");
  edge(g, "history", "agent");
  edge(g, "agent", "tools", "tool calls");
  edge(g, "tools", "agent", "results");
  edge(g, "agent", "generate", "answer (or the limit)");
  plain_pipeline(g, s, reranker, "agent", "no model");
}

// Mermaid ids and labels: ids are ours ([a-z_]); labels are quoted.
std::string label_text(std::string_view s) {
  std::string out;
  for (char c : s)
    out += c == '"' ? '\'' : c;
  return out;
}

}  // namespace

pipeline_graph pipeline_graph_of(const kb_settings& s, std::string_view reranker) {
  pipeline_graph g;
  node(g, "history", "load history", true, "conversation window, summary, memories");
  if (s.answer_mode == "workflow")
    workflow(g, s, reranker);
  else if (s.answer_mode == "tool_agent")
    tool_agent(g, s, reranker);
  else
    plain_pipeline(g, s, reranker, "history", "");
  return g;
}

std::string to_mermaid(const pipeline_graph& g) {
  std::string m = "flowchart TD\n";
  for (auto& n : g.nodes)
    m += "  " + n.id + "[\"" + label_text(n.label) + (n.enabled ? "" : " (off)") + "\"]\n";
  for (auto& e : g.edges)
    m += "  " + e.from + (e.label.empty() ? " --> " : " -- \"" + label_text(e.label) + "\" --> ")
         + e.to + "\n";
  for (auto& n : g.nodes)
    if (!n.enabled)
      m += "  style " + n.id + " stroke-dasharray: 5 5\n";
  return m;
}

std::string pipeline_json(const kb_settings& s, std::string_view reranker) {
  auto g = pipeline_graph_of(s, reranker);
  json_writer w;
  w.begin_object().field("kb", s.name).field("answer_mode", s.answer_mode);
  w.key("switches").begin_object()
      .field("enable_query_rewrite", s.enable_query_rewrite)
      .field("enable_rerank", s.enable_rerank)
      .field("search_mode", s.search_mode)
      .field("default_top_k", static_cast<int64_t>(s.top_k))
      .field("rerank_top_k", static_cast<int64_t>(s.rerank_top_k))
      .field("vector_threshold", s.vector_threshold)
      .field("bm25_threshold", s.bm25_threshold)
      .field("min_confidence_score", s.min_confidence_score)
      .field("enable_source_citation", s.enable_source_citation)
      .field("temperature", s.temperature)
      .field("max_tokens", static_cast<int64_t>(s.max_tokens))
      .field("max_tool_calls", static_cast<int64_t>(s.max_tool_calls))
      .end_object();
  w.key("nodes").begin_array();
  for (auto& n : g.nodes)
    w.begin_object()
        .field("id", n.id)
        .field("label", n.label)
        .field("enabled", n.enabled)
        .field("note", n.note)
        .end_object();
  w.end_array();
  w.key("edges").begin_array();
  for (auto& e : g.edges) {
    w.begin_object().field("from", e.from).field("to", e.to);
    if (!e.label.empty())
      w.field("when", e.label);
    w.end_object();
  }
  w.end_array();
  w.field("mermaid", to_mermaid(g));
  w.end_object();
  return w.take();
}

}  // namespace ragtor
