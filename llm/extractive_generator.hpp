// The extractive generator (DESIGN §7), ragtor's offline default: it picks
// the evidence sentences that best match the question, quotes them verbatim
// with numbered citations, and splits the answer into tokens for streaming.
// It never invents text, so every citation is verified by construction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor {

struct extractive_options {
  size_t max_sentences = 3;
  bool cite = true;  // [n] markers, a Sources line and citations; off: plain sentences
};

struct extractive_answer {
  std::string text;
  std::vector<citation> citations;
  std::vector<std::string> tokens;  // concatenation == text
};

// Scores every evidence sentence by the question terms it shares (rarer
// terms weigh more, better-ranked evidence a little more), keeps up to
// max_sentences distinct ones with a positive score not far below the
// best, orders them as they appear in the evidence, and writes
//   "According to the knowledge base: <sentence> [1] <sentence> [2]\n\n"
//   "Sources: [1] <title> (<doc_id>); [2] ..."
// with one number per document. Each citation quotes its sentence
// exactly as it appears in that item's evidence. Without a matching
// sentence the answer says so and has no citations.
extractive_answer extractive_answer_for(std::string_view question, const retrieval_result& evidence,
                                        const extractive_options& opts);

// The answer for general (no knowledge base) turns without a model.
extractive_answer general_reply_without_model();


// Word-sized streaming pieces (a word plus its trailing whitespace; CJK runs
// every two code points); their concatenation equals `text`.
std::vector<std::string> split_tokens(std::string_view text);

}  // namespace ragtor
