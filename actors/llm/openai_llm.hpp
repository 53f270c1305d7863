// The `llm` gateway for an OpenAI-compatible model (DESIGN §7): vLLM,
// llama.cpp server, or a hosted API. One actor per configured model. It
// builds the prompt (system rules, memory slots, <documents>, recent
// window, question, within a token budget), streams the completion through
// the HTTP client, strips <cite> tags from the text the user sees while
// collecting and verifying the citations, and enforces the model's
// concurrency limit: up to max_concurrency calls run, up to max_queue wait
// in order, more are refused at once as overloaded. Cancel closes the
// upstream connection immediately. Retries happen inside the client and
// only before the first token, so an answer is never silently duplicated.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

namespace llm {
class openai_client;
}

struct openai_llm_settings {
  std::string model;            // for logs and status
  size_t max_concurrency = 16;  // calls in flight to the model
  size_t max_queue = 64;        // calls waiting for a slot
  double temperature = 0.2;
  int32_t max_tokens = 1024;
  size_t prompt_budget_tokens = 6000;
  std::string system_instructions;  // "" = the built-in RAG instructions
};

llm_actor spawn_openai_llm(caf::actor_system& sys, std::shared_ptr<llm::openai_client> client,
                           openai_llm_settings settings);

}  // namespace ragtor
