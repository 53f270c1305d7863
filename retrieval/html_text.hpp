// HTML documents -> plain text for ingestion. Not a browser: it drops
// comments, <script>, <style>, <head> (except the <title>) and <template>,
// turns block elements (p, div, li, headings, table rows, br, ...) into
// line breaks (paragraph breaks for p/headings, so the chunker sees the
// structure), decodes character references (named basics, &#N; and &#xH;)
// and collapses runs of spaces. Invalid references are kept as text.
#pragma once

#include <string>
#include <string_view>

namespace ragtor {

struct html_text {
  std::string title;  // <title>, else the first <h1>, else ""
  std::string text;
};

html_text html_to_text(std::string_view html);

// Decodes &amp; &lt; &gt; &quot; &apos; &nbsp; &#N; &#xH; (a few more
// named ones common in prose); anything else is left as is.
std::string decode_html_entities(std::string_view s);

}  // namespace ragtor
