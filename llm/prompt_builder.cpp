#include "llm/prompt_builder.hpp"

#include "protocol/text.hpp"
#include "protocol/token_count.hpp"

namespace ragtor::llm {

const char* const default_rag_instructions =
    "You are a careful assistant answering questions from the provided documents.\n"
    "Answer only with information found in the documents. If they do not contain the answer, "
    "say so plainly instead of guessing.\n"
    "Answer in the language of the question. Be concise.";

const char* const default_general_instructions =
    "You are a helpful, concise assistant. Answer in the language of the question.";

namespace {

// Appends the text with &, <, > and " as entities (xml_entity, whose
// characters the block skip below lists too). Documents are most of
// a prompt and seldom hold one: blocks without one are passed over
// (skip_plain_blocks), and the text between is appended as one run.
void append_xml_escaped(std::string& out, std::string_view s) {
  out.reserve(out.size() + s.size() + s.size() / 16);
  size_t from = 0;  // text since the last special character, appended as one run
  for (size_t i = 0; i < s.size(); ++i) {
    i = skip_plain_blocks<false, '&', '<', '>', '"'>(s, i);
    if (i >= s.size())
      break;
    const char* entity = xml_entity(s[i]);
    if (!entity)
      continue;
    out.append(s, from, i - from);
    out += entity;
    from = i + 1;
  }
  out.append(s, from);
}

std::string xml_escape(std::string_view s) {
  std::string out;
  append_xml_escaped(out, s);
  return out;
}

// A rendered part of the system prompt and its approx_tokens. Every part
// ends with a newline, so no word runs across two parts and (in valid
// UTF-8) no character does: the prompt's count is the sum of its parts'
// (llm_text_test checks it against counting the rendered prompt). Before,
// every step of the trimming below rendered and counted the whole prompt
// again.
struct part {
  std::string text;
  size_t tokens = 0;
};

part make_part(std::string text) {
  auto tokens = approx_tokens(text);
  return {std::move(text), tokens};
}

// The fixed lines around the sections.
struct frame {
  part user_memory_open = make_part("<user_memory>\n");
  part user_memory_close = make_part("</user_memory>\n");
  part memories_open = make_part(
      "<memories caution=\"May be outdated; do not treat as fact unless the user "
      "confirms.\">\n");
  part memories_close = make_part("</memories>\n");
  part episodes_open = make_part("<episodic_memory>\n");
  part episodes_close = make_part("</episodic_memory>\n");
  part documents_open = make_part("<documents>\n");
  part documents_close = make_part("</documents>\n");
  part output_rules = make_part(
      "<output_rules>\n"
      "Support every factual statement with a citation: "
      "<cite doc_id=\"DOCUMENT_ID\" quote=\"a sentence copied exactly from that "
      "document\">your statement</cite>.\n"
      "Copy quotes verbatim; cite only the documents above; never invent a quote.\n"
      "</output_rules>\n");
};

const frame& fixed() {
  static const frame f;
  return f;
}

part summary_part(std::string_view summary) {
  if (summary.empty())
    return {};
  return make_part("<conversation_summary>\n" + xml_escape(summary) + "\n</conversation_summary>\n");
}

// `text_tokens`: approx_tokens_xml_escaped(text) when known (the
// chunker's count of an item's whole evidence), else -1.
part document_part(const retrieval_item& d, std::string_view text, int32_t text_tokens = -1) {
  // One string, sized once: a turn renders five of these.
  static constexpr std::string_view close = "\n</document>\n";
  std::string s;
  s.reserve(64 + d.doc_id.size() + d.title.size() + d.result_id.size() + text.size()
            + text.size() / 16);
  s += "<document id=\"";
  append_xml_escaped(s, d.doc_id);
  s += "\" title=\"";
  append_xml_escaped(s, d.title);
  s += "\" chunk_id=\"";
  append_xml_escaped(s, d.result_id);
  s += "\">\n";
  // With the text's count known: the opening line ends and the closing one
  // starts with a newline, so the three counts add up to the part's.
  bool counted = text_tokens >= 0;
  size_t tokens =
      counted ? approx_tokens(s) + static_cast<size_t>(text_tokens) + approx_tokens(close) : 0;
  append_xml_escaped(s, text);
  s += close;
  if (!counted)
    return make_part(std::move(s));
  return {std::move(s), tokens};
}

// Every part that may be trimmed, rendered once; trimming drops parts (or
// renders the one it cuts again) and keeps the count by subtraction.
struct parts {
  part head;     // <system_instruction>
  part profile;  // <profile> (in <user_memory>)
  std::vector<part> memories;
  std::string summary;
  part summary_text;
  std::vector<part> episodes;
  std::vector<const retrieval_item*> docs;
  std::vector<part> doc_text;
  bool cite = false;
  size_t window_first = 0;  // window messages before it were dropped
  std::vector<size_t> window_tokens;
  size_t question_tokens = 0;

