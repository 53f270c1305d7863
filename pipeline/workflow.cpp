#include "pipeline/workflow.hpp"

#include <set>

#include <simdjson.h>

#include "llm/structured_output.hpp"
#include "protocol/text.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::wf {

namespace {

using simdjson::dom::element;
using simdjson::dom::object;


std::string docs_text(const std::vector<retrieval_item>& docs, size_t max_docs = 6) {
  std::string out;
  for (size_t i = 0; i < docs.size() && i < max_docs; ++i)
    out += "[" + std::to_string(i + 1) + "] " + utf8_prefix(docs[i].evidence, 700) + "\n";
  return out.empty() ? "(no documents)\n" : out;
}

completion_request json_request(std::string purpose, std::string system, std::string user) {
  completion_request req;
  req.purpose = std::move(purpose);
  req.max_tokens = 300;
  req.temperature = 0;
  req.messages.push_back({"system", std::move(system)});
  req.messages.push_back({"user", std::move(user)});
  return req;
}

}  // namespace

std::string to_json(const flow_state& s) {
  json_writer w;
  w.begin_object()
      .field("intent", s.intent)
      .field("question", s.question)
      .field("ask_rounds", static_cast<int64_t>(s.ask_rounds));
  w.key("slots").begin_object();
  for (auto& [k, v] : s.slots)
    w.field(k, v);
  w.end_object().end_object();
  return w.take();
}

flow_state flow_state_from_json(std::string_view json) {
  flow_state s;
  if (json.empty())
    return s;
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(simdjson::padded_string{json}).get(root) != simdjson::SUCCESS)
    return s;
  std::string_view str;
  if (root["intent"].get_string().get(str) == simdjson::SUCCESS)
    s.intent = std::string{str};
  if (root["question"].get_string().get(str) == simdjson::SUCCESS)
    s.question = std::string{str};
  int64_t n = 0;
  if (root["ask_rounds"].get_int64().get(n) == simdjson::SUCCESS)
    s.ask_rounds = static_cast<int32_t>(n);
  object slots;
  if (root["slots"].get_object().get(slots) == simdjson::SUCCESS)
    for (auto [k, v] : slots)
      if (v.get_string().get(str) == simdjson::SUCCESS)
        s.slots[std::string{k}] = std::string{str};
  return s;
}

completion_request intent_request(const workflow_def& def, std::string_view question,
                                  const std::vector<stored_message>& window) {
  std::string sys =
      "You classify the user's latest message into one intent of a customer-service assistant";
  if (!def.business.empty())
    sys += " for " + def.business;
  sys += ". Intents (name: level 1 / description):\n";
  for (auto& in : def.intents)
    sys += "- " + in.l2 + ": " + (in.l1.empty() ? "" : in.l1 + " / ") + in.description + "\n";
  sys += "- chitchat: greetings, small talk, anything unrelated to the intents above\n"
         "Reply with JSON only: {\"intent\": \"<name>\", \"confidence\": <0..1>}.";
  std::string user;
  for (auto& m : window)
    user += (m.role == "user" ? "User: " : "Assistant: ") + utf8_prefix(m.content, 300) + "\n";
  user += "Latest message: " + std::string{question};
  return json_request("workflow_intent", std::move(sys), std::move(user));
}

std::string parse_intent_reply(const workflow_def& def, std::string_view reply) {
  auto p = llm::parse_structured(reply, {{"intent", llm::field_type::string}});
  if (auto* f = std::get_if<llm::parsed_fields>(&p)) {
    auto name = f->string_or("intent");
    if (name == "chitchat" || def.intent(name))
      return name;
  }
  return {};
}

completion_request slot_request(const intent_def& intent, const flow_state& state,
                                std::string_view question) {
  std::string sys = "You extract information from the user's message for the task \""
                    + intent.description + "\". Slots:\n";
  for (auto& s : intent.slots) {
    sys += "- " + s.name + ": " + s.description;
    if (auto i = state.slots.find(s.name); i != state.slots.end())
      sys += " (known: " + i->second + ")";
    sys += "\n";
  }
  sys += "Reply with JSON only: {\"slots\": {\"<slot name>\": \"<value stated by the user>\" or "
         "null}}. Use null for anything the message does not state; never guess.";
  return json_request("workflow_slots", std::move(sys), std::string{question});
}

std::vector<std::string> merge_slots(const intent_def& intent, std::string_view reply,
                                     flow_state& state) {
  std::vector<std::string> set;
  auto p = llm::parse_structured(reply, {{"slots", llm::field_type::object}});
  auto* f = std::get_if<llm::parsed_fields>(&p);
  if (!f)
    return set;
  auto i = f->objects.find("slots");
  if (i == f->objects.end())
    return set;
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(simdjson::padded_string{i->second}).get(root) != simdjson::SUCCESS)
    return set;
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS)
    return set;
  for (auto [k, v] : o) {
    bool known = false;
    for (auto& s : intent.slots)
      known = known || s.name == k;
    if (!known)
      continue;
    std::string value;
    std::string_view str;
    double d = 0;
    int64_t n = 0;
    if (v.get_string().get(str) == simdjson::SUCCESS)
      value = std::string{str};
    else if (v.get_int64().get(n) == simdjson::SUCCESS)
      value = std::to_string(n);
    else if (v.get_double().get(d) == simdjson::SUCCESS)
      value = std::to_string(d);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
      value.pop_back();
    auto lower = value;
    for (auto& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (value.empty() || lower == "null" || lower == "unknown" || lower == "n/a")
      continue;
    state.slots[std::string{k}] = utf8_prefix(value, 200);
    set.emplace_back(k);
  }
  return set;
}

