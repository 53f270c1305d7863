// The vector leg's embedder backed by an OpenAI-compatible /v1/embeddings
// endpoint (a real, semantic embedding model), batching texts. Blocking:
// used at ingestion (the kb_admin thread, the CLI) and by retrieval agents,
// which run detached on their own threads when this embedder is in use.
#pragma once

#include <memory>
#include <string>

#include "retrieval/embedder.hpp"

namespace ragtor {

namespace llm {
class openai_client;
}

// `client` is configured with the embedding model's base_url and model.
std::shared_ptr<embedder> make_openai_embedder(std::shared_ptr<llm::openai_client> client,
                                               size_t batch_size = 64);

}  // namespace ragtor
