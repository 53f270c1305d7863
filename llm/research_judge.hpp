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
#include "retrieval/agents.hpp"

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

// What the research does next after a verdict (apply_research_verdict).
enum class research_next {
  ask_again,  // the model's query was searched as a new round; ask again
  done,       // sufficient, or no rounds left
  fell_back,  // the reply was unusable: the remaining rounds ran with RM3
};

// Applies the model's `reply` to `st` (queries: searched so far, the
// question first; the new query is appended): sufficient ends the research,
// a new query is searched as the next round, an unusable reply hands the
// remaining rounds to RM3. Each outcome leaves a "judge" step in the trace
// (judge_ms: how long the model took). A caller whose model call failed
// uses research_fall_back.
research_next apply_research_verdict(const kb_snapshot& snap, research_state& st,
                                     std::vector<std::string>& queries, std::string_view reply,
                                     double judge_ms);

// The model could not be asked (`why`): the remaining rounds run with RM3.
void research_fall_back(const kb_snapshot& snap, research_state& st, const std::string& why,
                        double judge_ms);

}  // namespace ragtor::llm
