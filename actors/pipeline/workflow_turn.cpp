// The guided workflow's turn (seed 003), top to bottom:
//
//   intent -> chitchat: a general reply steering back to the business
//          -> slots: merge what this message states into the stored state
//          -> missing slots: ask (at most max_ask_rounds), then escalate
//          -> retrieval loop: search the intent's source, evaluate; retry
//             with a rewritten query or switch source (max_retrieval_rounds)
//          -> verify: does the evidence answer the question?
//          -> generate | escalate (need_human_help, reason)
//
// Every model call is bounded (model_timeout_ms) and retried with backoff
// (model_retries); unusable replies are handled by the node, never thrown.
#include <spdlog/spdlog.h>

#include "actors/pipeline/planner_calls.hpp"
#include "pipeline/http_json.hpp"
#include "pipeline/workflow.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"

namespace ragtor {

namespace {

using clock = planner_calls::clock;

std::string obj(std::initializer_list<std::pair<std::string_view, std::string>> fields) {
  json_writer w;
  w.begin_object();
  for (auto& [k, v] : fields)
    w.field(k, v);
  w.end_object();
  return w.take();
}

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

class workflow_turn {
public:
  workflow_turn(caf::actor_system& sys, planner_deps deps, const plan_input& in)
      : calls_(sys, std::move(deps), in.request_id), in_(in) {
  }

  plan_outcome run() {
    auto started = clock::now();
    auto def = wf::parse_workflow(in_.settings.workflow_json);
    if (!def) {
      // The KB was validated when it was created; only a hand-edited
      // catalog gets here. Serve the KB plainly rather than fail the turn.
      calls_.log("workflow", started, obj({{"kb", in_.kb}}),
                 obj({{"outcome", "invalid workflow: " + error_message(def.error())
                                      + "; plain pipeline"}}));
      return pipeline();
    }
    def_ = std::move(*def);
    policy_.timeout_ms = def_.model_timeout_ms;
    policy_.retries = def_.model_retries;
    state_ = wf::flow_state_from_json(calls_.load_flow_state(in_.conversation_id));
    const wf::intent_def* intent = nullptr;
    if (!state_.intent.empty())
      intent = def_.intent(state_.intent);
    if (intent) {
      calls_.log("intent", started, obj({{"question", in_.question}}),
                 obj({{"intent", intent->l2}, {"outcome", "pending intent kept"}}));
    } else {
      state_ = {};
      auto name = detect_intent();
      if (!name)
        return pipeline();
      if (*name == "chitchat")
        return chitchat();
      intent = def_.intent(*name);
      state_.intent = intent->l2;
      state_.question = in_.question;
    }
    if (!intent->slots.empty())
      if (auto ended = fill_slots(*intent))
        return std::move(*ended);
    return retrieve_and_answer(*intent);
  }

private:
  // -- nodes ----------------------------------------------------------------

  // The intent's name ("chitchat" included); nullopt: no model, so the KB
  // is served by the plain pipeline.
  std::optional<std::string> detect_intent() {
    auto t = clock::now();
    int attempts = 0;
    auto res = calls_.complete(wf::intent_request(def_, in_.question, in_.history), policy_,
                               &attempts);
    if (!res) {
      calls_.log("intent", t, obj({{"question", in_.question}}),
                 obj({{"outcome", "model unavailable (" + error_message(res.error())
                                      + "); plain pipeline"},
                      {"attempts", std::to_string(attempts)}}));
      return std::nullopt;
    }
    auto name = wf::parse_intent_reply(def_, res->text);
    std::string outcome = "detected";
    if (name.empty()) {
      // An unusable reply: a KB with one intent has no choice to make;
      // otherwise the plain pipeline answers from this KB.
      if (def_.intents.size() != 1) {
        calls_.log("intent", t, obj({{"question", in_.question}}),
                   obj({{"outcome", "unusable reply; plain pipeline"}, {"reply", res->text}}));
        return std::nullopt;
      }
      name = def_.intents.front().l2;
      outcome = "unusable reply; the only intent";
    }
    calls_.log("intent", t, obj({{"question", in_.question}}),
               obj({{"intent", name}, {"outcome", outcome},
                    {"attempts", std::to_string(attempts)}}));
    return name;
  }

