// The chunker: chunks are whole-sentence slices of the document with
// stable ids and offsets, within the size bound, paragraph-aware, and
// never cut inside a UTF-8 sequence.
#include <algorithm>
#include <cctype>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/token_count.hpp"
#include "retrieval/chunker.hpp"

using namespace ragtor;

namespace {

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool starts_on_code_point(std::string_view s) {
  return s.empty() || (static_cast<unsigned char>(s.front()) & 0xC0) != 0x80;
}

// Every chunk is the document text at its offset, ids count up, sizes fit.
void expect_well_formed(const document& d, const std::vector<chunk>& cs, size_t max_chars) {
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE("chunk " + std::to_string(i));
    EXPECT_EQ(cs[i].chunk_id, d.id + "#" + std::to_string(i));
    EXPECT_EQ(cs[i].doc_id, d.id);
    EXPECT_EQ(cs[i].title, d.title);
    EXPECT_FALSE(cs[i].text.empty());
    EXPECT_LE(code_points(cs[i].text), max_chars);
    ASSERT_LE(cs[i].offset + cs[i].text.size(), d.text.size());
    EXPECT_EQ(d.text.substr(cs[i].offset, cs[i].text.size()), cs[i].text);
    EXPECT_TRUE(starts_on_code_point(cs[i].text));
    EXPECT_TRUE(
        starts_on_code_point(std::string_view{d.text}.substr(cs[i].offset + cs[i].text.size())));
    EXPECT_EQ(cs[i].prompt_tokens, static_cast<int32_t>(approx_tokens_xml_escaped(cs[i].text)))
        << "counted once, as a prompt writes it";
    if (i > 0) {
      EXPECT_GT(cs[i].offset, cs[i - 1].offset) << "chunks move forward";
    }
  }
}

// Every non-space byte of the text is in some chunk.
void expect_covered(const document& d, const std::vector<chunk>& cs) {
  std::vector<bool> covered(d.text.size(), false);
  for (auto& c : cs)
    for (size_t i = 0; i < c.text.size(); ++i)
      covered[c.offset + i] = true;
  for (size_t i = 0; i < d.text.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(d.text[i]))) {
      ASSERT_TRUE(covered[i]) << "byte " << i << " of the text is in no chunk";
    }
}

}  // namespace

TEST(chunker, keeps_ids_offsets_and_the_size_bound_with_overlap) {
  document d{"doc", "T", "", "src"};
  for (int i = 0; i < 60; ++i)
    d.text += "Sentence number " + std::to_string(i) + " talks about retrieval. ";
  chunker_options opts{.max_chars = 200, .overlap_chars = 60};
  auto cs = chunk_document(d, opts);
  ASSERT_GT(cs.size(), 5u);
  expect_well_formed(d, cs, 200);
  expect_covered(d, cs);
  for (size_t i = 1; i < cs.size(); ++i) {
    // One paragraph: each chunk repeats the tail of the one before.
    EXPECT_LT(cs[i].offset, cs[i - 1].offset + cs[i - 1].text.size());
    auto repeated = cs[i - 1].offset + cs[i - 1].text.size() - cs[i].offset;
    EXPECT_LE(repeated, 60u);
  }
  EXPECT_EQ(cs.back().offset + cs.back().text.size(), d.text.find_last_not_of(' ') + 1);
  // Whole sentences: every chunk starts a sentence and ends one.
  for (auto& c : cs) {
    EXPECT_EQ(c.text.rfind("Sentence", 0), 0u) << c.text;
    EXPECT_EQ(c.text.back(), '.') << c.text;
  }
}

TEST(chunker, short_document_is_one_chunk_and_empty_document_none) {
  document d{"a", "A", "Just one short paragraph.\n\nAnd another.", ""};
  auto cs = chunk_document(d, {});
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].text, d.text);
  EXPECT_EQ(cs[0].offset, 0u);
  EXPECT_EQ(cs[0].chunk_id, "a#0");
  EXPECT_TRUE(chunk_document({"e", "", "", ""}, {}).empty());
  EXPECT_TRUE(chunk_document({"w", "", " \n\n \t", ""}, {}).empty());
}

TEST(chunker, prefers_to_cut_at_paragraph_boundaries) {
  // Two paragraphs of ~120 characters each; a 200-character limit could
  // pack the first paragraph plus part of the second, but the cut belongs
  // between them, with no overlap across it.
  std::string p1 =
      "The first paragraph is about kettles. Kettles boil water. "
      "They whistle when the water is hot enough to make tea.";
  std::string p2 =
      "The second paragraph is about spoons. Spoons stir tea. "
      "Silver spoons tarnish unless they are polished now and then.";
  document d{"p", "P", p1 + "\n\n" + p2, ""};
  auto cs = chunk_document(d, {.max_chars = 200, .overlap_chars = 50});
  expect_well_formed(d, cs, 200);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].text, p1);
  EXPECT_EQ(cs[1].text, p2);
}

TEST(chunker, headings_stay_with_the_text_below_them) {
  std::string body(150, 'x');
  document d{"h", "H", "Intro sentence here.\n\n# Section\n\n" + body + ".", ""};
  auto cs = chunk_document(d, {.max_chars = 180, .overlap_chars = 0});
  expect_well_formed(d, cs, 180);
  for (auto& c : cs)
    EXPECT_FALSE(c.text.ends_with("# Section")) << "a heading ended a chunk";
}

TEST(chunker, overlong_cjk_sentences_split_on_code_points) {
  document d{"zh", "", "", ""};
  for (int i = 0; i < 100; ++i)
    d.text += "检索";
  auto cs = chunk_document(d, {.max_chars = 50, .overlap_chars = 0});
  expect_well_formed(d, cs, 50);
  expect_covered(d, cs);
  ASSERT_EQ(cs.size(), 4u);  // 200 characters, 50 per chunk
  for (auto& c : cs)
    EXPECT_EQ(c.text.size(), 150u) << "50 characters of 3 bytes each";
}

TEST(chunker, overlong_latin_sentences_split_between_words) {
  document d{"long", "", "", ""};
  for (int i = 0; i < 100; ++i)
    d.text += "word" + std::to_string(i) + " ";
  auto cs = chunk_document(d, {.max_chars = 64, .overlap_chars = 0});
  expect_well_formed(d, cs, 64);
  expect_covered(d, cs);
  for (auto& c : cs) {
    EXPECT_EQ(c.text.rfind("word", 0), 0u) << "cut inside a word: " << c.text;
    EXPECT_NE(c.text.back(), ' ');
  }
}

TEST(chunker, random_documents_are_chunked_well) {
  std::mt19937 rng{7};
  const std::vector<std::string> pieces = {"alpha", "beta", "检索",    "系统",    "émigré",
                                           "x",     ". ",   "。",      "! ",      "\n",
                                           "\n\n",  " ",    "- item ", "# Head\n"};
  std::uniform_int_distribution<size_t> pick{0, pieces.size() - 1};
  for (int round = 0; round < 200; ++round) {
    document d{"r" + std::to_string(round), "", "", ""};
    std::uniform_int_distribution<int> len{0, 400};
    for (int i = len(rng); i > 0; --i)
      d.text += pieces[pick(rng)];
    chunker_options opts{.max_chars = 20 + static_cast<size_t>(round % 7) * 30,
                         .overlap_chars = static_cast<size_t>(round % 5) * 15};
    auto cs = chunk_document(d, opts);
    SCOPED_TRACE("round " + std::to_string(round));
    expect_well_formed(d, cs, std::max<size_t>(opts.max_chars, 16));
    expect_covered(d, cs);
  }
}
