// Reranking (seed 004's rerank node): a KB with enable_rerank has its fused
// results reordered by the model (listwise, the fake model scripts the
// ranking), keeps rerank_top_k, and falls back to the fused order when the
// model fails or answers nonsense — visible in the result's trace. With
// retrieval.rerank_base_url an OpenAI-compatible /rerank endpoint (the
// fake's /v1/rerank) reranks instead of the chat model.
#include <gtest/gtest.h>

#include "tests/support/fake_openai.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

std::string script(const std::string& rule) {
  return R"({"rules":[{"match":"^Question: ",)" + rule + "}]}";
}

class rerank_test : public ragtor_server_test {
protected:
  fake_openai fake_{script(R"("reply":"{\"ranking\": [4, 3, 2, 1]}")")};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_LLM__MAX_RETRIES"] = "0";
    return env;
  }

  json call(std::string_view method, const std::string& path, const std::string& body,
            int expected) {
    auto res = request(port(), method, path, body);
    EXPECT_EQ(res.status, expected) << method << " " << path << ": " << res.body;
    return json::parse(res.body.empty() ? "{}" : res.body);
  }

  void make_kb(const std::string& name, const std::string& extra) {
    call("POST", "/api/v1/kbs", R"({"name":")" + name + "\"" + extra + "}", 201);
    std::string docs = R"({"documents":[)";
    for (int i = 1; i <= 6; ++i)
      docs += std::string{i > 1 ? "," : ""} + R"({"id":"l)" + std::to_string(i)
              + R"(","text":"Lighthouse )" + std::string(static_cast<size_t>(7 - i), '!')
              + " number " + std::to_string(i) + " guards the lighthouse coast"
              + std::string(i, ' ') + R"( of harbour )" + std::to_string(i * 11) + R"(."})";
    docs += "]}";
    call("POST", "/api/v1/kbs/" + name + "/documents", docs, 200);
  }

  std::vector<std::string> doc_ids(const json& result) {
    std::vector<std::string> out;
    for (auto& item : result.items("/retrieval_results"))
      out.push_back(item.str("/metadata/doc_id"));
    return out;
  }

  std::string rerank_trace(const json& result) {
    for (auto& t : result.items("/trace"))
      if (t.str("/step") == "rerank")
        return t.str("/detail");
    return "";
  }

  json search(const std::string& kb) {
    return call("POST", "/api/v1/kbs/" + kb + "/search",
                R"({"query":"lighthouse coast","agent_type":"hybrid_agent","top_k":4})", 200);
  }
};

TEST_F(rerank_test, the_model_reorders_the_fused_results) {
  make_kb("plain", "");
  make_kb("ranked", R"(,"enable_rerank":true)");
  auto plain = doc_ids(search("plain"));
  ASSERT_EQ(plain.size(), 4u);
  EXPECT_EQ(rerank_trace(search("plain")), "") << "off by default";
  EXPECT_EQ(fake_.stat("chat_requests"), 0);

  auto ranked = search("ranked");
  EXPECT_EQ(doc_ids(ranked), (std::vector<std::string>{plain[3], plain[2], plain[1], plain[0]}));
  EXPECT_NE(rerank_trace(ranked).find("llm listwise"), std::string::npos) << ranked.dump();
  EXPECT_EQ(fake_.stat("chat_requests"), 1);
  auto sent = json::parse(fake_.stats().str("/last_chat_request")).items("/messages");
  EXPECT_NE(sent.back().str("/content").find("[1] "), std::string::npos);
  EXPECT_NE(sent.back().str("/content").find("Question: lighthouse coast"), std::string::npos);

  // rerank_top_k keeps fewer.
  make_kb("short", R"(,"enable_rerank":true,"rerank_top_k":2)");
  EXPECT_EQ(doc_ids(search("short")).size(), 2u);
  auto info = call("GET", "/api/v1/kbs/short", "", 200);
  EXPECT_TRUE(info.boolean("/settings/enable_rerank"));
  EXPECT_EQ(info.integer("/settings/rerank_top_k"), 2);
}

TEST_F(rerank_test, failures_keep_the_fused_order) {
  make_kb("plain", "");
  make_kb("ranked", R"(,"enable_rerank":true)");
  auto plain = doc_ids(search("plain"));
  fake_.set_script(script(R"("fault":"http_500")"));
  auto failed = search("ranked");
  EXPECT_EQ(doc_ids(failed), plain);
  EXPECT_NE(rerank_trace(failed).find("rerank failed"), std::string::npos) << failed.dump();
  fake_.set_script(script(R"("reply":"I would rather not rank these.")"));
  auto nonsense = search("ranked");
  EXPECT_EQ(doc_ids(nonsense), plain);
  EXPECT_NE(rerank_trace(nonsense).find("unusable"), std::string::npos) << nonsense.dump();
  // A chat turn over the KB still answers.
  auto r =
      chat_stream(port(), chat_body("ann", "s1", "Which lighthouse guards the coast?", "ranked"));
  EXPECT_TRUE(well_formed_stream(r));
}