  plan_outcome chitchat() {
    out_.action = "generate";
    out_.general = true;
    out_.question = in_.question;
    out_.instructions = wf::chitchat_instructions(def_);
    calls_.save_flow_state(in_.conversation_id, "");
    return finish();
  }

  // Merges the slots this message states; answers the outcome when the
  // turn ends here (asking for what is missing, or escalating).
  std::optional<plan_outcome> fill_slots(const wf::intent_def& intent) {
    auto t = clock::now();
    auto before = slots_json(state_);
    std::vector<std::string> set;
    std::string outcome = "merged";
    auto res = calls_.complete(wf::slot_request(intent, state_, in_.question), policy_);
    if (res)
      set = wf::merge_slots(intent, res->text, state_);
    else
      outcome = "model failed: " + error_message(res.error());
    auto missing = wf::missing_slots(intent, state_);
    {
      json_writer w;
      w.begin_object().field("outcome", outcome);
      w.key("set").raw(names_json(set));
      w.key("slots").raw(slots_json(state_));
      w.key("missing").raw(names_json(missing));
      w.end_object();
      json_writer in;
      in.begin_object().field("intent", intent.l2).key("known").raw(before).end_object();
      calls_.log("slots", t, in.take(), w.take());
    }
    if (missing.empty())
      return std::nullopt;
    t = clock::now();
    if (state_.ask_rounds >= def_.max_ask_rounds)
      return escalate("still missing " + join(missing) + " after "
                      + std::to_string(state_.ask_rounds) + " questions");
    ++state_.ask_rounds;
    calls_.save_flow_state(in_.conversation_id, wf::to_json(state_));
    out_.action = "reply";
    out_.reply = wf::ask_text(intent, missing);
    json_writer w;
    w.begin_object().field("round", static_cast<int64_t>(state_.ask_rounds));
    w.field("max_rounds", static_cast<int64_t>(def_.max_ask_rounds));
    w.key("missing").raw(names_json(missing));
    w.end_object();
    calls_.log("ask", t, obj({{"intent", intent.l2}}), w.take());
    return finish();
  }

  plan_outcome retrieve_and_answer(const wf::intent_def& intent) {
    std::vector<std::string> sources = intent.sources;
    if (sources.empty())
      sources.emplace_back("kb");
    size_t source = 0;
    auto question = wf::full_question(state_);
    auto query = wf::search_query(state_);
    std::vector<retrieval_item> docs;
    bool sufficient = false;
    for (int32_t round = 1; round <= def_.max_retrieval_rounds; ++round) {
      auto t = clock::now();
      docs = search(sources[source], query, intent);
      auto e = evaluate(question, query, docs);
      json_writer w;
      w.begin_object()
          .field("round", static_cast<int64_t>(round))
          .field("source", sources[source])
          .field("query", query)
          .field("results", static_cast<uint64_t>(docs.size()))
          .field("is_sufficient", e.sufficient)
          .field("suggestion", e.suggestion);
      std::string next;
      if (e.sufficient) {
        sufficient = true;
      } else if (round < def_.max_retrieval_rounds) {
        if ((e.suggestion == "switch_source" || e.rewritten_query.empty())
            && source + 1 < sources.size()) {
          ++source;
          next = "switch source to " + sources[source];
        } else if (!e.rewritten_query.empty() && e.rewritten_query != query) {
          query = e.rewritten_query;
          next = "retry with rewritten query";
        } else if (source + 1 < sources.size()) {
          ++source;
          next = "switch source to " + sources[source];
        } else {
          next = "retry";
        }
      }
      w.field("next", next).end_object();
      calls_.log("retrieval", t, obj({{"intent", intent.l2}}), w.take());
      if (sufficient)
        break;
    }
    if (!sufficient)
      return escalate("the knowledge sources do not contain enough to answer after "
                      + std::to_string(def_.max_retrieval_rounds) + " searches");
    auto t = clock::now();
    auto res = calls_.complete(wf::verify_request(question, docs), policy_);
    auto v = res ? wf::parse_verdict(res->text) : wf::verdict{};
    calls_.log("verify", t, obj({{"question", question}}),
               obj({{"answers", v.answers ? "true" : "false"},
                    {"reason", res ? (v.parsed ? v.reason : "unusable reply")
                                   : "model failed: " + error_message(res.error())}}));
    if (!v.answers)
      return escalate(v.parsed ? "the evidence does not answer the question: " + v.reason
                               : "the evidence could not be verified");
    out_.action = "generate";
    out_.question = question;
    out_.evidence.retrieval_results = std::move(docs);
    fill_ids_and_context(out_.evidence);
    calls_.save_flow_state(in_.conversation_id, "");
    return finish();
  }

