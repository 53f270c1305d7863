// The tool-calling agent's turn (seed 001) as a state machine: the model
// drives a bounded loop over retrieval tools in the OpenAI tools format,
// then the stream's generate node writes the answer from the evidence it
// collected (the XML mega-prompt with verified citations).
//
//   fast path (small talk) -> general answer, no tools
//   loop: model -> tool calls, one at a time -> results back to the model,
//         until it calls none ("READY") or max_tool_calls is reached
//         (further calls are refused to the model)
//   -> generate from the evidence
//
// Unknown tools and malformed arguments are answered to the model as
// errors (and count against the limit); every decision is a node log.
// Without a model the KB is served by the plain pipeline.
#include "llm/query_rewrite.hpp"
#include "llm/rerank.hpp"
#include "protocol/text.hpp"
#include "pipeline/planner_logic.hpp"
#include "pipeline/tool_agent.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"

namespace ragtor::plan {

namespace {

constexpr int32_t model_timeout_ms = 20000;
constexpr size_t max_evidence = 20;

class tool_agent_planner final : public planner_logic {
public:
  explicit tool_agent_planner(plan_input in) : in_(std::move(in)) {
  }

  step start() override {
    auto t = clock::now();
    if (agent::fast_path(in_.question)) {
      log_decision(t, 0, {}, "fast path: small talk, answered without tools");
      plan_outcome out;
      out.action = "generate";
      out.general = true;
      return finish(std::move(out));
    }
    msgs_.push_back(
        {"system", agent::system_prompt(in_.settings.description, in_.settings.max_tool_calls)});
    std::string user;
    auto first = in_.history.size() > 6 ? in_.history.size() - 6 : 0;
    if (first < in_.history.size())
      user += "Conversation so far:\n";
    for (size_t i = first; i < in_.history.size(); ++i)
      user += (in_.history[i].role == "user" ? "User: " : "Assistant: ")
              + utf8_prefix(in_.history[i].content, 300) + "\n";
    user += "Question: " + in_.question;
    msgs_.push_back({"user", std::move(user)});
    return ask_model();
  }

  step next(result last) override {
    if (waiting_ == waiting::model)
      return on_model(std::move(last));
    return on_tool(std::move(last));
  }

  std::string_view stage() const override {
    return waiting_ == waiting::model ? "agent" : "tool";
  }

private:
  enum class waiting { model, tool };

  step ask_model() {
    ++step_no_;
    t_ = clock::now();
    waiting_ = waiting::model;
    step s;
    s.kind = step_kind::complete;
    s.completion.purpose = "tool_agent";
    s.completion.max_tokens = 300;
    s.completion.temperature = 0;
    s.completion.messages = msgs_;
    s.completion.tools_json = agent::tools_json();
    s.completion.tool_choice = "auto";
    s.completion.request_id = in_.request_id;
    s.timeout_ms = model_timeout_ms;
    s.retries = 1;
    return s;
  }

  step on_model(result last) {
    if (!last.ok) {
      if (step_no_ == 1) {
        log_decision(t_, step_no_, {},
                     "model unavailable (" + error_message(last.error) + "); plain pipeline");
        plan_outcome out;
        out.action = "pipeline";
        return finish(std::move(out));
      }
      log_decision(t_, step_no_, {},
                   "model failed (" + error_message(last.error)
                       + "); answering from the evidence so far");
      return answer();
    }
    auto& res = last.completion;
    if (res.tool_calls.empty()) {
      log_decision(t_, step_no_, {}, "ready: no more tool calls");
      return answer();
    }
    log_decision(t_, step_no_, res.tool_calls, "tool calls");
    llm_message assistant{"assistant", res.text};
    assistant.tool_calls = res.tool_calls;
    msgs_.push_back(std::move(assistant));
    calls_ = std::move(res.tool_calls);
    next_call_ = 0;
    return run_calls();
  }