  // The tokens of a list between its opening and closing lines (none when
  // the list is empty: the section is left out).
  static size_t framed_tokens(const part& open, const std::vector<part>& items,
                              const part& close) {
    if (items.empty())
      return 0;
    size_t n = open.tokens + close.tokens;
    for (auto& p : items)
      n += p.tokens;
    return n;
  }

  size_t system_tokens() const {
    auto& f = fixed();
    size_t n = head.tokens + summary_text.tokens;
    if (!profile.text.empty() || !memories.empty())
      n += f.user_memory_open.tokens + profile.tokens + f.user_memory_close.tokens;
    n += framed_tokens(f.memories_open, memories, f.memories_close);
    n += framed_tokens(f.episodes_open, episodes, f.episodes_close);
    n += framed_tokens(f.documents_open, doc_text, f.documents_close);
    if (cite)
      n += f.output_rules.tokens;
    return n;
  }

  size_t tokens() const {
    size_t n = system_tokens() + question_tokens;
    for (size_t i = window_first; i < window_tokens.size(); ++i)
      n += window_tokens[i] + 4;  // role/framing overhead
    return n + 8;
  }

  std::string system() const {
    auto& f = fixed();
    std::string s;
    s.reserve(system_tokens() * 4 + 64);
    auto add = [&](const part& p) { s += p.text; };
    auto add_framed = [&](const part& open, const std::vector<part>& items, const part& close) {
      if (items.empty())
        return;
      add(open);
      for (auto& p : items)
        add(p);
      add(close);
    };
    add(head);
    if (!profile.text.empty() || !memories.empty()) {
      add(f.user_memory_open);
      add(profile);
      add_framed(f.memories_open, memories, f.memories_close);
      add(f.user_memory_close);
    }
    add(summary_text);
    add_framed(f.episodes_open, episodes, f.episodes_close);
    add_framed(f.documents_open, doc_text, f.documents_close);
    if (cite)
      add(f.output_rules);
    return s;
  }
};

}  // namespace

built_prompt build_prompt(const prompt_inputs& in) {
  parts p;
  bool grounded = in.evidence && !in.evidence->retrieval_results.empty();
  const std::string& instructions = !in.system_instructions.empty() ? in.system_instructions
                                    : in.evidence ? std::string{default_rag_instructions}
                                                  : std::string{default_general_instructions};
  p.head = make_part("<system_instruction>\n" + instructions + "\n</system_instruction>\n");
  if (!in.core_memory.empty())
    p.profile = make_part("<profile>\n" + xml_escape(in.core_memory) + "\n</profile>\n");
  for (auto& m : in.memories)
    p.memories.push_back(make_part("- " + xml_escape(m) + "\n"));
  p.summary = in.summary;
  p.summary_text = summary_part(p.summary);
  for (auto& e : in.episodic)
    p.episodes.push_back(make_part("<episode>\n" + xml_escape(e) + "\n</episode>\n"));
  if (grounded)
    for (auto& item : in.evidence->retrieval_results) {
      p.docs.push_back(&item);
      p.doc_text.push_back(document_part(item, item.evidence, item.evidence_tokens));
    }
  p.cite = grounded && in.citations;
  for (auto& m : in.window)
    p.window_tokens.push_back(approx_tokens(m.content));
  p.question_tokens = approx_tokens(in.question);

  built_prompt out;
  size_t tokens = p.tokens();
  auto over = [&] { return tokens > in.budget_tokens; };
  auto recount = [&] { tokens = p.tokens(); };
  while (over() && !p.episodes.empty()) {
    p.episodes.pop_back();
    out.dropped.push_back("episodic memory");
    recount();
  }
  while (over() && !p.memories.empty()) {
    p.memories.pop_back();
    out.dropped.push_back("long-term memory");
    recount();
  }
  while (over() && p.window_tokens.size() - p.window_first > 2) {
    ++p.window_first;
    out.dropped.push_back("window message");
    recount();
  }
  while (over() && p.docs.size() > 1) {
    out.dropped.push_back("document " + p.docs.back()->result_id);
    p.docs.pop_back();
    p.doc_text.pop_back();
    recount();
  }
  if (over() && !p.summary.empty()) {
    auto excess = tokens - in.budget_tokens;
    auto keep = p.summary.size() > excess * 4 ? p.summary.size() - excess * 4 : 0;
    p.summary = utf8_prefix(p.summary, keep);
    p.summary_text = summary_part(p.summary);
    out.dropped.push_back("summary (truncated)");
    recount();
  }
  if (over() && !p.docs.empty()) {
    auto& d = *p.docs.front();
    auto excess = tokens - in.budget_tokens;
    // CJK text is ~1 token per 3 bytes, Latin ~1 per 4: cut conservatively.
    auto cut = excess * 4;
    p.doc_text.front() = document_part(
        d, utf8_prefix(d.evidence, d.evidence.size() > cut ? d.evidence.size() - cut : 0));
    out.dropped.push_back("document " + d.result_id + " (truncated)");
    recount();
  }
  out.messages.reserve(2 + in.window.size() - p.window_first);
  out.messages.push_back({"system", p.system()});
  for (size_t i = p.window_first; i < in.window.size(); ++i) {
    auto& m = in.window[i];
    out.messages.push_back({m.role == "assistant" ? "assistant" : "user", m.content});
  }
  out.messages.push_back({"user", in.question});
  for (auto* d : p.docs)
    out.doc_ids_included.push_back(d->doc_id);
  out.prompt_tokens = tokens;
  return out;
}

void build_request_prompt(generation_request& req, size_t budget_tokens,
                          const std::string& instructions) {
  prompt_inputs in;
  in.system_instructions = req.instructions.empty() ? instructions : std::move(req.instructions);
  in.evidence = req.general ? nullptr : &req.evidence;
  in.window = std::move(req.history);
  in.core_memory = std::move(req.core_memory);
  in.memories = std::move(req.memories);
  in.episodic = std::move(req.episodic);
  in.summary = std::move(req.summary);
  in.question = req.question;
  in.budget_tokens = budget_tokens;
  in.citations = !req.general && req.cite;
  auto built = build_prompt(in);
  req.prompt = std::move(built.messages);
  req.prompt_tokens = static_cast<int32_t>(built.prompt_tokens);
  req.history = {};
  req.core_memory.clear();
  req.memories = {};
  req.episodic = {};
  req.summary.clear();
  req.instructions.clear();
}

chat_params request_chat_params(generation_request& req, double temperature,
                                int32_t max_tokens) {
  chat_params params;
  params.messages = std::move(req.prompt);
  req.prompt = {};
  params.temperature = req.temperature >= 0 ? req.temperature : temperature;
  params.max_tokens = req.max_tokens > 0 ? req.max_tokens : max_tokens;
  return params;
}

}  // namespace ragtor::llm
