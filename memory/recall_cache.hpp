// What the store tells recall's cache (memory/long_term.cpp) when it writes:
// kept out of long_term.hpp, which protocol/messages.hpp includes.
#pragma once

#include <string>
#include <vector>

namespace ragtor {

// Remembers the vector of an episode being stored, so the user's next turn
// finds every recent episode's vector in memory and reads only their keys
// (the vector is what decoding the stored text gives back). Harmless if the
// write is rolled back: recall only looks up ids the store returns.
void remember_episode_embedding(const std::string& episode_id, const std::vector<float>& v);

}  // namespace ragtor
