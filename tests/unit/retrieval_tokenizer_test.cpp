// The tokenizer (terms for BM25 and for the extractive generator's overlap
// score) and the sentence splitter (chunk boundaries and quoted sentences).
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "retrieval/tokenizer.hpp"

using namespace ragtor;

namespace {

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::vector<std::string> sentences(std::string_view text) {
  auto views = split_sentences(text);
  return {views.begin(), views.end()};
}

}  // namespace

TEST(tokenizer, english_words_are_stemmed) {
  auto t = tokenize("Running runners indexed quickly");
  EXPECT_EQ(t, (std::vector<std::string>{"run", "runner", "index", "quick"}));
  EXPECT_EQ(tokenize("running"), std::vector<std::string>{"run"});
}

// Stems come from a per-thread memo of the words stemmed last: whatever
// order the words come in, and after the memo filled up and was cleared,
// every word gets the stem the stemmer gives it (each thread below starts
// with an empty memo).
TEST(tokenizer, stems_are_the_same_whatever_the_memo_holds) {
  std::vector<std::string> words;
  const char* roots[] = {"run", "connect", "index", "general", "happy", "nation", "argu"};
  const char* endings[] = {"", "s", "ing", "ed", "er", "ers", "ion", "ions", "ly", "ness"};
  for (int n = 0; n < 400; ++n)
    for (auto r : roots)
      for (auto e : endings)
        if (words.size() < 3000)
          words.push_back(std::string{r} + e + (n ? "x" + std::to_string(n) : ""));
  auto stems_of = [&](bool reversed) {
    std::vector<std::string> out(words.size());
    std::thread t{[&] {
      for (size_t k = 0; k < words.size(); ++k) {
        auto i = reversed ? words.size() - 1 - k : k;
        auto t = tokenize(words[i]);
        out[i] = t.empty() ? "" : t[0];
      }
      // Past the memo's bound, it was cleared at least once meanwhile.
      EXPECT_EQ(tokenize("running connections"), (std::vector<std::string>{"run", "connect"}));
    }};
    t.join();
    return out;
  };
  auto forward = stems_of(false), backward = stems_of(true);
  EXPECT_EQ(forward, backward);
  for (auto [word, stem] : {std::pair{"connections", "connect"}, {"indexed", "index"},
                            {"generally", "general"}, {"nations", "nation"}}) {
    auto at = static_cast<size_t>(std::find(words.begin(), words.end(), word) - words.begin());
    ASSERT_LT(at, words.size()) << word;
    EXPECT_EQ(forward[at], stem) << word;
  }
}

TEST(tokenizer, stopwords_are_dropped_unless_asked_to_keep_them) {
  auto t = tokenize("What is the architecture of this system?");
  EXPECT_EQ(t, (std::vector<std::string>{"architectur", "system"}));
  EXPECT_EQ(tokenize("The Running", {false, false}), (std::vector<std::string>{"the", "running"}));
  EXPECT_EQ(tokenize("The Running", {.stem = true, .drop_stopwords = false}),
            (std::vector<std::string>{"the", "run"}));
  EXPECT_TRUE(tokenize("it is what it is").empty());
}

TEST(tokenizer, case_folding_and_width_normalisation) {
  EXPECT_EQ(tokenize("BM25 Index", {false, false}), (std::vector<std::string>{"bm25", "index"}));
  // Full-width Latin letters and digits fold to ASCII under NFKC.
  EXPECT_EQ(tokenize("ＡＢＣ１２３", {false, false}), std::vector<std::string>{"abc123"});
  EXPECT_EQ(tokenize("Straße", {false, false}), std::vector<std::string>{"strasse"});
}

TEST(tokenizer, apostrophes_stay_inside_words) {
  EXPECT_EQ(tokenize("ragtor's design"), (std::vector<std::string>{"ragtor", "design"}));
  EXPECT_EQ(tokenize("ragtor\u2019s design"), (std::vector<std::string>{"ragtor", "design"}));
  EXPECT_TRUE(tokenize("don't").empty());  // a stopword as a whole
  EXPECT_EQ(tokenize("'quoted'", {false, false}), std::vector<std::string>{"quoted"});
}

// ASCII text takes a path of its own, without utf8proc. Appending " é"
// sends the same text down the Unicode path (it is no longer ASCII), whose
// terms must be the ASCII path's plus "é": checked on every printable and
// control character next to letters, digits and apostrophes, and on
// random texts over an alphabet dense in the cases that differ.
TEST(tokenizer, ascii_text_gets_the_terms_the_unicode_path_gives) {
  auto same = [](const std::string& text, const tokenizer_options& opts) {
    auto ascii = tokenize(text, opts);
    auto unicode = tokenize(text + " \xC3\xA9", opts);
    ascii.push_back("\xC3\xA9");
    EXPECT_EQ(ascii, unicode) << "text: \"" << text << "\"";
  };
  const tokenizer_options all[] = {{}, {false, false}, {true, false}, {false, true}};
  for (auto& opts : all) {
    for (int c = 0; c < 128; ++c) {
      std::string ch(1, static_cast<char>(c));
      same("Don" + ch + "t RUN" + ch + "ning 42" + ch + "x " + ch + "'" + ch + "quoted" + ch, opts);
    }
    same("", opts);
    same("'", opts);
    same("it's 'its' ragtor's O'Neil rock'n'roll ' x' y '", opts);
  }
  const std::string alphabet = "aZk9' _-.\t\n\x01\x7f";
  uint32_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    size_t n = 1 + i % 40;
    for (size_t j = 0; j < n; ++j) {
      seed = seed * 1664525u + 1013904223u;
      text += alphabet[(seed >> 16) % alphabet.size()];
    }
    same(text, all[i % 4]);
  }
}

