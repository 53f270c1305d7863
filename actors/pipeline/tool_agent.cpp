// The tool-calling agent's turn (seed 001): the model drives a bounded
// loop over retrieval tools in the OpenAI tools format, then the stream's
// generate node writes the answer from the evidence it collected (the XML
// mega-prompt with verified citations).
//
//   fast path (small talk) -> general answer, no tools
//   loop: model -> tool calls -> results back to the model, until it calls
//         none ("READY") or max_tool_calls is reached (further calls are
//         refused to the model)
//   -> generate from the evidence
//
// Unknown tools and malformed arguments are answered to the model as
// errors (and count against the limit); every decision is a node log.
// Without a model the KB is served by the plain pipeline.

#include "actors/pipeline/planner_calls.hpp"
#include "llm/query_rewrite.hpp"
#include "llm/rerank.hpp"
#include "memory/long_term.hpp"
#include "pipeline/tool_agent.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"

namespace ragtor {

namespace {

using clock = planner_calls::clock;

class agent_turn {
public:
  agent_turn(caf::actor_system& sys, planner_deps deps, const plan_input& in)
      : calls_(sys, std::move(deps), in.request_id), in_(in) {
    policy_.retries = 1;
  }

  plan_outcome run() {
    auto t = clock::now();
    if (agent::fast_path(in_.question)) {
      log_decision(t, 0, {}, "fast path: small talk, answered without tools");
      out_.action = "generate";
      out_.general = true;
      return finish();
    }
    auto max_calls = in_.settings.max_tool_calls;
    std::vector<llm_message> msgs;
    msgs.push_back({"system", agent::system_prompt(in_.settings.description, max_calls)});
    std::string user;
    auto first = in_.history.size() > 6 ? in_.history.size() - 6 : 0;
    if (first < in_.history.size())
      user += "Conversation so far:\n";
    for (size_t i = first; i < in_.history.size(); ++i)
      user += (in_.history[i].role == "user" ? "User: " : "Assistant: ")
              + utf8_prefix(in_.history[i].content, 300) + "\n";
    user += "Question: " + in_.question;
    msgs.push_back({"user", std::move(user)});
    int32_t made = 0;
    for (int step = 1;; ++step) {
      t = clock::now();
      completion_request req;
      req.purpose = "tool_agent";
      req.max_tokens = 300;
      req.temperature = 0;
      req.messages = msgs;
      req.tools_json = agent::tools_json();
      req.tool_choice = "auto";
      auto res = calls_.complete(req, policy_);
      if (!res) {
        if (step == 1) {
          log_decision(t, step, {},
                       "model unavailable (" + error_message(res.error()) + "); plain pipeline");
          out_ = {};
          out_.action = "pipeline";
          return finish();
        }
        log_decision(t, step, {},
                     "model failed (" + error_message(res.error())
                         + "); answering from the evidence so far");
        break;
      }
      if (res->tool_calls.empty()) {
        log_decision(t, step, {}, "ready: no more tool calls");
        break;
      }
      log_decision(t, step, res->tool_calls, "tool calls");
      llm_message assistant{"assistant", res->text};
      assistant.tool_calls = res->tool_calls;
      msgs.push_back(std::move(assistant));
      for (auto& call : res->tool_calls) {
        std::string result;
        if (made >= max_calls) {
          result = "refused: the limit of " + std::to_string(max_calls)
                   + " tool calls is reached; answer with the evidence collected.";
          log_tool(clock::now(), call, "refused: tool call limit reached");
        } else {
          ++made;
          result = run_tool(call);
        }
        llm_message reply{"tool", std::move(result)};
        reply.tool_call_id = call.id;
        msgs.push_back(std::move(reply));
      }
      if (made >= max_calls) {
        log_decision(clock::now(), step, {},
                     "limit of " + std::to_string(max_calls) + " tool calls reached");
        break;
      }
    }
    out_.action = "generate";
    if (evidence_.retrieval_results.empty() && made == 0) {
      out_.general = true;  // the model needed no documents
      return finish();
    }
    out_.evidence = std::move(evidence_);
    fill_ids_and_context(out_.evidence);
    return finish();
  }

private:
  std::string run_tool(const tool_call& call) {
    auto t = clock::now();
    if (!agent::is_tool(call.name)) {
      log_tool(t, call, "refused: unknown tool");
      std::string names;
      for (auto n : agent::tool_names)
        names += (names.empty() ? "" : ", ") + std::string{n};
      return "error: unknown tool \"" + call.name + "\"; the tools are " + names + ".";
    }
    auto arg = agent::argument_of(call.name, call.arguments);
    if (!arg) {
      log_tool(t, call, "refused: malformed arguments");
      return std::string{"error: the arguments must be a JSON object with a non-empty \""}
             + (call.name == "query_rewrite" ? "question" : "query") + "\" string.";
    }
    auto& docs = evidence_.retrieval_results;
    if (call.name == "vector_retrieve") {
      auto res = calls_.search(format_worker_name(in_.kb, in_.agent_type), *arg, in_.top_k,
                               std::chrono::milliseconds{policy_.timeout_ms});
      if (!res) {
        log_tool(t, call, "search failed: " + error_message(res.error()));
        return "error: the search failed; try again or answer with the evidence collected.";
      }
      size_t added = 0;
      for (auto& item : res->retrieval_results) {
        bool seen = false;
        for (auto& d : docs)
          seen = seen || d.result_id == item.result_id;
        if (!seen && docs.size() < 20) {
          docs.push_back(std::move(item));
          ++added;
        }
      }
      log_tool(t, call, std::to_string(added) + " new results");
      return std::to_string(added) + " new results. " + agent::evidence_summary(docs);
    }
    if (call.name == "rerank" || call.name == "grade") {
      if (docs.size() < 2) {
        log_tool(t, call, "skipped: fewer than 2 passages");
        return "Nothing to " + call.name + ". " + agent::evidence_summary(docs);
      }
      bool rerank = call.name == "rerank";
      auto res = calls_.complete(rerank ? llm::rerank_request(*arg, docs)
                                        : agent::grade_request(*arg, docs),
                                 policy_);
      auto order = !res       ? std::nullopt
                   : rerank ? llm::parse_rerank_reply(res->text, docs.size())
                            : agent::parse_grade_reply(res->text, docs.size());
      if (!order) {
        log_tool(t, call, res ? "unusable reply; evidence unchanged"
                              : "model failed: " + error_message(res.error()));
        return "The " + call.name + " step failed; the evidence is unchanged. "
               + agent::evidence_summary(docs);
      }
      auto before = docs.size();
      llm::apply_rerank(evidence_, *order, order->size());
      log_tool(t, call,
               rerank ? "reordered" : "kept " + std::to_string(docs.size()) + " of "
                                          + std::to_string(before));
      return agent::evidence_summary(docs);
    }
    if (call.name == "query_rewrite") {
      std::vector<std::pair<std::string, std::string>> window;
      for (auto& m : in_.history)
        window.emplace_back(m.role, m.content);
      auto res = calls_.complete(llm::rewrite_request(*arg, window), policy_);
      auto q = res ? llm::parse_rewrite_reply(res->text) : std::string{};
      log_tool(t, call, q.empty() ? "no rewrite" : "rewritten: " + q);
      return q.empty() ? "No rewrite available; search with the question as it is." : q;
    }
    // memory_retrieve: what the turn recalled for this user.
    std::string out;
    for (auto& m : in_.memories)
      out += "- memory: " + m + "\n";
    for (auto& e : in_.episodic)
      out += "- past turn: " + utf8_prefix(e, 400) + "\n";
    log_tool(t, call,
             std::to_string(in_.memories.size()) + " memories, "
                 + std::to_string(in_.episodic.size()) + " past turns");
    return out.empty() ? "Nothing is remembered about this user." : out;
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
    calls_.log("agent", t, in.take(), out.take());
  }

  void log_tool(clock::time_point t, const tool_call& call, const std::string& outcome) {
    json_writer in;
    in.begin_object().field("name", call.name).field("arguments", call.arguments).end_object();
    json_writer out;
    out.begin_object()
        .field("outcome", outcome)
        .field("evidence", static_cast<uint64_t>(evidence_.retrieval_results.size()))
        .end_object();
    calls_.log("tool", t, in.take(), out.take());
  }

  plan_outcome finish() {
    out_.logs = calls_.take_logs();
    return std::move(out_);
  }

  planner_calls calls_;
  const plan_input& in_;
  model_policy policy_;
  retrieval_result evidence_;
  plan_outcome out_;
};

}  // namespace

planner_actor spawn_tool_agent_planner(caf::actor_system& sys, planner_deps deps,
                                       std::shared_ptr<planner_slot> slot) {
  return spawn_turn_planner<agent_turn>(sys, std::move(deps), std::move(slot));
}

}  // namespace ragtor
