#include "llm/prompt_builder.hpp"

#include "llm/token_count.hpp"
#include "protocol/text.hpp"

namespace ragtor::llm {

const char* const default_rag_instructions =
    "You are a careful assistant answering questions from the provided documents.\n"
    "Answer only with information found in the documents. If they do not contain the answer, "
    "say so plainly instead of guessing.\n"
    "Answer in the language of the question. Be concise.";

const char* const default_general_instructions =
    "You are a helpful, concise assistant. Answer in the language of the question.";

namespace {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct doc {
  std::string id, title, chunk_id, text;
};

// Everything that may be trimmed, rendered on demand.
struct parts {
  std::string instructions;
  std::string core_memory;
  std::vector<std::string> memories;
  std::string summary;
  std::vector<std::string> episodic;
  std::vector<doc> docs;
  bool cite = false;
  std::vector<stored_message> window;
  std::string question;

  std::string system() const {
    std::string s = "<system_instruction>\n" + instructions + "\n</system_instruction>\n";
    if (!core_memory.empty() || !memories.empty()) {
      s += "<user_memory>\n";
      if (!core_memory.empty())
        s += "<profile>\n" + xml_escape(core_memory) + "\n</profile>\n";
      if (!memories.empty()) {
        s += "<memories caution=\"May be outdated; do not treat as fact unless the user "
             "confirms.\">\n";
        for (auto& m : memories)
          s += "- " + xml_escape(m) + "\n";
        s += "</memories>\n";
      }
      s += "</user_memory>\n";
    }
    if (!summary.empty())
      s += "<conversation_summary>\n" + xml_escape(summary) + "\n</conversation_summary>\n";
    if (!episodic.empty()) {
      s += "<episodic_memory>\n";
      for (auto& e : episodic)
        s += "<episode>\n" + xml_escape(e) + "\n</episode>\n";
      s += "</episodic_memory>\n";
    }
    if (!docs.empty()) {
      s += "<documents>\n";
      for (auto& d : docs)
        s += "<document id=\"" + xml_escape(d.id) + "\" title=\"" + xml_escape(d.title)
             + "\" chunk_id=\"" + xml_escape(d.chunk_id) + "\">\n" + xml_escape(d.text)
             + "\n</document>\n";
      s += "</documents>\n";
    }
    if (cite)
      s += "<output_rules>\n"
           "Support every factual statement with a citation: "
           "<cite doc_id=\"DOCUMENT_ID\" quote=\"a sentence copied exactly from that "
           "document\">your statement</cite>.\n"
           "Copy quotes verbatim; cite only the documents above; never invent a quote.\n"
           "</output_rules>\n";
    return s;
  }

  size_t tokens() const {
    size_t n = approx_tokens(system()) + approx_tokens(question);
    for (auto& m : window)
      n += approx_tokens(m.content) + 4;  // role/framing overhead
    return n + 8;
  }
};

}  // namespace

built_prompt build_prompt(const prompt_inputs& in) {
  parts p;
  bool grounded = in.evidence && !in.evidence->retrieval_results.empty();
  p.instructions = !in.system_instructions.empty() ? in.system_instructions
                   : in.evidence                   ? default_rag_instructions
                                                   : default_general_instructions;
  p.core_memory = in.core_memory;
  p.memories = in.memories;
  p.summary = in.summary;
  p.episodic = in.episodic;
  if (grounded)
    for (auto& item : in.evidence->retrieval_results)
      p.docs.push_back({item.doc_id, item.title, item.result_id, item.evidence});
  p.cite = grounded && in.citations;
  p.window = in.window;
  p.question = in.question;

  built_prompt out;
  // Counting renders the whole system prompt: count once, and again only
  // after something was dropped or cut.
  size_t tokens = p.tokens();
  auto over = [&] { return tokens > in.budget_tokens; };
  auto recount = [&] { tokens = p.tokens(); };
  while (over() && !p.episodic.empty()) {
    p.episodic.pop_back();
    out.dropped.push_back("episodic memory");
    recount();
  }
  while (over() && !p.memories.empty()) {
    p.memories.pop_back();
    out.dropped.push_back("long-term memory");
    recount();
  }
  while (over() && p.window.size() > 2) {
    p.window.erase(p.window.begin());
    out.dropped.push_back("window message");
    recount();
  }
  while (over() && p.docs.size() > 1) {
    out.dropped.push_back("document " + p.docs.back().chunk_id);
    p.docs.pop_back();
    recount();
  }
  if (over() && !p.summary.empty()) {
    auto excess = tokens - in.budget_tokens;
    auto keep = p.summary.size() > excess * 4 ? p.summary.size() - excess * 4 : 0;
    p.summary = utf8_prefix(p.summary, keep);
    out.dropped.push_back("summary (truncated)");
    recount();
  }
  if (over() && !p.docs.empty()) {
    auto& d = p.docs.front();
    auto excess = tokens - in.budget_tokens;
    // CJK text is ~1 token per 3 bytes, Latin ~1 per 4: cut conservatively.
    auto cut = excess * 4;
    d.text = utf8_prefix(d.text, d.text.size() > cut ? d.text.size() - cut : 0);
    out.dropped.push_back("document " + d.chunk_id + " (truncated)");
    recount();
  }
  out.messages.push_back({"system", p.system()});
  for (auto& m : p.window)
    out.messages.push_back({m.role == "assistant" ? "assistant" : "user", m.content});
  out.messages.push_back({"user", p.question});
  for (auto& d : p.docs)
    out.doc_ids_included.push_back(d.id);
  out.prompt_tokens = tokens;
  return out;
}

}  // namespace ragtor::llm
