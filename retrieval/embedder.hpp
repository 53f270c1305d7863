// Text -> vectors for the vector leg of retrieval (DESIGN §6).
//
// The offline default is the hashed n-gram embedder: weight-free and
// deterministic, but LEXICAL, not semantic — it maps stemmed words, CJK
// unigrams/bigrams and character trigrams of words into a fixed number of
// signed hash buckets, so texts sharing words or word pieces are close and
// paraphrases with different words are not. It complements BM25 (typos,
// morphology, partial words) rather than replacing a neural embedder;
// configure an OpenAI-compatible /v1/embeddings model for semantic search.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace ragtor {

using embedding_batch = std::vector<std::vector<float>>;

// What an embedder's similarity means, which decides how its leg is fused
// with BM25 (fusion.hpp, choose_fusion): a lexical one finds what BM25
// finds, only worse, so BM25 leads; a semantic one finds paraphrases BM25
// cannot.
enum class embedder_kind { lexical, semantic };

class embedder {
public:
  virtual ~embedder() = default;
  // Identifies model and dimensions; stored with index snapshots.
  virtual std::string name() const = 0;
  virtual size_t dims() const = 0;
  // Models behind /v1/embeddings are semantic; the hashed embedder is not.
  virtual embedder_kind kind() const { return embedder_kind::semantic; }
  // Blocking. One L2-normalised vector per text, in order; an error message
  // on failure.
  virtual std::variant<embedding_batch, std::string> embed(
      const std::vector<std::string>& texts) = 0;
  // True when embed() waits on the network: code on actor threads must use
  // embed_async then (a blocked scheduler thread stalls unrelated actors).
  virtual bool remote() const { return false; }
  // The same result without blocking the caller when remote(): `done` runs
  // exactly once, on another thread (the HTTP client's), and must only hand
  // the result over (e.g. send it as a message). Local embedders compute
  // inline and call `done` before returning. Sent as one request: meant
  // for a query's text, not for ingest batches.
  virtual void embed_async(std::vector<std::string> texts,
                           std::function<void(std::variant<embedding_batch, std::string>)> done) {
    done(embed(texts));
  }
};

std::shared_ptr<embedder> make_hashed_embedder(size_t dims = 256);

}  // namespace ragtor
