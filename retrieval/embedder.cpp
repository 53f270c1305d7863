#include "retrieval/embedder.hpp"

#include <cmath>
#include <cstdint>
#include <unordered_map>

#include "retrieval/binary_io.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

using binary::fnv1a;

class hashed_embedder final : public embedder {
public:
  explicit hashed_embedder(size_t dims) : dims_(dims) {}

  std::string name() const override { return "hashed-ngram-v1/" + std::to_string(dims_); }
  size_t dims() const override { return dims_; }
  embedder_kind kind() const override { return embedder_kind::lexical; }

  std::variant<embedding_batch, std::string> embed(const std::vector<std::string>& texts) override {
    embedding_batch out;
    out.reserve(texts.size());
    for (auto& t : texts)
      out.push_back(embed_one(t));
    return out;
  }

private:
  void add(std::vector<float>& v, std::string_view feature, float weight) const {
    auto h = fnv1a(feature);
    v[h % dims_] += (h >> 63) ? -weight : weight;
  }

  std::vector<float> embed_one(std::string_view text) const {
    std::vector<float> v(dims_, 0.f);
    std::unordered_map<std::string, int> tf;
    for (auto& term : tokenize(text))
      ++tf[term];
    for (auto& [term, n] : tf) {
      auto w = 1.f + std::log(static_cast<float>(n));
      add(v, term, 1.0f * w);
      // Character trigrams of Latin words (with boundary marks) make
      // morphological variants and typos overlap.
      if (static_cast<unsigned char>(term[0]) < 0x80 && term.size() > 3) {
        std::string padded = "<" + term + ">";
        for (size_t i = 0; i + 3 <= padded.size(); ++i)
          add(v, std::string_view{padded}.substr(i, 3), 0.35f * w);
      }
    }
    double norm = 0;
    for (float x : v)
      norm += static_cast<double>(x) * x;
    if (norm > 0) {
      auto inv = static_cast<float>(1.0 / std::sqrt(norm));
      for (auto& x : v)
        x *= inv;
    }
    return v;
  }

  size_t dims_;
};

}  // namespace

std::shared_ptr<embedder> make_hashed_embedder(size_t dims) {
  return std::make_shared<hashed_embedder>(dims == 0 ? 256 : dims);
}

}  // namespace ragtor
