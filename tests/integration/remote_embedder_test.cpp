// The vector leg with an OpenAI-compatible embedding model (the fake server's
// /v1/embeddings): the fixture KB and API-ingested documents are embedded in
// batches at ingestion, queries are embedded by retrieval agents (without
// blocking: the model's answer comes back as a message), and the server
// still shuts down cleanly. When the embedding model fails at query time, the vector-only
// agent's search fails (a chat turn then answers from no documents, with a
// "search failed" progress event), and hybrid search goes on with BM25.
#include <gtest/gtest.h>

#include "tests/support/chat_client.hpp"
#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

class remote_embedder_test : public ragtor_server_test {
protected:
  fake_openai fake_{R"({"embedding_dims":48})"};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_RETRIEVAL__EMBEDDER"] = "openai";
    env["RAGTOR_RETRIEVAL__EMBEDDING_MODEL"] = "fake-embedding";
    env["RAGTOR_RETRIEVAL__EMBEDDING_BATCH"] = "2";
    return env;
  }
};

TEST_F(remote_embedder_test, documents_and_queries_are_embedded_by_the_model) {
  auto at_start = fake_.stat("embedding_requests");
  EXPECT_GE(at_start, 3) << "6 fixture chunks in batches of 2 (+ a dimension probe)";
  auto created = request(port(), "POST", "/api/v1/kbs", R"({"name":"harbour"})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto ingest = request(port(), "POST", "/api/v1/kbs/harbour/documents",
                        R"({"documents":[{"id":"ships","text":"The schooner Marigold carries )"
                        R"(saffron from Port Quellin."}]})");
  ASSERT_EQ(ingest.status, 200) << ingest.body;
  auto before = fake_.stat("embedding_requests");
  EXPECT_GT(before, at_start);
  auto res = request(port(), "POST", "/api/v1/kbs/harbour/search",
                     R"({"query":"schooner saffron","agent_type":"naive_rag_agent"})");
  ASSERT_EQ(res.status, 200) << res.body;
  auto hits = json::parse(res.body);
  ASSERT_FALSE(hits.items("/retrieval_results").empty());
  EXPECT_EQ(hits.items("/retrieval_results")[0].str("/source"), "vector");
  EXPECT_NE(hits.items("/trace")[0].str("/detail").find("openai:fake-embedding/48"),
            std::string::npos)
      << hits.dump();
  EXPECT_EQ(fake_.stat("embedding_requests"), before + 1) << "the query was embedded";

  // Two more documents: only their 2 chunks are embedded (1 request in
  // batches of 2; re-embedding all 3 would take 2), then one more: 1
  // request for its chunk (all 4 would take 2).
  ASSERT_EQ(request(port(), "POST", "/api/v1/kbs/harbour/documents",
                    R"({"documents":[{"id":"tea","text":"Quellin tea is brewed with salt."},)"
                    R"({"id":"bells","text":"The harbour bell rings at noon."}]})")
                .status,
            200);
  auto after_three = fake_.stat("embedding_requests");
  EXPECT_EQ(after_three, before + 2) << "the query, then 1 request for the 2 new chunks";
  ASSERT_EQ(request(port(), "POST", "/api/v1/kbs/harbour/documents",
                    R"({"documents":[{"id":"gulls","text":"Gulls nest on the north pier."}]})")
                .status,
            200);
  EXPECT_EQ(fake_.stat("embedding_requests"), after_three + 1)
      << "one new chunk, one request (4 chunks re-embedded would take 2)";
  auto gulls = request(port(), "POST", "/api/v1/kbs/harbour/search",
                       R"({"query":"north pier gulls","agent_type":"naive_rag_agent","top_k":1})");
  EXPECT_EQ(json::parse(gulls.body).items("/retrieval_results")[0].str("/metadata/doc_id"),
            "gulls");
  EXPECT_TRUE(stop_server().clean());
  // A restart reuses the stored vectors instead of re-embedding every
  // chunk (at most one request: the model's dimension probe).
  auto stopped = fake_.stat("embedding_requests");
  start_server();
  EXPECT_LE(fake_.stat("embedding_requests"), stopped + 1);
  auto again = request(port(), "POST", "/api/v1/kbs/harbour/search",
                       R"({"query":"schooner saffron","agent_type":"naive_rag_agent"})");
  EXPECT_EQ(json::parse(again.body).items("/retrieval_results")[0].str("/source"), "vector");
}

TEST_F(remote_embedder_test, a_failing_embedding_model_fails_search_honestly) {
  ASSERT_EQ(request(port(), "POST", "/api/v1/kbs",
                    R"({"name":"harbour","default_agent_type":"naive_rag_agent"})")
                .status,
            201);
  ASSERT_EQ(request(port(), "POST", "/api/v1/kbs/harbour/documents",
                    R"({"documents":[{"id":"ships","text":"The schooner Marigold carries )"
                    R"(saffron from Port Quellin."}]})")
                .status,
            200);
  fake_.set_script(R"({"embedding_dims":48,"embedding_status":503})");
  auto naive = request(port(), "POST", "/api/v1/kbs/harbour/search",
                       R"({"query":"schooner saffron","agent_type":"naive_rag_agent"})");
  EXPECT_EQ(naive.status, 502) << naive.body;
  EXPECT_NE(naive.body.find("embedding model failed"), std::string::npos) << naive.body;

  auto hybrid = request(port(), "POST", "/api/v1/kbs/harbour/search",
                        R"({"query":"schooner saffron","agent_type":"hybrid_agent"})");
  ASSERT_EQ(hybrid.status, 200) << hybrid.body;
  auto hits = json::parse(hybrid.body);
  ASSERT_FALSE(hits.items("/retrieval_results").empty()) << "BM25 alone";
  EXPECT_EQ(hits.items("/retrieval_results")[0].str("/source"), "bm25");
  EXPECT_NE(hybrid.body.find("vector failed: embedding model failed"), std::string::npos)
      << hybrid.body;

  // A chat turn on the vector-only KB: the search fails, the turn answers
  // from no documents and says why in its progress and execution log.
  auto r = chat_stream(port(), chat_body("ann", "s1", "What does the schooner carry?", "harbour",
                                         {{"debug", "true", true}}));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_TRUE(r.errors.empty()) << "a search failure is not a turn failure";
  bool progress = false, degraded = false;
  for (auto& ev : r.events)
    if (ev.str("/status") == "progress" && ev.at("/content").is_string("/error")
        && ev.str("/content/error").find("search failed") != std::string::npos)
      progress = true;
  for (auto& log : r.execution_logs("retrieve")) {
    EXPECT_EQ(log.str("/input/worker_name"), "harbour:naive_rag_agent:retrieve_only")
        << "the KB's default_agent_type serves a request that names the KB";
    degraded = log.at("/output").has("/degraded")
               && log.str("/output/degraded").find("embedding model failed") != std::string::npos;
  }
  EXPECT_TRUE(progress);
  EXPECT_TRUE(degraded);
  auto prompt = fake_.stats().str("/last_chat_request");
  EXPECT_EQ(prompt.find("<documents>"), std::string::npos) << "no documents reach the model";
  EXPECT_EQ(prompt.find("Marigold carries"), std::string::npos);
}

}  // namespace
}  // namespace ragtor::test
