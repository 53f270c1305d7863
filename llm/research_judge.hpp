// Deep research's judge when a model is configured (DESIGN §6): after a
// retrieval round the model sees the question and the best evidence so far
// and answers, as JSON, whether the evidence answers the question and, if
// not, a better search query:
//   {"sufficient": false, "query": "kestrel wingspan"}
// An unusable reply — no JSON object, no boolean "sufficient", or
// "sufficient": false without a usable new query — is reported as such;
// the research agent then continues with pseudo-relevance feedback.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::llm {

// `queries`: the queries searched so far (the question first);
// `evidence`: the best passages so far, best first.
completion_request research_judge_request(std::string_view question,
                                          const std::vector<std::string>& queries,
                                          const std::vector<std::string>& evidence,
                                          size_t max_chars_per_passage = 500);

struct research_verdict {
  bool sufficient = false;
  std::string query;  // the next query; "" when sufficient
};

// nullopt when the reply is unusable (above). A "query" equal (ignoring
// case and surrounding space) to one already searched counts as unusable:
// searching it again cannot find anything new.
std::optional<research_verdict> parse_research_verdict(std::string_view reply,
                                                       const std::vector<std::string>& queries);

}  // namespace ragtor::llm
