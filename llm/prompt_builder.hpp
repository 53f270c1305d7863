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

// The built-in instructions for answers grounded in documents, and for
// general chat.
extern const char* const default_rag_instructions;
extern const char* const default_general_instructions;

}  // namespace ragtor::llm