  // The source's results for the query; failures yield none (logged by the
  // caller's node as zero results, with the reason in the server log).
  std::vector<retrieval_item> search(const std::string& source, const std::string& query,
                                     const wf::intent_def& intent) {
    if (source.starts_with("tool:")) {
      auto* tool = def_.tool(std::string_view{source}.substr(5));
      if (!tool)
        return {};
      json_writer w;
      w.begin_object().field("query", query).field("intent", intent.l2);
      w.key("slots").raw(slots_json(state_));
      w.end_object();
      auto body = post_json(tool->url, w.take(), tool->timeout_ms);
      if (!body) {
        spdlog::warn("workflow {}: tool {} failed: {}", in_.request_id, tool->name,
                     error_message(body.error()));
        return {};
      }
      return wf::tool_evidence(tool->name, *body);
    }
    auto kb = source == "kb" ? in_.kb : source.substr(3);
    auto res = calls_.search(format_worker_name(kb, in_.agent_type), query, in_.top_k,
                             std::chrono::milliseconds{def_.model_timeout_ms});
    if (!res) {
      spdlog::warn("workflow {}: search of {} failed: {}", in_.request_id, kb,
                   error_message(res.error()));
      return {};
    }
    return std::move(res->retrieval_results);
  }

  wf::evaluation evaluate(const std::string& question, const std::string& query,
                          const std::vector<retrieval_item>& docs) {
    if (docs.empty()) {
      wf::evaluation e;
      e.suggestion = "switch_source";
      return e;
    }
    auto res = calls_.complete(wf::evaluate_request(question, query, docs), policy_);
    if (!res) {
      // No judge: results in hand are used; verification decides.
      wf::evaluation e;
      e.sufficient = true;
      e.suggestion = "pass";
      return e;
    }
    return wf::parse_evaluation(res->text);
  }

  plan_outcome escalate(std::string reason) {
    auto t = clock::now();
    out_.action = "escalate";
    out_.need_human_help = true;
    out_.reason = reason;
    out_.reply = wf::escalation_text(reason);
    calls_.save_flow_state(in_.conversation_id, "");
    calls_.log("escalate", t, obj({{"intent", state_.intent}}), obj({{"reason", reason}}));
    return finish();
  }

  plan_outcome pipeline() {
    out_ = {};
    out_.action = "pipeline";
    return finish();
  }

  plan_outcome finish() {
    out_.logs = calls_.take_logs();
    return std::move(out_);
  }

  static std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (auto& n : names)
      s += (s.empty() ? "" : ", ") + n;
    return s;
  }

  planner_calls calls_;
  const plan_input& in_;
  wf::workflow_def def_;
  wf::flow_state state_;
  model_policy policy_;
  plan_outcome out_;
};

}  // namespace

planner_actor spawn_workflow_planner(caf::actor_system& sys, planner_deps deps,
                                     std::shared_ptr<planner_slot> slot) {
  return spawn_turn_planner<workflow_turn>(sys, std::move(deps), std::move(slot));
}

}  // namespace ragtor
