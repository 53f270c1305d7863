// The tool-calling agent (seed 001) as plain functions: the tools it
// offers the model (OpenAI tools format), argument parsing, the grade
// tool's prompt and parser, the fast path, and how tool results are shown
// to the model. The loop itself is actors/pipeline/tool_agent.
//
//   tools: vector_retrieve(query)  search this KB; results join the evidence
//          rerank(query)           reorder the evidence with the model
//          grade(query)            drop evidence the model judges irrelevant
//          query_rewrite(question) a standalone search query
//          memory_retrieve(query)  the user's recalled memories and past turns
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor::agent {

inline constexpr std::string_view tool_names[] = {"vector_retrieve", "rerank", "grade",
                                                  "query_rewrite", "memory_retrieve"};

bool is_tool(std::string_view name);

// The tools as an OpenAI "tools" JSON array.
const std::string& tools_json();

// The agent's system prompt: what it is for, when to use which tool, and
// that it answers "READY" (no tool call) once the evidence suffices.
std::string system_prompt(std::string_view kb_description, int32_t max_tool_calls);

// The one string argument a tool takes ("query", or "question" for
// query_rewrite) from the model's raw arguments JSON; nullopt when the
// arguments are not a JSON object with that non-empty string.
std::optional<std::string> argument_of(std::string_view tool, std::string_view arguments_json);

// Greetings, thanks and other short small talk: answered directly, without
// the agent loop (seed 001's fast path for simple queries).
bool fast_path(std::string_view question);

// grade: {"relevant": [passage numbers]}.
completion_request grade_request(std::string_view query, const std::vector<retrieval_item>& docs);
// Indexes (0-based) of the relevant passages; nullopt when unusable.
std::optional<std::vector<size_t>> parse_grade_reply(std::string_view reply, size_t n);

// What the model sees of the evidence after a tool ran: numbered passages
// with their document ids and the first words of each.
std::string evidence_summary(const std::vector<retrieval_item>& docs, size_t max_docs = 8);

}  // namespace ragtor::agent