  // Runs the pending tool calls in order; tools that need no I/O answer
  // at once, the first that does returns its step.
  step run_calls() {
    auto max_calls = in_.settings.max_tool_calls;
    while (next_call_ < calls_.size()) {
      auto& call = calls_[next_call_];
      tool_t_ = clock::now();
      if (made_ >= max_calls) {
        log_tool(call, "refused: tool call limit reached");
        reply_to(call, "refused: the limit of " + std::to_string(max_calls)
                           + " tool calls is reached; answer with the evidence collected.");
        continue;
      }
      ++made_;
      if (auto s = start_tool(call))
        return std::move(*s);
    }
    if (made_ >= max_calls) {
      log_decision(clock::now(), step_no_, {},
                   "limit of " + std::to_string(max_calls) + " tool calls reached");
      return answer();
    }
    return ask_model();
  }

  // The tool result goes back to the model; the next call follows.
  void reply_to(const tool_call& call, std::string text) {
    llm_message reply{"tool", std::move(text)};
    reply.tool_call_id = call.id;
    msgs_.push_back(std::move(reply));
    ++next_call_;
  }

  // The step a tool call needs, or nullopt when it was answered at once.
  std::optional<step> start_tool(const tool_call& call) {
    if (!agent::is_tool(call.name)) {
      log_tool(call, "refused: unknown tool");
      std::string names;
      for (auto n : agent::tool_names)
        names += (names.empty() ? "" : ", ") + std::string{n};
      reply_to(call, "error: unknown tool \"" + call.name + "\"; the tools are " + names + ".");
      return std::nullopt;
    }
    auto arg = agent::argument_of(call.name, call.arguments);
    if (!arg) {
      log_tool(call, "refused: malformed arguments");
      reply_to(call, std::string{"error: the arguments must be a JSON object with a non-empty \""}
                         + (call.name == "query_rewrite" ? "question" : "query") + "\" string.");
      return std::nullopt;
    }
    auto& docs = evidence_.retrieval_results;
    waiting_ = waiting::tool;
    step s;
    s.timeout_ms = model_timeout_ms;
    if (call.name == "vector_retrieve") {
      s.kind = step_kind::search;
      s.worker_name = format_worker_name(in_.kb, in_.agent_type);
      s.query = *arg;
      s.top_k = in_.top_k;
      return s;
    }
    if (call.name == "rerank" || call.name == "grade") {
      if (docs.size() < 2) {
        log_tool(call, "skipped: fewer than 2 passages");
        reply_to(call, "Nothing to " + call.name + ". " + agent::evidence_summary(docs));
        return std::nullopt;
      }
      s.kind = step_kind::complete;
      s.completion = call.name == "rerank" ? llm::rerank_request(*arg, docs)
                                           : agent::grade_request(*arg, docs);
      s.completion.request_id = in_.request_id;
      s.retries = 1;
      return s;
    }
    if (call.name == "query_rewrite") {
      std::vector<std::pair<std::string, std::string>> window;
      for (auto& m : in_.history)
        window.emplace_back(m.role, m.content);
      s.kind = step_kind::complete;
      s.completion = llm::rewrite_request(*arg, window);
      s.completion.request_id = in_.request_id;
      s.retries = 1;
      return s;
    }
    // memory_retrieve: what the turn recalled for this user.
    std::string out;
    for (auto& m : in_.memories)
      out += "- memory: " + m + "\n";
    for (auto& e : in_.episodic)
      out += "- past turn: " + utf8_prefix(e, 400) + "\n";
    log_tool(call, std::to_string(in_.memories.size()) + " memories, "
                       + std::to_string(in_.episodic.size()) + " past turns");
    reply_to(call, out.empty() ? "Nothing is remembered about this user." : out);
    return std::nullopt;
  }

