// The configurable answer pipeline (seed 004): each per-KB switch changes
// what a turn does — the rewrite node runs only when enabled, citations
// and sampling follow the KB, search_mode and min_confidence_score shape
// the results — and GET /api/v1/kbs/{kb}/pipeline exports the graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* rewrite_sys = "rewrite a user's latest question";

class pipeline_switch_test : public ragtor_server_test {
protected:
  fake_openai fake_{
      R"({"default":{"reply":"The K7 runs on four AA batteries [1]."},"rules":[)"
      R"({"system":"rewrite a user's latest question","reply":"Lumenlatch K7 battery life"}]})"};
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
    call("POST", "/api/v1/kbs/" + name + "/documents",
         R"({"documents":[{"id":"b1","text":"The Lumenlatch K7 runs on four AA batteries that last about fourteen months."},)"
         R"({"id":"b2","text":"The Lumenlatch K5 battery pack is charged over USB in two hours."},)"
         R"({"id":"b3","text":"Kettles boil water; the Lumenlatch has nothing to do with kettles."}]})",
         200);
  }

  stream_result turn(const std::string& kb, const std::string& session, const std::string& msg) {
    auto r = chat_stream(port(), chat_body("pia", session, msg, kb, {{"debug", "true", true}}));
    EXPECT_TRUE(well_formed_stream(r));
    return r;
  }

  static std::vector<std::string> nodes(const stream_result& r) { return r.executed_nodes(); }

  static json node(const stream_result& r, const std::string& name) {
    auto logs = r.execution_logs(name);
    if (!logs.empty())
      return logs.front();
    ADD_FAILURE() << "no node " << name;
    return json::parse("{}");
  }
};

TEST_F(pipeline_switch_test, the_rewrite_node_runs_only_when_enabled) {
  make_kb("plain", "");
  make_kb("rewriting", R"(,"enable_query_rewrite":true)");
  auto plain = turn("plain", "s1", "And how long do they last?");
  EXPECT_EQ(nodes(plain), (std::vector<std::string>{"route", "history", "memory", "retrieve",
                                                    "generate", "persist"}));
  EXPECT_EQ(node(plain, "retrieve").str("/input/query"), "And how long do they last?");

  auto rewritten = turn("rewriting", "s2", "And how long do they last?");
  EXPECT_EQ(nodes(rewritten), (std::vector<std::string>{"route", "history", "memory", "rewrite",
                                                        "retrieve", "generate", "persist"}));
  EXPECT_EQ(node(rewritten, "rewrite").str("/output/query"), "Lumenlatch K7 battery life");
  EXPECT_EQ(node(rewritten, "retrieve").str("/input/query"), "Lumenlatch K7 battery life");

  // The model fails: the question is searched as asked, the turn answers.
  fake_.set_script(R"({"default":{"reply":"Fine."},"rules":[)"
                   R"({"system":"rewrite a user's latest question","fault":"http_500"}]})");
  auto failed = turn("rewriting", "s3", "And how long do they last?");
  EXPECT_NE(node(failed, "rewrite").str("/output/outcome").find("skipped"), std::string::npos);
  EXPECT_EQ(node(failed, "retrieve").str("/input/query"), "And how long do they last?");
  EXPECT_EQ(failed.answer(), "Fine.");
}

TEST_F(pipeline_switch_test, the_rerank_step_runs_only_when_enabled) {
  make_kb("plain", "");
  make_kb("ranked", R"(,"enable_rerank":true,"top_k":4)");
  fake_.set_script(R"({"default":{"reply":"Fine."},"rules":[)"
                   R"({"match":"^Question: ","reply":"{\"ranking\": [3, 2, 1]}"}]})");
  auto steps = [](const json& retrieve) {
    std::vector<std::string> out;
    for (auto& t : retrieve.items("/output/trace"))
      out.push_back(t.str("/step"));
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  auto plain = turn("plain", "s1", "Lumenlatch battery kettles");
  EXPECT_FALSE(has(steps(node(plain, "retrieve")), "rerank"));
  auto ranked = turn("ranked", "s2", "Lumenlatch battery kettles");
  auto ranked_steps = steps(node(ranked, "retrieve"));
  EXPECT_TRUE(has(ranked_steps, "rerank")) << node(ranked, "retrieve").dump();
  // Fewer than 4 results: the reranker is not asked (3 documents here).
  for (auto& t : node(ranked, "retrieve").items("/output/trace"))
    if (t.str("/step") == "rerank")
      EXPECT_NE(t.str("/detail").find("skipped"), std::string::npos) << t.dump();
}

