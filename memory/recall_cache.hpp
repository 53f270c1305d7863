// What the store tells recall's cache (memory/long_term.cpp) when it writes:
// kept out of long_term.hpp, which protocol/messages.hpp includes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ragtor {

// Remembers the vector of an episode being stored, so the user's next turn
// finds every recent episode's vector in memory and reads only their keys
// (the vector is what decoding the stored text gives back). Harmless if the
// write is rolled back: recall only looks up ids the store returns.
void remember_episode_embedding(const std::string& episode_id, const std::vector<float>& v);

// A memory's distinct terms, remembered by its content: each term's 64-bit
// hash, sorted (comparing integers, not strings; two terms sharing a hash
// is as good as impossible among the few words of a memory and question).
using term_list = std::vector<uint64_t>;
std::shared_ptr<const term_list> memory_terms(const std::string& content);

// Memory recall's ranking (recall_memories): the indexes of the `limit`
// items that share most distinct terms with the question, ties newest
// first.
struct term_item {
  const term_list* terms;
  int64_t created_at;
};
std::vector<size_t> rank_by_terms(std::string_view question, const std::vector<term_item>& items,
                                  size_t limit);

}  // namespace ragtor
