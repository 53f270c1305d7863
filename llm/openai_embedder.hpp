// The vector leg's embedder backed by an OpenAI-compatible /v1/embeddings
// endpoint (a real, semantic embedding model), batching texts. embed()
// blocks: ingestion (the kb_admin thread, the CLI). Retrieval agents embed
// queries with embed_async, whose answer arrives on the HTTP client's
// thread, so they never block a scheduler thread.
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