std::vector<std::string> missing_slots(const intent_def& intent, const flow_state& state) {
  std::vector<std::string> out;
  for (auto& s : intent.slots)
    if (!state.slots.contains(s.name))
      out.push_back(s.name);
  return out;
}

std::string ask_text(const intent_def& intent, const std::vector<std::string>& missing) {
  std::string text = "To help you with this, I need a little more information:";
  for (auto& name : missing)
    for (auto& s : intent.slots)
      if (s.name == name)
        text += "\n- " + (s.question.empty() ? "What is the " + s.description + "?" : s.question);
  return text;
}

std::string search_query(const flow_state& state) {
  std::string q = state.question;
  for (auto& [k, v] : state.slots)
    if (q.find(v) == std::string::npos)
      q += " " + v;
  return q;
}

std::string full_question(const flow_state& state) {
  std::string q = state.question;
  std::string details;
  for (auto& [k, v] : state.slots)
    details += (details.empty() ? "" : ", ") + k + ": " + v;
  return details.empty() ? q : q + " (" + details + ")";
}

completion_request evaluate_request(std::string_view question, std::string_view query,
                                    const std::vector<retrieval_item>& docs) {
  return json_request(
      "workflow_evaluate",
      "You judge whether search results are enough to answer a user's question. Reply with "
      "JSON only: {\"is_sufficient\": true|false, \"suggestion\": \"pass\"|\"retry_same\"|"
      "\"switch_source\", \"rewritten_query\": \"a better search query when retrying\"}.",
      "Question: " + std::string{question} + "\nSearch query: " + std::string{query}
          + "\nResults:\n" + docs_text(docs));
}

evaluation parse_evaluation(std::string_view reply) {
  evaluation e;
  auto p = llm::parse_structured(reply, {{"is_sufficient", llm::field_type::boolean},
                                         {"suggestion", llm::field_type::string, false},
                                         {"rewritten_query", llm::field_type::string, false}});
  auto* f = std::get_if<llm::parsed_fields>(&p);
  if (!f)
    return e;
  e.parsed = true;
  e.sufficient = f->bools.at("is_sufficient");
  e.suggestion = f->string_or("suggestion", e.sufficient ? "pass" : "retry_same");
  if (e.suggestion != "pass" && e.suggestion != "retry_same" && e.suggestion != "switch_source")
    e.suggestion = e.sufficient ? "pass" : "retry_same";
  e.rewritten_query = utf8_prefix(f->string_or("rewritten_query"), 500);
  return e;
}

completion_request verify_request(std::string_view question,
                                  const std::vector<retrieval_item>& docs) {
  return json_request("workflow_verify",
                      "You check the quality of evidence before an answer is written: do these "
                      "documents contain what is needed to answer the question correctly? Reply "
                      "with JSON only: {\"answers\": true|false, \"reason\": \"one sentence\"}.",
                      "Question: " + std::string{question} + "\nDocuments:\n" + docs_text(docs));
}

verdict parse_verdict(std::string_view reply) {
  verdict v;
  auto p = llm::parse_structured(
      reply, {{"answers", llm::field_type::boolean}, {"reason", llm::field_type::string, false}});
  auto* f = std::get_if<llm::parsed_fields>(&p);
  if (!f)
    return v;
  v.parsed = true;
  v.answers = f->bools.at("answers");
  v.reason = utf8_prefix(f->string_or("reason"), 300);
  return v;
}

std::string chitchat_instructions(const workflow_def& def) {
  std::string s = "You are a friendly customer-service assistant";
  if (!def.business.empty())
    s += " for " + def.business;
  s += ". The user is making small talk. Reply briefly and kindly, then steer the conversation "
       "back to what you can help with:";
  for (auto& in : def.intents)
    s += "\n- " + in.description;
  return s;
}

std::string escalation_text(std::string_view reason) {
  return "I could not resolve this reliably, so I am passing your request to a human colleague "
         "who will follow up. Reason: "
         + std::string{reason};
}

std::vector<retrieval_item> tool_evidence(std::string_view tool, std::string_view body) {
  std::vector<retrieval_item> items;
  simdjson::dom::parser parser;
  element root;
  auto make = [&](std::string id, std::string title, std::string text) {
    retrieval_item it;
    it.result_id = "tool:" + std::string{tool} + ":" + id;
    it.granularity = "tool";
    it.evidence = std::move(text);
    it.source = "tool:" + std::string{tool};
    it.source_type = "tool";
    it.doc_id = it.result_id;
    it.title = std::move(title);
    it.score = 1.0 / static_cast<double>(items.size() + 1);
    items.push_back(std::move(it));
  };
  simdjson::dom::array results;
  if (parser.parse(simdjson::padded_string{body}).get(root) == simdjson::SUCCESS
      && root["results"].get_array().get(results) == simdjson::SUCCESS) {
    for (auto r : results) {
      std::string_view id, title, text;
      if (r["text"].get_string().get(text) != simdjson::SUCCESS || text.empty())
        continue;
      if (r["id"].get_string().get(id) != simdjson::SUCCESS)
        id = {};
      if (r["title"].get_string().get(title) != simdjson::SUCCESS)
        title = {};
      make(id.empty() ? std::to_string(items.size() + 1) : std::string{id}, std::string{title},
           utf8_prefix(text, 4000));
      if (items.size() >= 10)
        break;
    }
    return items;
  }
  if (!body.empty())
    make("1", std::string{tool}, utf8_prefix(body, 4000));
  return items;
}

}  // namespace ragtor::wf
