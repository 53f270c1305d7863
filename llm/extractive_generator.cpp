#include "llm/extractive_generator.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

struct candidate {
  size_t item;      // evidence rank
  size_t position;  // sentence index within the item
  std::string_view sentence;
  double score = 0;
};

size_t utf8_len(unsigned char lead) {
  if (lead < 0x80)
    return 1;
  if ((lead >> 5) == 0x6)
    return 2;
  if ((lead >> 4) == 0xE)
    return 3;
  if ((lead >> 3) == 0x1E)
    return 4;
  return 1;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// A sentence worth quoting, or an empty view: Markdown list, quote and
// numbering markers are cut off the front (the rest is still verbatim
// evidence); headings, table rows and code fences are not statements.
std::string_view quotable(std::string_view s) {
  if (s.starts_with('#') || s.starts_with('|') || s.starts_with("```"))
    return {};
  for (;;) {
    size_t marker = 0;
    if (s.starts_with("- ") || s.starts_with("* ") || s.starts_with("+ ") || s.starts_with("> "))
      marker = 2;
    else if (s.starts_with('>'))
      marker = 1;
    else {
      size_t digits = 0;
      while (digits < s.size() && digits < 3 && s[digits] >= '0' && s[digits] <= '9')
        ++digits;
      if (digits > 0 && digits + 1 < s.size() && (s[digits] == '.' || s[digits] == ')')
          && s[digits + 1] == ' ')
        marker = digits + 2;
    }
    if (marker == 0)
      return s;
    s.remove_prefix(marker);
    while (!s.empty() && is_space(s.front()))
      s.remove_prefix(1);
  }
}

// Sentences scoring below this fraction of the best one are left out: a
// sentence sharing one common word with the question is noise next to one
// that answers it.
constexpr double relative_cut = 0.4;

extractive_answer with_tokens(std::string text) {
  extractive_answer a;
  a.tokens = split_tokens(text);
  a.text = std::move(text);
  return a;
}

}  // namespace

