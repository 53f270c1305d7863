#include "pipeline/tool_agent.hpp"

#include <algorithm>
#include <cctype>

#include <simdjson.h>

#include "llm/structured_output.hpp"
#include "protocol/text.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::agent {

bool is_tool(std::string_view name) {
  for (auto t : tool_names)
    if (t == name)
      return true;
  return false;
}

namespace {

void function(json_writer& w, std::string_view name, std::string_view description,
              std::string_view arg, std::string_view arg_description) {
  w.begin_object().field("type", "function");
  w.key("function").begin_object().field("name", name).field("description", description);
  w.key("parameters").begin_object().field("type", "object");
  w.key("properties").begin_object();
  w.key(arg).begin_object().field("type", "string").field("description", arg_description).end_object();
  w.end_object();
  w.key("required").begin_array().value(arg).end_array();
  w.end_object();  // parameters
  w.end_object();  // function
  w.end_object();
}

std::string make_tools_json() {
  json_writer w;
  w.begin_array();
  function(w, "vector_retrieve",
           "Search the knowledge base. Results are added to the evidence the answer is written "
           "from.",
           "query", "what to search for");
  function(w, "rerank", "Reorder the evidence collected so far, most relevant first.", "query",
           "the question the evidence should answer");
  function(w, "grade", "Drop evidence that does not help answer the question.", "query",
           "the question the evidence should answer");
  function(w, "query_rewrite",
           "Rewrite a question that depends on the conversation into a standalone search query.",
           "question", "the question to rewrite");
  function(w, "memory_retrieve",
           "Recall what is remembered about the user and their past conversations.", "query",
           "what to recall");
  w.end_array();
  return w.take();
}

}  // namespace

const std::string& tools_json() {
  static const std::string json = make_tools_json();
  return json;
}

std::string system_prompt(std::string_view kb_description, int32_t max_tool_calls) {
  std::string s =
      "You are a retrieval agent. Gather the evidence needed to answer the user's question "
      "with the tools; another step writes the answer from the evidence you collect.";
  if (!kb_description.empty())
    s += " The knowledge base covers: " + std::string{kb_description} + ".";
  s += "\nUse vector_retrieve to search (use query_rewrite first when the question refers to "
       "the conversation), grade or rerank when results look mixed, memory_retrieve when the "
       "user's own history matters. You may make at most "
       + std::to_string(max_tool_calls)
       + " tool calls. When the evidence suffices, or the question needs none, reply with the "
         "single word READY and call no tool.";
  return s;
}

std::optional<std::string> argument_of(std::string_view tool, std::string_view arguments_json) {
  auto key = tool == "query_rewrite" ? "question" : "query";
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(simdjson::padded_string{arguments_json}).get(root) != simdjson::SUCCESS)
    return std::nullopt;
  std::string_view s;
  if (root[key].get_string().get(s) != simdjson::SUCCESS)
    return std::nullopt;
  std::string out{s};
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back())))
    out.pop_back();
  if (out.empty())
    return std::nullopt;
  return utf8_prefix(out, 1000);
}

bool fast_path(std::string_view question) {
  std::string q;
  for (char c : question)
    if (!std::ispunct(static_cast<unsigned char>(c)) || (static_cast<unsigned char>(c) & 0x80))
      q += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!q.empty() && std::isspace(static_cast<unsigned char>(q.back())))
    q.pop_back();
  size_t start = 0;
  while (start < q.size() && std::isspace(static_cast<unsigned char>(q[start])))
    ++start;
  q = q.substr(start);
  static const std::vector<std::string> small_talk = {
      "hi",       "hello",     "hey",      "thanks",     "thank you", "thank you very much",
      "ok",       "okay",      "bye",      "goodbye",    "good morning", "good evening",
      "hi there", "hello there", "great",  "cool",       "你好",      "谢谢",
      "再见",     "好的"};
  for (auto& s : small_talk)
    if (q == s)
      return true;
  return false;
}

completion_request grade_request(std::string_view query, const std::vector<retrieval_item>& docs) {
  completion_request req;
  req.purpose = "agent_grade";
  req.max_tokens = 100;
  req.temperature = 0;
  std::string passages;
  for (size_t i = 0; i < docs.size(); ++i)
    passages += "[" + std::to_string(i + 1) + "] " + utf8_prefix(docs[i].evidence, 500) + "\n";
  req.messages.push_back(
      {"system",
       "You grade passages for relevance to a question. Reply with JSON only: "
       "{\"relevant\": [numbers of the passages that help answer it]}."});
  req.messages.push_back({"user", "Question: " + std::string{query} + "\nPassages:\n" + passages});
  return req;
}

std::optional<std::vector<size_t>> parse_grade_reply(std::string_view reply, size_t n) {
  auto obj = llm::extract_json_object(reply);
  if (!obj)
    return std::nullopt;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::array arr;
  if (parser.parse(simdjson::padded_string{*obj}).get(root) != simdjson::SUCCESS
      || root["relevant"].get_array().get(arr) != simdjson::SUCCESS)
    return std::nullopt;
  std::vector<size_t> out;
  for (auto v : arr) {
    int64_t i = 0;
    std::string_view s;
    if (v.get_int64().get(i) != simdjson::SUCCESS) {
      if (v.get_string().get(s) != simdjson::SUCCESS || s.empty() || s.size() > 6
          || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        continue;
      i = std::stoll(std::string{s});
    }
    if (i >= 1 && static_cast<size_t>(i) <= n
        && std::find(out.begin(), out.end(), static_cast<size_t>(i - 1)) == out.end())
      out.push_back(static_cast<size_t>(i - 1));
  }
  return out;
}

std::string evidence_summary(const std::vector<retrieval_item>& docs, size_t max_docs) {
  if (docs.empty())
    return "The evidence is empty.";
  std::string s = std::to_string(docs.size()) + " passages in the evidence:\n";
  for (size_t i = 0; i < docs.size() && i < max_docs; ++i)
    s += "[" + std::to_string(i + 1) + "] (" + docs[i].doc_id + ") "
         + utf8_prefix(docs[i].evidence, 200) + "\n";
  return s;
}

}  // namespace ragtor::agent
