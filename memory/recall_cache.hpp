// What the store tells recall's cache (memory/long_term.cpp) when it writes:
// kept out of long_term.hpp, which protocol/messages.hpp includes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ragtor {

// Remembers the vector of an episode being stored, so the user's next turn
// finds every recent episode's vector in memory and reads only their keys
// (the vector is what decoding the stored text gives back). Harmless if the
// write is rolled back: recall only looks up ids the store returns.
void remember_episode_embedding(const std::string& episode_id, const std::vector<float>& v);

// Remembers the text of an episode being stored (episodes never change),
// so the episodes a turn recalls are mostly not read again by id; the
// text remembered for `episode_id`, if any. Rolled-back writes are
// harmless for the same reason as above.
void remember_episode_text(const std::string& episode_id, std::string_view text);
std::shared_ptr<const std::string> remembered_episode_text(const std::string& episode_id);

// A memory's distinct terms, remembered by its content: each term's 64-bit
// hash, sorted (comparing integers, not strings; two terms sharing a hash
// is as good as impossible among the few words of a memory and question).
using term_list = std::vector<uint64_t>;
std::shared_ptr<const term_list> memory_terms(const std::string& content);

// Memories' term lists kept together for ranking (issue 20, target 5):
// every item's sorted term hashes in one run, in item order, with its time.
// A user's held memories (persistence/recall_index.cpp) keep one per
// version: ranking 200 memories whose lists lay apart on the heap missed
// the cache a few times per memory once other turns had evicted them.
class term_columns {
public:
  void add(const term_list& terms, int64_t created_at);
  // Item i of `other`, added as add() would have added it.
  void add_from(const term_columns& other, size_t i);
  size_t size() const { return ends_.size(); }
  size_t bytes() const;
  // Item i's terms: [begin(i), end(i)).
  const uint64_t* begin(size_t i) const { return terms_.data() + (i == 0 ? 0 : ends_[i - 1]); }
  const uint64_t* end(size_t i) const { return terms_.data() + ends_[i]; }
  int64_t created_at(size_t i) const { return created_[i]; }

private:
  std::vector<uint64_t> terms_;
  std::vector<uint32_t> ends_;  // where each item's terms end in terms_
  std::vector<int64_t> created_;
};

// Memory recall's ranking (recall_memories): the indexes of the `limit`
// items that share most distinct terms with the question, ties newest
// first, then in item order.
std::vector<size_t> rank_by_terms(std::string_view question, const term_columns& items,
                                  size_t limit);

// Stored vectors kept by dimension (issue 20, target 5): column d holds
// dimension d of every slot, so ranking a question reads one contiguous
// run of floats per dimension the question sets, where a vector per row
// read a scattered line of each row per dimension. A user's held episodes
// (persistence/recall_index.cpp) share one: a turn that adds rows claims
// free slots at the end, so versions of the rows share the columns;
// filled slots never change. Safe for one writer per claimed slot and any
// number of readers of slots written before they were published.
class vector_columns {
public:
  static constexpr uint32_t left_out = UINT32_MAX;  // rank_columns: not a candidate

  vector_columns(size_t dims, size_t capacity);
  size_t dims() const { return dims_; }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return sizeof *this + dims_ * capacity_ * sizeof(float); }
  // The first of `n` free slots, now the caller's (another caller gets
  // others); nullopt when fewer than `n` are left.
  std::optional<uint32_t> claim(size_t n);
  // Writes `v` into a claimed slot: its first dims() values, zeros past
  // its end.
  void put(uint32_t slot, const std::vector<float>& v);
  // Fills claimed slots from slots of `from`: `to_slots[i]` gets
  // `from_slots[i]` (compacting a full one into a new one).
  void copy(const vector_columns& from, const std::vector<uint32_t>& from_slots,
            const std::vector<uint32_t>& to_slots);
  const float* column(size_t d) const { return data_.get() + d * capacity_; }

private:
  size_t dims_, capacity_;
  std::atomic<size_t> used_{0};
  std::unique_ptr<float[]> data_;
};

// rank_vectors (memory/long_term.hpp) over the vectors in `columns`:
// candidate i is at slots[i] (left_out: not a candidate); indices into
// `slots`, best first, ties in order. Each dot product is the plain loop's
// sum in order in double, as rank_vectors' sparse path computes it.
std::vector<size_t> rank_columns(const std::vector<float>& q, const vector_columns& columns,
                                 const std::vector<uint32_t>& slots, size_t limit,
                                 double min_similarity);

}  // namespace ragtor
