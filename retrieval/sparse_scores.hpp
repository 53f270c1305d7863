// Scores summed by dense index (a chunk's row) for one search, in an array
// the calling thread keeps: all zero between searches, and only the entries
// a search touched are reset after it. BM25's term-at-a-time scoring and
// the entity graph's local search sum into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ragtor {

class sparse_scores {
public:
  // The calling thread's accumulator, with room for indices below `size`.
  static sparse_scores& for_thread(size_t size) {
    thread_local sparse_scores s;
    if (s.scores_.size() < size) {
      s.scores_.resize(size, 0.0);
      s.seen_.resize(size, 0);
    }
    return s;
  }

  void add(uint32_t i, double score) {
    if (!seen_[i]) {
      seen_[i] = 1;
      touched_.push_back(i);
    }
    scores_[i] += score;
  }

  // The sum so far at `i` (0 when untouched).
  double at(uint32_t i) const { return scores_[i]; }

  // Calls f(index, sum) for each index touched, in the order first touched,
  // and resets them.
  template <class F>
  void drain(F&& f) {
    for (auto i : touched_) {
      f(i, scores_[i]);
      scores_[i] = 0.0;
      seen_[i] = 0;
    }
    touched_.clear();
  }

  // Resets the touched entries without reading them.
  void clear() {
    drain([](uint32_t, double) {});
  }

private:
  std::vector<double> scores_;
  std::vector<uint8_t> seen_;
  std::vector<uint32_t> touched_;
};

}  // namespace ragtor