std::vector<std::string> split_tokens(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    auto lead = static_cast<unsigned char>(text[i]);
    if (utf8_len(lead) == 3 && lead >= 0xE3 && lead <= 0xE9) {
      // CJK run: two code points per token.
      for (int n = 0; n < 2 && i < text.size(); ++n) {
        auto l = static_cast<unsigned char>(text[i]);
        if (!(utf8_len(l) == 3 && l >= 0xE3 && l <= 0xE9))
          break;
        i += std::min(utf8_len(l), text.size() - i);
      }
    } else {
      while (i < text.size() && !is_space(text[i])) {
        auto l = static_cast<unsigned char>(text[i]);
        if (i > start && utf8_len(l) == 3 && l >= 0xE3 && l <= 0xE9)
          break;
        i += std::min(utf8_len(l), text.size() - i);
      }
    }
    while (i < text.size() && is_space(text[i]))
      ++i;
    if (i == start)
      ++i;  // defensive: always progress
    out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

extractive_answer extractive_answer_for(std::string_view question, const retrieval_result& evidence,
                                        const extractive_options& opts) {
  auto q = tokenize(question);
  std::set<std::string> qterms(q.begin(), q.end());
  std::vector<candidate> cands;
  std::vector<std::set<std::string>> cand_terms;
  auto& items = evidence.retrieval_results;
  for (size_t i = 0; i < items.size(); ++i) {
    auto sentences = split_sentences(items[i].evidence);
    for (size_t j = 0; j < sentences.size(); ++j) {
      auto sentence = quotable(sentences[j]);
      if (sentence.empty())
        continue;
      auto toks = tokenize(sentence);
      cands.push_back({i, j, sentence, 0});
      cand_terms.emplace_back(toks.begin(), toks.end());
    }
  }
  // Rarer question terms (in fewer evidence sentences) weigh more.
  std::map<std::string, size_t> df;
  for (auto& terms : cand_terms)
    for (auto& t : terms)
      if (qterms.count(t))
        ++df[t];
  // Questions often echo a document's title ("What is ragtor?" and the
  // document "What is ragtor"), a signal the stopword-free terms lose; so
  // matching sentences get a bonus for how much the question and their
  // title overlap, stopwords included.
  std::vector<double> title_bonus(items.size(), 0.0);
  {
    tokenizer_options all_words{.stem = true, .drop_stopwords = false};
    auto qa = tokenize(question, all_words);
    std::set<std::string> qall(qa.begin(), qa.end());
    for (size_t i = 0; i < items.size(); ++i) {
      auto ta = tokenize(items[i].title, all_words);
      std::set<std::string> tall(ta.begin(), ta.end());
      size_t common = 0;
      for (auto& t : tall)
        common += qall.count(t);
      auto all = qall.size() + tall.size() - common;
      title_bonus[i] =
          all == 0 ? 0.0 : 0.5 * static_cast<double>(common) / static_cast<double>(all);
    }
  }
  for (size_t c = 0; c < cands.size(); ++c) {
    double s = 0;
    for (auto& t : cand_terms[c])
      if (qterms.count(t))
        s += 1.0 / std::log(2.0 + static_cast<double>(df[t]));
    if (s > 0) {
      s += title_bonus[cands[c].item];
      s += 0.05 / (1.0 + static_cast<double>(cands[c].item));  // prefer better-ranked evidence
    }
    cands[c].score = s;
  }
  std::vector<size_t> order(cands.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cands[a].score > cands[b].score; });
  std::vector<size_t> picked;
  std::set<std::string_view> seen;  // by content: overlapping chunks repeat sentences
  double best = order.empty() ? 0.0 : cands[order.front()].score;
  for (auto c : order) {
    if (picked.size() >= opts.max_sentences || cands[c].score <= 0
        || cands[c].score < relative_cut * best)
      break;
    if (seen.insert(cands[c].sentence).second)
      picked.push_back(c);
  }
  if (picked.empty())
    return with_tokens("I could not find anything about that in the knowledge base.");
  // One number per document, in order of the document's best-ranked
  // evidence; sentences grouped by document, then in text order, so the
  // answer reads [1] [1] [2] rather than jumping between sources.
  std::map<std::string_view, size_t> doc_rank;  // doc_id -> best evidence rank
  for (auto c : picked) {
    auto [it, fresh] = doc_rank.emplace(items[cands[c].item].doc_id, cands[c].item);
    it->second = std::min(it->second, cands[c].item);
  }
  auto key = [&](size_t c) {
    return std::tuple{doc_rank[items[cands[c].item].doc_id], cands[c].item, cands[c].position};
  };
  std::sort(picked.begin(), picked.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  extractive_answer a;
  std::string body = "According to the knowledge base:";
  std::map<std::string_view, size_t> number_of_doc;
  std::string sources;
  for (auto c : picked) {
    auto& item = items[cands[c].item];
    auto [it, fresh] = number_of_doc.emplace(item.doc_id, number_of_doc.size() + 1);
    auto n = std::to_string(it->second);
    body += ' ';
    body += cands[c].sentence;
    if (!opts.cite)
      continue;
    body += " [" + n + "]";
    if (fresh) {
      sources += sources.empty() ? "" : "; ";
      sources += "[" + n + "] " + (item.title.empty() ? item.doc_id : item.title) + " ("
                 + item.doc_id + ")";
    }
    a.citations.push_back(
        {item.doc_id, item.result_id, item.title, std::string{cands[c].sentence}, true});
  }
  auto text = opts.cite ? body + "\n\nSources: " + sources : body;
  a.tokens = split_tokens(text);
  a.text = std::move(text);
  return a;
}

extractive_answer general_reply_without_model() {
  return with_tokens(
      "No language model is configured, so I can only answer questions from a knowledge base. "
      "Name one with \"kb_prefix\" in your request, for example \"demo\".");
}

}  // namespace ragtor