TEST(tokenizer, chinese_gives_unigrams_and_bigrams) {
  auto t = tokenize("中文检索");
  EXPECT_EQ(t, (std::vector<std::string>{"中", "文", "中文", "检", "文检", "索", "检索"}));
}

TEST(tokenizer, mixed_chinese_and_english) {
  auto t = tokenize("用CAF写actors，检索系统");
  EXPECT_EQ(t, (std::vector<std::string>{"用", "caf", "写", "actor", "检", "索", "检索", "系",
                                         "索系", "统", "系统"}));
  EXPECT_FALSE(contains(t, "用写")) << "no bigram across a Latin word";
  EXPECT_FALSE(contains(t, "写检")) << "no bigram across punctuation";
}

TEST(tokenizer, kana_and_hangul_are_cjk_but_kana_punctuation_is_not) {
  auto ja = tokenize("カタ・かな");
  EXPECT_EQ(ja, (std::vector<std::string>{"カ", "タ", "カタ", "か", "な", "かな"}));
  auto ko = tokenize("한국어");
  EXPECT_EQ(ko, (std::vector<std::string>{"한", "국", "한국", "어", "국어"}));
}

TEST(tokenizer, emoji_and_punctuation_are_dropped) {
  auto t = tokenize("ship it 🚀🎉 -- (now)! 中🎉文");
  EXPECT_EQ(t, (std::vector<std::string>{"ship", "now", "中", "文"}));
  EXPECT_TRUE(tokenize("🎉 … !!! ---").empty());
}

TEST(tokenizer, invalid_utf8_yields_nothing) {
  EXPECT_TRUE(tokenize("abc \xFF\xFE def").empty());
  EXPECT_TRUE(tokenize("").empty());
}

TEST(tokenizer, tokenizing_is_thread_safe) {
  // One stemmer per thread: concurrent use must give the same terms.
  std::vector<std::vector<std::string>> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      for (int n = 0; n < 200; ++n)
        results[i] = tokenize("connections connected connecting generously");
    });
  for (auto& t : threads)
    t.join();
  for (auto& r : results)
    EXPECT_EQ(r, (std::vector<std::string>{"connect", "connect", "connect", "generous"}));
}

TEST(sentences, split_on_latin_and_cjk_punctuation) {
  EXPECT_EQ(sentences("First one. Second!  Third?\n第一句。第二句！第三句？第四句；end"),
            (std::vector<std::string>{"First one.", "Second!", "Third?", "第一句。", "第二句！",
                                      "第三句？", "第四句；", "end"}));
}

TEST(sentences, views_point_into_the_text_and_are_trimmed) {
  std::string text = "  Leading space.   Trailing space.  \n\n  ";
  auto views = split_sentences(text);
  ASSERT_EQ(views.size(), 2u);
  for (auto v : views) {
    EXPECT_GE(v.data(), text.data());
    EXPECT_LE(v.data() + v.size(), text.data() + text.size());
    EXPECT_NE(v.front(), ' ');
    EXPECT_NE(v.back(), ' ');
  }
  EXPECT_EQ(views[0], "Leading space.");
  EXPECT_TRUE(split_sentences("   \n\n ").empty());
}

TEST(sentences, closing_quotes_and_brackets_stay_with_their_sentence) {
  EXPECT_EQ(sentences("He said \"stop.\" Then (it stopped.) Done"),
            (std::vector<std::string>{"He said \"stop.\"", "Then (it stopped.)", "Done"}));
  EXPECT_EQ(sentences("他说「好。」然后走了。"),
            (std::vector<std::string>{"他说「好。」", "然后走了。"}));
}

TEST(sentences, abbreviations_decimals_and_initials_do_not_end_sentences) {
  EXPECT_EQ(sentences("Use a KB, e.g. the demo one. Version 1.5 is out. Ask J. Smith now."),
            (std::vector<std::string>{"Use a KB, e.g. the demo one.", "Version 1.5 is out.",
                                      "Ask J. Smith now."}));
}

TEST(sentences, paragraphs_headings_and_lists_split_but_wrapped_lines_do_not) {
  EXPECT_EQ(sentences("# Title\nA sentence that is\nwrapped here. Next one\n\nNew paragraph\n"
                      "- item one\n- item two\n1. first"),
            (std::vector<std::string>{"# Title", "A sentence that is\nwrapped here.", "Next one",
                                      "New paragraph", "- item one", "- item two", "1. first"}));
  // Inline code at the start of a wrapped line continues the sentence.
  EXPECT_EQ(sentences("Ids look like\n`doc#0`. Done."),
            (std::vector<std::string>{"Ids look like\n`doc#0`.", "Done."}));
}
