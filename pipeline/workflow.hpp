// The guided workflow (seed 003) as plain functions: its definition (a KB's
// `workflow` object), the state it keeps per conversation, and the model
// requests and reply parsers of its nodes. The actor that runs a turn
// through it is actors/pipeline/workflow_turn.
//
//   intent -> (chitchat -> general reply steering back)
//          -> slot filling (merged across turns) -> ask for missing slots
//             (at most max_ask_rounds, then escalate)
//          -> retrieval loop: dispatch -> search -> evaluate -> rewrite or
//             switch source (at most max_retrieval_rounds)
//          -> verify -> generate | escalate (need_human_help)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "protocol/messages.hpp"
#include "protocol/workflow_def.hpp"

namespace ragtor::wf {

// What the workflow remembers of a conversation between turns.
struct flow_state {
  std::string intent;                        // pending intent ("" = none)
  std::string question;                      // the message that raised it
  std::map<std::string, std::string> slots;  // filled so far
  int32_t ask_rounds = 0;                    // questions asked for this intent
};

std::string to_json(const flow_state& s);
// An empty state for "" or anything unreadable.
flow_state flow_state_from_json(std::string_view json);

// -- nodes ------------------------------------------------------------------

// intent: {"intent": "<l2>|chitchat", "confidence": 0..1}.
completion_request intent_request(const workflow_def& def, std::string_view question,
                                  const std::vector<stored_message>& window);
// The intent named by the reply ("chitchat", an l2 name, or "" when unusable).
std::string parse_intent_reply(const workflow_def& def, std::string_view reply);

// slot filling: {"slots": {"<name>": "<value>" | null}} for the intent's slots.
completion_request slot_request(const intent_def& intent, const flow_state& state,
                                std::string_view question);
// Merges the reply's non-empty values for known slots into `state`
// (incremental: a later value replaces an earlier one); answers which
// slots were set. Unusable replies change nothing.
std::vector<std::string> merge_slots(const intent_def& intent, std::string_view reply,
                                     flow_state& state);
std::vector<std::string> missing_slots(const intent_def& intent, const flow_state& state);
// The question for the missing slots (deterministic, from the definitions).
std::string ask_text(const intent_def& intent, const std::vector<std::string>& missing);

// The query searched for: the question that raised the intent plus the
// filled slot values.
std::string search_query(const flow_state& state);
// The question to answer: the one that raised the intent, with the slots
// ("How do I get a refund? (order_id: A-1234)").
std::string full_question(const flow_state& state);

// evaluate: {"is_sufficient": bool, "suggestion": "pass|retry_same|switch_source",
//            "rewritten_query": "..."}.
completion_request evaluate_request(std::string_view question, std::string_view query,
                                    const std::vector<retrieval_item>& docs);
struct evaluation {
  bool sufficient = false;
  std::string suggestion;  // pass | retry_same | switch_source
  std::string rewritten_query;
  bool parsed = false;  // false: the reply was unusable (treated as insufficient)
};
evaluation parse_evaluation(std::string_view reply);

// verify: {"answers": bool, "reason": "..."}.
completion_request verify_request(std::string_view question,
                                  const std::vector<retrieval_item>& docs);
struct verdict {
  bool answers = false;
  std::string reason;
  bool parsed = false;
};
verdict parse_verdict(std::string_view reply);

// Instructions for the chit-chat reply: friendly, brief, back to business.
std::string chitchat_instructions(const workflow_def& def);
// The text of an escalation to a human.
std::string escalation_text(std::string_view reason);

// Evidence from an HTTP tool's JSON answer (results array, or the whole
// body as one item); tool name used as source.
std::vector<retrieval_item> tool_evidence(std::string_view tool, std::string_view body);

}  // namespace ragtor::wf
