// Citations in model answers (seed 001, DESIGN §7). The model is asked to
// cite as <cite doc_id="…" quote="exact sentence">claim</cite>. While the
// answer streams, the parser removes the tags from the text the user sees
// (keeping the claim), also when a tag is split across deltas at any byte,
// and collects every citation. Each quote is checked against the text of
// the cited document (case- and whitespace-insensitive, typographic quotes
// folded); a citation that names an unknown document or quotes text the
// document does not contain is kept but flagged verified = false, so it is
// never shown as fact.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::llm {

// A document the prompt gave the model (one per retrieved chunk).
struct citation_source {
  std::string doc_id;
  std::string chunk_id;
  std::string title;
  std::string text;
};

class citation_stream_parser {
public:
  explicit citation_stream_parser(std::vector<citation_source> sources);

  // The visible part of this delta (possibly empty: text that might start
  // a tag is held back until it is decided).
  std::string feed(std::string_view delta);
  // Flushes what is held back; an unfinished tag is shown as text.
  std::string finish();

  // Every citation seen so far, in order.
  const std::vector<citation>& citations() const { return citations_; }

private:
  std::string drain(bool final);
  void add_citation(std::string_view tag);

  std::vector<citation_source> sources_;
  std::vector<citation> citations_;
  std::string pending_;
};

// Whether `quote` occurs in `document` up to case, whitespace runs and
// typographic quote characters. Quotes shorter than 8 characters after
// normalisation never match (too easy to find by chance).
bool quote_matches(std::string_view quote, std::string_view document);

// Decodes &quot; &amp; &lt; &gt; &apos; and numeric references.
std::string decode_xml_entities(std::string_view s);

}  // namespace ragtor::llm