  // The result of the tool call in flight.
  step on_tool(result last) {
    auto& call = calls_[next_call_];
    auto& docs = evidence_.retrieval_results;
    if (call.name == "vector_retrieve") {
      if (!last.ok) {
        log_tool(call, "search failed: " + error_message(last.error));
        reply_to(call, "error: the search failed; try again or answer with the evidence "
                       "collected.");
        return run_calls();
      }
      size_t added = 0;
      for (auto& item : last.found.retrieval_results) {
        bool seen = false;
        for (auto& d : docs)
          seen = seen || d.result_id == item.result_id;
        if (!seen && docs.size() < max_evidence) {
          docs.push_back(std::move(item));
          ++added;
        }
      }
      log_tool(call, std::to_string(added) + " new results");
      reply_to(call, std::to_string(added) + " new results. " + agent::evidence_summary(docs));
      return run_calls();
    }
    if (call.name == "query_rewrite") {
      auto q = last.ok ? llm::parse_rewrite_reply(last.completion.text) : std::string{};
      log_tool(call, q.empty() ? "no rewrite" : "rewritten: " + q);
      reply_to(call, q.empty() ? "No rewrite available; search with the question as it is." : q);
      return run_calls();
    }
    // rerank / grade
    bool rerank = call.name == "rerank";
    auto order = !last.ok ? std::nullopt
                 : rerank ? llm::parse_rerank_reply(last.completion.text, docs.size())
                          : agent::parse_grade_reply(last.completion.text, docs.size());
    if (!order) {
      log_tool(call, last.ok ? "unusable reply; evidence unchanged"
                             : "model failed: " + error_message(last.error));
      reply_to(call, "The " + call.name + " step failed; the evidence is unchanged. "
                         + agent::evidence_summary(docs));
      return run_calls();
    }
    auto before = docs.size();
    llm::apply_rerank(evidence_, *order, order->size());
    log_tool(call, rerank ? "reordered"
                          : "kept " + std::to_string(docs.size()) + " of " + std::to_string(before));
    reply_to(call, agent::evidence_summary(docs));
    return run_calls();
  }

  step answer() {
    plan_outcome out;
    out.action = "generate";
    if (evidence_.retrieval_results.empty() && made_ == 0) {
      out.general = true;  // the model needed no documents
      return finish(std::move(out));
    }
    out.evidence = std::move(evidence_);
    fill_ids_and_context(out.evidence);
    return finish(std::move(out));
  }

  void log_decision(clock::time_point t, int step, const std::vector<tool_call>& calls,
                    const std::string& decision) {
    json_writer in;
    in.begin_object().field("question", in_.question).field("step", static_cast<int64_t>(step));
    in.end_object();
    json_writer out;
    out.begin_object().field("decision", decision);
    out.key("tool_calls").begin_array();
    for (auto& c : calls)
      out.begin_object().field("name", c.name).field("arguments", c.arguments).end_object();
    out.end_array().end_object();
    log("agent", t, in.take(), out.take());
  }

  void log_tool(const tool_call& call, const std::string& outcome) {
    json_writer in;
    in.begin_object().field("name", call.name).field("arguments", call.arguments).end_object();
    json_writer out;
    out.begin_object()
        .field("outcome", outcome)
        .field("evidence", static_cast<uint64_t>(evidence_.retrieval_results.size()))
        .end_object();
    log("tool", tool_t_, in.take(), out.take());
  }

  plan_input in_;
  std::vector<llm_message> msgs_;
  std::vector<tool_call> calls_;  // of the model's last reply
  size_t next_call_ = 0;
  int32_t made_ = 0;  // tool calls run (refused ones not counted)
  int step_no_ = 0;
  waiting waiting_ = waiting::model;
  clock::time_point t_, tool_t_;
  retrieval_result evidence_;
};

}  // namespace

std::unique_ptr<planner_logic> make_tool_agent_planner(plan_input in) {
  return std::make_unique<tool_agent_planner>(std::move(in));
}

}  // namespace ragtor::plan
