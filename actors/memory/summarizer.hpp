// The summarizer actor (one per node, DESIGN §8, seed 002 phase 1): after
// each completed turn it checks whether the conversation's summary is due
// (memory/summary.hpp has the rules) and refreshes it in the background —
// with the model (non-streaming completion) when one is configured, else
// with the extractive summary. Single-flight: one run per conversation on
// this node (a trigger meanwhile is remembered and re-checked afterwards),
// and across nodes the store's optimistic version check lets only one
// writer win. A failed run keeps the old summary and is counted.
#pragma once

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include "memory/summary.hpp"
#include "protocol/actors.hpp"

namespace ragtor {

struct summarizer_settings {
  summary_policy policy;
  bool use_model = false;  // false: extractive summaries (no model configured)
  caf::timespan timeout = std::chrono::seconds(120);  // one model call
  size_t max_input_tokens = 6000;                     // transcript shown to the model
  int32_t max_tokens = 400;                           // summary length cap
  bool enabled = true;
};

summarizer_actor spawn_summarizer(caf::actor_system& sys, store_actor store, llm_actor llm,
                                  summarizer_settings settings);

}  // namespace ragtor
