// The guided workflow's turn (seed 003) as a state machine:
//
//   load state -> intent -> chitchat: a general reply steering back
//                        -> slots: merge what this message states
//                        -> missing slots: ask (max_ask_rounds), then escalate
//                        -> retrieval loop: search the intent's source,
//                           evaluate; retry with a rewritten query or switch
//                           source (max_retrieval_rounds)
//                        -> verify -> generate | escalate (need_human_help)
//
// Model calls are bounded (model_timeout_ms) and retried with backoff
// (model_retries) by the driver; unusable replies are handled by the node,
// never thrown. Each on_* handler is one node: it reads the result of the
// step it asked for and returns the next step.
#include <spdlog/spdlog.h>

#include "pipeline/planner_logic.hpp"
#include "protocol/log.hpp"
#include "pipeline/workflow.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"

namespace ragtor::plan {

namespace {
const log::component lg{"planner"};
}  // namespace

namespace {

std::string slots_json(const wf::flow_state& st) {
  json_writer w;
  w.begin_object();
  for (auto& [k, v] : st.slots)
    w.field(k, v);
  w.end_object();
  return w.take();
}

std::string names_json(const std::vector<std::string>& names) {
  json_writer w;
  w.begin_array();
  for (auto& n : names)
    w.value(n);
  w.end_array();
  return w.take();
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (auto& n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s;
}

class workflow_planner final : public planner_logic {
public:
  explicit workflow_planner(plan_input in) : in_(std::move(in)) {
  }

  step start() override {
    t_ = clock::now();
    auto def = wf::parse_workflow(in_.settings.workflow_json);
    if (!def) {
      // The KB was validated when it was created; only a hand-edited
      // catalog gets here. Serve the KB plainly rather than fail the turn.
      log("workflow", t_, json_strings({{"kb", in_.kb}}),
          json_strings({{"outcome", "invalid workflow: " + error_message(def.error())
                                      + "; plain pipeline"}}));
      return pipeline();
    }
    def_ = std::move(*def);
    stage_ = "load_state";
    step s;
    s.kind = step_kind::load_state;
    s.conversation_id = in_.conversation_id;
    return s;
  }

  step next(result last) override {
    switch (node_) {
      case node::load_state:
        return on_state(std::move(last));
      case node::intent:
        return on_intent(std::move(last));
      case node::slots:
        return on_slots(std::move(last));
      case node::search:
        return on_search(std::move(last));
      case node::evaluate:
        return on_evaluate(std::move(last));
      case node::verify:
        return on_verify(std::move(last));
      case node::saving:
        if (!last.ok)
          lg->warn("workflow {}: flow state not stored: {}", in_.request_id,
                       error_message(last.error));
        return finish(std::move(out_));
    }
    return finish(std::move(out_));
  }

  std::string_view stage() const override { return stage_; }

private:
  enum class node { load_state, intent, slots, search, evaluate, verify, saving };

  // -- nodes ----------------------------------------------------------------

  step on_state(result last) {
    if (!last.ok)
      lg->warn("workflow {}: flow state unreadable ({}); starting afresh", in_.request_id,
                   error_message(last.error));
    state_ = wf::flow_state_from_json(last.ok ? last.text : std::string{});
    if (!state_.intent.empty())
      intent_ = def_.intent(state_.intent);
    if (intent_) {
      log("intent", t_, json_strings({{"question", in_.question}}),
          json_strings({{"intent", intent_->l2}, {"outcome", "pending intent kept"}}));
      return after_intent();
    }
    state_ = {};
    t_ = clock::now();
    return model(node::intent, "intent", wf::intent_request(def_, in_.question, in_.history));
  }

  step on_intent(result last) {
    if (!last.ok) {
      log("intent", t_, json_strings({{"question", in_.question}}),
          json_strings({{"outcome", "model unavailable (" + error_message(last.error)
                                      + "); plain pipeline"},
                      {"attempts", std::to_string(last.attempts)}}));
      return pipeline();
    }
    auto name = wf::parse_intent_reply(def_, last.completion.text);
    std::string outcome = "detected";
    if (name.empty()) {
      // An unusable reply: a KB with one intent has no choice to make;
      // otherwise the plain pipeline answers from this KB.
      if (def_.intents.size() != 1) {
        log("intent", t_, json_strings({{"question", in_.question}}),
            json_strings({{"outcome", "unusable reply; plain pipeline"},
                        {"reply", last.completion.text}}));
        return pipeline();
      }
      name = def_.intents.front().l2;
      outcome = "unusable reply; the only intent";
    }
    log("intent", t_, json_strings({{"question", in_.question}}),
        json_strings({{"intent", name},
                    {"outcome", outcome},
                    {"attempts", std::to_string(last.attempts)}}));
    if (name == "chitchat") {
      out_.action = "generate";
      out_.general = true;
      out_.question = in_.question;
      out_.instructions = wf::chitchat_instructions(def_);
      return save_then_finish("");
    }
    intent_ = def_.intent(name);
    state_.intent = intent_->l2;
    state_.question = in_.question;
    return after_intent();
  }

  step after_intent() {
    if (!intent_->slots.empty()) {
      t_ = clock::now();
      slots_before_ = slots_json(state_);
      return model(node::slots, "slots", wf::slot_request(*intent_, state_, in_.question));
    }
    return begin_retrieval();
  }

  // Merges the slots this message states; asks for what is missing, or
  // escalates after max_ask_rounds questions.
  step on_slots(result last) {
    std::vector<std::string> set;
    std::string outcome = "merged";
    if (last.ok)
      set = wf::merge_slots(*intent_, last.completion.text, state_);
    else
      outcome = "model failed: " + error_message(last.error);
    auto missing = wf::missing_slots(*intent_, state_);
    {
      json_writer w;
      w.begin_object().field("outcome", outcome);
      w.key("set").raw(names_json(set));
      w.key("slots").raw(slots_json(state_));
      w.key("missing").raw(names_json(missing));
      w.end_object();
      json_writer in;
      in.begin_object().field("intent", intent_->l2).key("known").raw(slots_before_).end_object();
      log("slots", t_, in.take(), w.take());
    }
    if (missing.empty())
      return begin_retrieval();
    t_ = clock::now();
    if (state_.ask_rounds >= def_.max_ask_rounds)
      return escalate("still missing " + join(missing) + " after "
                      + std::to_string(state_.ask_rounds) + " questions");
    ++state_.ask_rounds;
    out_.action = "reply";
    out_.reply = wf::ask_text(*intent_, missing);
    json_writer w;
    w.begin_object().field("round", static_cast<int64_t>(state_.ask_rounds));
    w.field("max_rounds", static_cast<int64_t>(def_.max_ask_rounds));
    w.key("missing").raw(names_json(missing));
    w.end_object();
    log("ask", t_, json_strings({{"intent", intent_->l2}}), w.take());
    return save_then_finish(wf::to_json(state_));
  }

  step begin_retrieval() {
    sources_ = intent_->sources;
    if (sources_.empty())
      sources_.emplace_back("kb");
    source_ = 0;
    round_ = 0;
    question_ = wf::full_question(state_);
    query_ = wf::search_query(state_);
    return search_round();
  }

  // One round of the loop: search the current source for the query.
  step search_round() {
    ++round_;
    t_ = clock::now();
    stage_ = "retrieval";
    node_ = node::search;
    auto& source = sources_[source_];
    if (source.starts_with("tool:")) {
      auto* tool = def_.tool(std::string_view{source}.substr(5));
      if (!tool) {
        result none;
        none.ok = false;
        none.error = make_error(errc::not_found, "no tool " + source.substr(5));
        return on_search(std::move(none));
      }
      json_writer w;
      w.begin_object().field("query", query_).field("intent", intent_->l2);
      w.key("slots").raw(slots_json(state_));
      w.end_object();
      step s;
      s.kind = step_kind::post_tool;
      s.url = tool->url;
      s.body = w.take();
      s.timeout_ms = tool->timeout_ms;
      return s;
    }
    step s;
    s.kind = step_kind::search;
    s.worker_name = format_worker_name(source == "kb" ? in_.kb : source.substr(3), in_.agent_type);
    s.query = query_;
    s.top_k = in_.top_k;
    s.timeout_ms = def_.model_timeout_ms;
    return s;
  }

  // Failures yield no results (logged by the retrieval node as zero
  // results, with the reason in the server log).
  step on_search(result last) {
    auto& source = sources_[source_];
    docs_.clear();
    if (!last.ok)
      lg->warn("workflow {}: {} {} failed: {}", in_.request_id,
                   source.starts_with("tool:") ? "tool" : "search of", source,
                   error_message(last.error));
    else if (source.starts_with("tool:"))
      docs_ = wf::tool_evidence(source.substr(5), last.text);
    else
      docs_ = std::move(last.found.retrieval_results);
    if (docs_.empty()) {
      wf::evaluation e;
      e.suggestion = "switch_source";
      return decide(e);
    }
    return model(node::evaluate, "retrieval", wf::evaluate_request(question_, query_, docs_));
  }

  step on_evaluate(result last) {
    if (!last.ok) {
      // No judge: results in hand are used; verification decides.
      wf::evaluation e;
      e.sufficient = true;
      e.suggestion = "pass";
      return decide(e);
    }
    return decide(wf::parse_evaluation(last.completion.text));
  }

  // After a round was evaluated: verify, search again, or escalate.
  step decide(const wf::evaluation& e) {
    json_writer w;
    w.begin_object()
        .field("round", static_cast<int64_t>(round_))
        .field("source", sources_[source_])
        .field("query", query_)
        .field("results", static_cast<uint64_t>(docs_.size()))
        .field("is_sufficient", e.sufficient)
        .field("suggestion", e.suggestion);
    std::string next;
    if (!e.sufficient && round_ < def_.max_retrieval_rounds) {
      if ((e.suggestion == "switch_source" || e.rewritten_query.empty())
          && source_ + 1 < sources_.size()) {
        ++source_;
        next = "switch source to " + sources_[source_];
      } else if (!e.rewritten_query.empty() && e.rewritten_query != query_) {
        query_ = e.rewritten_query;
        next = "retry with rewritten query";
      } else if (source_ + 1 < sources_.size()) {
        ++source_;
        next = "switch source to " + sources_[source_];
      } else {
        next = "retry";
      }
    }
    w.field("next", next).end_object();
    log("retrieval", t_, json_strings({{"intent", intent_->l2}}), w.take());
    if (e.sufficient) {
      t_ = clock::now();
      return model(node::verify, "verify", wf::verify_request(question_, docs_));
    }
    if (round_ < def_.max_retrieval_rounds)
      return search_round();
    t_ = clock::now();
    return escalate("the knowledge sources do not contain enough to answer after "
                    + std::to_string(def_.max_retrieval_rounds) + " searches");
  }

  step on_verify(result last) {
    auto v = last.ok ? wf::parse_verdict(last.completion.text) : wf::verdict{};
    log("verify", t_, json_strings({{"question", question_}}),
        json_strings({{"answers", v.answers ? "true" : "false"},
                    {"reason", last.ok ? (v.parsed ? v.reason : "unusable reply")
                                       : "model failed: " + error_message(last.error)}}));
    if (!v.answers) {
      t_ = clock::now();
      return escalate(v.parsed ? "the evidence does not answer the question: " + v.reason
                               : "the evidence could not be verified");
    }
    out_.action = "generate";
    out_.question = question_;
    out_.evidence.retrieval_results = std::move(docs_);
    fill_ids_and_context(out_.evidence);
    return save_then_finish("");
  }

  // -- helpers --------------------------------------------------------------

  step model(node n, std::string_view stage, completion_request req) {
    node_ = n;
    stage_ = stage;
    req.request_id = in_.request_id;
    step s;
    s.kind = step_kind::complete;
    s.completion = std::move(req);
    s.timeout_ms = def_.model_timeout_ms;
    s.retries = def_.model_retries;
    return s;
  }

  step escalate(std::string reason) {
    out_.action = "escalate";
    out_.need_human_help = true;
    out_.reason = reason;
    out_.reply = wf::escalation_text(reason);
    log("escalate", t_, json_strings({{"intent", state_.intent}}), json_strings({{"reason", reason}}));
    return save_then_finish("");
  }

  // Stores the flow state (a failure is logged, never fails the turn),
  // then finishes with out_.
  step save_then_finish(std::string state_json) {
    node_ = node::saving;
    stage_ = "save_state";
    step s;
    s.kind = step_kind::save_state;
    s.conversation_id = in_.conversation_id;
    s.state_json = std::move(state_json);
    return s;
  }

  step pipeline() {
    plan_outcome out;
    out.action = "pipeline";
    return finish(std::move(out));
  }

  plan_input in_;
  wf::workflow_def def_;
  wf::flow_state state_;
  const wf::intent_def* intent_ = nullptr;
  node node_ = node::load_state;
  std::string stage_ = "workflow";
  clock::time_point t_;  // when the current node started
  std::string slots_before_;
  // The retrieval loop.
  std::vector<std::string> sources_;
  size_t source_ = 0;
  int32_t round_ = 0;
  std::string question_, query_;
  std::vector<retrieval_item> docs_;
  plan_outcome out_;
};

}  // namespace

std::unique_ptr<planner_logic> make_workflow_planner(plan_input in) {
  return std::make_unique<workflow_planner>(std::move(in));
}

}  // namespace ragtor::plan
