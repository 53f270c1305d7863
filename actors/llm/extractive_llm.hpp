// The `llm` gateway backed by the built-in extractive generator (DESIGN §7):
// the offline default when no OpenAI-compatible model is configured. It
// streams the answer's tokens to the requester, optionally paced so that a
// human can watch the answer arrive.
#pragma once

#include <chrono>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

struct extractive_llm_settings {
  size_t max_sentences = 3;
  std::chrono::milliseconds pace{0};  // pause between tokens; 0 = all at once
};

llm_actor spawn_extractive_llm(caf::actor_system& sys, extractive_llm_settings settings);

}  // namespace ragtor
