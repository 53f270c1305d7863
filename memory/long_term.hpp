// Long-term memories (mem0-style, DESIGN §8, seed 002): stated facts about
// the user extracted from their messages by rules — preferences, dislikes,
// constraints and identity, in English and Chinese — each with a lifetime
// by kind, recalled into later prompts under a caution header. Rules, not a
// model: cheap, predictable, and they never invent anything the user did
// not say.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/messages.hpp"

namespace ragtor {

struct extracted_memory {
  std::string kind;     // preference | dislike | constraint | identity
  std::string content;  // the user's own words, e.g. "I prefer green tea"
  int64_t ttl_days = 0;
};

std::vector<extracted_memory> extract_memories(std::string_view user_message);

// The `limit` memories most related to `question` (shared terms), more
// recent first on ties; `memories` are (content, created_at) pairs.
std::vector<std::string> recall_memories(
    std::string_view question, const std::vector<std::pair<std::string, int64_t>>& memories,
    size_t limit = 5);

// Episodic recall: the `limit` past turns most similar to `question`
// (cosine of hashed n-gram embeddings, at least `min_similarity`), best
// first, leaving out turns of the current conversation that are still in
// the recent window (seq >= window_start_seq).
std::vector<std::string> recall_episodes(std::string_view question,
                                         const std::vector<episode_record>& episodes,
                                         const std::string& conversation_id,
                                         int64_t window_start_seq, size_t limit = 3,
                                         double min_similarity = 0.25);

// The same ranking as indices into `episodes`: an episode's stored
// embedding is used when it has one of the recall dimensions, its text is
// embedded otherwise (episodes stored before embeddings were kept).
std::vector<size_t> rank_episodes(std::string_view question,
                                  const std::vector<episode_record>& episodes,
                                  const std::string& conversation_id, int64_t window_start_seq,
                                  size_t limit = 3, double min_similarity = 0.25);

// The same ranking over vectors given directly (null: not a candidate),
// as indices into `vectors`; `q` is the question's episode_embedding.
std::vector<size_t> rank_vectors(const std::vector<float>& q,
                                 const std::vector<const std::vector<float>*>& vectors,
                                 size_t limit, double min_similarity);

// The embedding episodic recall compares (hashed n-grams, L2-normalised),
// kept with each episode when it is stored.
std::vector<float> episode_embedding(std::string_view text);

// An embedding as stored text (base64 of little-endian float32) and back;
// decoding malformed text gives an empty vector.
std::string encode_embedding(const std::vector<float>& v);
std::vector<float> decode_embedding(std::string_view text);

// decode_embedding for an episode's stored vector, remembered by the
// episode's id (episodes never change) so recall decodes each once.
std::vector<float> stored_episode_embedding(const std::string& episode_id,
                                            std::string_view text);

// The vector stored_episode_embedding remembers for `episode_id`, if any.
std::shared_ptr<const std::vector<float>> remembered_episode_embedding(
    const std::string& episode_id);

// Bytes recall may keep between turns: memories' term lists and episodes'
// decoded embeddings (`[memory] recall_cache_mb`; 0 keeps nothing).
void set_recall_cache_budget(size_t bytes);

// The text an episode keeps of a turn (bounded, cut at a UTF-8 boundary).
std::string episode_text(std::string_view question, std::string_view answer);

}  // namespace ragtor
