// The answer prompt (seed 001's XML mega-prompt, DESIGN §7): a system
// message with <system_instruction>, <user_memory>, <conversation_summary>,
// <episodic_memory>, <documents> and <output_rules> sections (empty ones
// left out), then the recent window as chat turns, then the question. A
// token budget (approx_tokens) trims the least useful material first:
// episodic recall, long-term memories, the oldest window messages (the
// last 2 stay), the lowest-ranked documents (1 stays), then the summary,
// finally the remaining document's text.
#pragma once

#include <string>
#include <vector>

#include "llm/openai_wire.hpp"
#include "protocol/chat_message.hpp"
#include "protocol/messages.hpp"

namespace ragtor::llm {

struct prompt_inputs {
  std::string system_instructions;             // "" = the built-in RAG instructions
  std::string core_memory;                     // the user's profile
  std::string summary;                         // the conversation summary
  std::vector<std::string> episodic;           // recalled past turns, best first
  std::vector<std::string> memories;           // long-term memories, best first
  const retrieval_result* evidence = nullptr;  // null = general chat
  std::vector<stored_message> window;          // recent messages, oldest first
  std::string question;
  size_t budget_tokens = 6000;
  bool citations = true;  // ask for <cite> tags (only with evidence)
};

struct built_prompt {
  std::vector<chat_message> messages;
  size_t prompt_tokens = 0;
  std::vector<std::string> doc_ids_included;  // in prompt order
  std::vector<std::string> dropped;           // what the budget removed
};

built_prompt build_prompt(const prompt_inputs& in);

// The prompt of a generation request (its `prompt` and `prompt_tokens`),
// built from its context, which moves into it and is left empty; the
// evidence stays, for the answer's citations. `instructions` stand for the
// request's when it names none ("" = the built-in ones).
void build_request_prompt(generation_request& req, size_t budget_tokens,
                          const std::string& instructions = {});

// The chat call of a request whose prompt is built: the prompt moves into
// it; temperature and max_tokens are the request's, else these defaults.
chat_params request_chat_params(generation_request& req, double temperature,
                                int32_t max_tokens);

// The built-in instructions for answers grounded in documents, and for
// general chat.
extern const char* const default_rag_instructions;
extern const char* const default_general_instructions;

}  // namespace ragtor::llm