TEST_F(rerank_test, the_pipeline_graph_names_the_model_as_reranker) {
  make_kb("ranked", R"(,"enable_rerank":true)");
  auto graph = call("GET", "/api/v1/kbs/ranked/pipeline", "", 200);
  for (auto& n : graph.items("/nodes"))
    if (n.str("/id") == "rerank") {
      EXPECT_TRUE(n.boolean("/enabled"));
      EXPECT_NE(n.str("/note").find("the model, listwise"), std::string::npos) << n.dump();
    }
}

// The same KBs with a rerank endpoint configured.
class rerank_endpoint_test : public rerank_test {
protected:
  env_vars server_env() const override {
    auto env = rerank_test::server_env();
    env["RAGTOR_RETRIEVAL__RERANK_BASE_URL"] = fake_.base_url();
    env["RAGTOR_RETRIEVAL__RERANK_MODEL"] = "fake-reranker";
    return env;
  }
};

TEST_F(rerank_endpoint_test, the_endpoint_reranks_instead_of_the_model) {
  make_kb("plain", "");
  make_kb("ranked", R"(,"enable_rerank":true)");
  // Every document has both query words; the boost lifts l5 to the top and
  // the others keep their fused order.
  fake_.set_script(R"({"rerank_boost":"number 5 "})");
  auto all = doc_ids(call("POST", "/api/v1/kbs/plain/search",
                          R"({"query":"lighthouse coast","agent_type":"hybrid_agent","top_k":6})",
                          200));
  ASSERT_EQ(all.size(), 6u);
  std::vector<std::string> expected{"l5"};
  for (auto& id : all)
    if (id != "l5" && expected.size() < 4)
      expected.push_back(id);
  auto ranked = search("ranked");
  EXPECT_EQ(doc_ids(ranked), expected) << ranked.dump();
  EXPECT_NE(rerank_trace(ranked).find("endpoint fake-reranker: 6 candidates"), std::string::npos)
      << ranked.dump();
  EXPECT_DOUBLE_EQ(ranked.items("/retrieval_results")[0].number("/score"), 2.0)
      << "the reranker's relevance score";
  EXPECT_EQ(fake_.stat("chat_requests"), 0) << "the chat model is not asked";
  EXPECT_EQ(fake_.stat("rerank_requests"), 1);
  auto sent = json::parse(fake_.stats().str("/last_rerank_request"));
  EXPECT_EQ(sent.str("/model"), "fake-reranker");
  EXPECT_EQ(sent.str("/query"), "lighthouse coast");
  EXPECT_EQ(sent.items("/documents").size(), 6u);

  auto graph = call("GET", "/api/v1/kbs/ranked/pipeline", "", 200);
  bool seen = false;
  for (auto& n : graph.items("/nodes"))
    if (n.str("/id") == "rerank") {
      seen = true;
      EXPECT_NE(n.str("/note").find("rerank endpoint (model fake-reranker)"), std::string::npos)
          << n.dump();
    }
  EXPECT_TRUE(seen);
}

TEST_F(rerank_endpoint_test, endpoint_failures_keep_the_fused_order) {
  make_kb("plain", "");
  make_kb("ranked", R"(,"enable_rerank":true)");
  auto plain = doc_ids(search("plain"));
  fake_.set_script(R"({"rerank_status":503})");
  auto failed = search("ranked");
  EXPECT_EQ(doc_ids(failed), plain);
  EXPECT_NE(rerank_trace(failed).find("rerank endpoint failed"), std::string::npos)
      << failed.dump();
  EXPECT_GE(fake_.stat("rerank_requests"), 1);
  EXPECT_EQ(fake_.stat("chat_requests"), 0) << "no fallback to the chat model";
  auto r =
      chat_stream(port(), chat_body("ann", "s1", "Which lighthouse guards the coast?", "ranked"));
  EXPECT_TRUE(well_formed_stream(r));
}

TEST_F(rerank_test, bad_rerank_settings_are_refused) {
  auto res = request(port(), "POST", "/api/v1/kbs", R"({"name":"x","rerank_top_k":500})");
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_NE(res.body.find("rerank_top_k"), std::string::npos);
  res = request(port(), "POST", "/api/v1/kbs", R"({"name":"x","enable_rerank":"yes"})");
  EXPECT_EQ(res.status, 400) << res.body;
}

}  // namespace
}  // namespace ragtor::test
