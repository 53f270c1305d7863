// HTML ingestion: structure becomes paragraph/line breaks, scripts and
// styles vanish, entities decode, the title comes from <title> or <h1>.
#include <gtest/gtest.h>

#include "retrieval/html_text.hpp"

namespace ragtor {
namespace {

TEST(html_text, keeps_text_and_structure_drops_markup) {
  auto r = html_to_text(R"(<!DOCTYPE html><html><head><title>Tea &amp; Salt</title>
<style>p { color: red }</style><script>var x = "<p>not text</p>";</script></head>
<body><h1>Brewing</h1><p>Quellin tea is   brewed
with <b>salt</b>.</p><!-- a comment --><ul><li>one</li><li>two</li></ul>
<p>5 &lt; 6 &#38; caf&#xE9; &nbsp;ok</p></body></html>)");
  EXPECT_EQ(r.title, "Tea & Salt");
  EXPECT_EQ(
      r.text,
      "Brewing\n\nQuellin tea is brewed with salt.\n\none\ntwo\n\n5 < 6 & caf\xC3\xA9 \xC2\xA0ok");
  EXPECT_EQ(r.text.find("not text"), std::string::npos);
  EXPECT_EQ(r.text.find("color"), std::string::npos);
}

TEST(html_text, title_falls_back_to_first_h1_and_bad_markup_survives) {
  auto r = html_to_text("<h1>Port <i>Quellin</i></h1><p>a < b and &bogus; stays</p><h1>Later</h1>");
  EXPECT_EQ(r.title, "Port Quellin");
  EXPECT_NE(r.text.find("a < b and &bogus; stays"), std::string::npos) << r.text;
  EXPECT_EQ(html_to_text("").text, "");
  EXPECT_EQ(html_to_text("<p>unclosed <b").text, "unclosed <b");
}

TEST(html_text, decodes_numeric_references_safely) {
  EXPECT_EQ(decode_html_entities("&#20013;&#x6587;"), "\xE4\xB8\xAD\xE6\x96\x87");
  EXPECT_EQ(decode_html_entities("&#0;"), "\xEF\xBF\xBD") << "NUL becomes U+FFFD";
  EXPECT_EQ(decode_html_entities("&#xD800;"), "\xEF\xBF\xBD") << "surrogates are not text";
  EXPECT_EQ(decode_html_entities("&#x;&amp"), "&#x;&amp");
}

}  // namespace
}  // namespace ragtor