TEST_F(pipeline_switch_test, citations_and_sampling_follow_the_kb) {
  make_kb("cited", "");
  make_kb("uncited", R"(,"enable_source_citation":false,"temperature":0.25,"max_tokens":77)");
  auto cited = turn("cited", "s1", "How long do Lumenlatch K7 batteries last?");
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_NE(sent.items("/messages")[0].str("/content").find("<cite"), std::string::npos);
  EXPECT_NE(sent.integer("/max_tokens"), 77);

  auto uncited = turn("uncited", "s2", "How long do Lumenlatch K7 batteries last?");
  sent = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_EQ(sent.items("/messages")[0].str("/content").find("<cite"), std::string::npos);
  EXPECT_EQ(sent.integer("/max_tokens"), 77);
  EXPECT_NE(sent.dump().find("\"temperature\":0.25"), std::string::npos) << sent.dump();
  EXPECT_TRUE(uncited.done->items("/content/citations").empty());
  EXPECT_EQ(uncited.answer(), "The K7 runs on four AA batteries [1].");
}

TEST_F(pipeline_switch_test, search_mode_and_min_confidence_shape_the_results) {
  make_kb("bm25only", R"(,"search_mode":"bm25")");
  make_kb("strict", R"(,"min_confidence_score":1.0)");
  auto search = [&](const std::string& kb) {
    return call("POST", "/api/v1/kbs/" + kb + "/search",
                R"({"query":"Lumenlatch K7 batteries","agent_type":"hybrid_agent","top_k":3})",
                200);
  };
  auto b = search("bm25only");
  bool skipped = false;
  for (auto& t : b.items("/trace"))
    if (t.str("/step") == "vector")
      skipped = t.str("/detail").find("skipped: search_mode=bm25") != std::string::npos;
  EXPECT_TRUE(skipped) << b.dump();

  auto strict = search("strict");
  ASSERT_FALSE(strict.items("/retrieval_results").empty());
  auto best = strict.items("/retrieval_results")[0].str("/metadata/doc_id");
  EXPECT_EQ(best, "b1");
  for (auto& item : strict.items("/retrieval_results"))
    EXPECT_EQ(item.str("/metadata/doc_id"), "b1") << "only results as good as the best";
  bool logged = false;
  for (auto& t : strict.items("/trace"))
    logged = logged || t.str("/step") == "min_confidence";
  EXPECT_TRUE(logged) << strict.dump();
}

TEST_F(pipeline_switch_test, the_pipeline_graph_is_exported) {
  make_kb("plain", "");
  make_kb("full", R"(,"enable_query_rewrite":true,"enable_rerank":true,"search_mode":"vector")");
  auto plain = call("GET", "/api/v1/kbs/plain/pipeline", "", 200);
  EXPECT_EQ(plain.str("/answer_mode"), "pipeline");
  std::vector<std::string> ids;
  for (auto& n : plain.items("/nodes"))
    ids.push_back(n.str("/id") + (n.boolean("/enabled") ? "" : "(off)"));
  EXPECT_EQ(ids, (std::vector<std::string>{"history", "rewrite(off)", "search", "rerank(off)",
                                           "generate"}));
  EXPECT_EQ(plain.items("/edges").size(), 4u);
  EXPECT_FALSE(plain.boolean("/switches/enable_query_rewrite"));
  auto mermaid = plain.str("/mermaid");
  EXPECT_EQ(mermaid.rfind("flowchart TD\n", 0), 0u) << mermaid;
  EXPECT_NE(mermaid.find("history --> rewrite"), std::string::npos) << mermaid;
  EXPECT_NE(mermaid.find("style rewrite stroke-dasharray"), std::string::npos) << mermaid;

  auto full = call("GET", "/api/v1/kbs/full/pipeline", "", 200);
  for (auto& n : full.items("/nodes"))
    EXPECT_TRUE(n.boolean("/enabled")) << n.str("/id");
  EXPECT_EQ(full.str("/switches/search_mode"), "vector");
  EXPECT_EQ(full.str("/mermaid").find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(full.str("/mermaid").find("search (vector)"), std::string::npos);

  EXPECT_EQ(request(port(), "GET", "/api/v1/kbs/nope/pipeline", "").status, 404);
  EXPECT_EQ(request(port(), "POST", "/api/v1/kbs/plain/pipeline", "{}").status, 405);
}

TEST_F(pipeline_switch_test, kbs_can_be_declared_in_the_config_file) {
  temp_dir dir;
  auto toml = dir.path() / "ragtor.toml";
  {
    std::ofstream f{toml};
    f << "[kbs.declared]\ndescription = \"From TOML\"\nenable_query_rewrite = true\n"
         "search_mode = \"bm25\"\n";
  }
  ragtor_process other{dir.path() / "data", model_env(fake_), {"--config", toml.string()}};
  auto res = request(other.port(), "GET", "/api/v1/kbs/declared/pipeline", "");
  ASSERT_EQ(res.status, 200) << res.body;
  auto p = json::parse(res.body);
  EXPECT_TRUE(p.boolean("/switches/enable_query_rewrite"));
  EXPECT_EQ(p.str("/switches/search_mode"), "bm25");
  res = request(other.port(), "GET", "/api/v1/kbs/declared", "");
  EXPECT_EQ(json::parse(res.body).str("/settings/description"), "From TOML");
}

}  // namespace
}  // namespace ragtor::test
