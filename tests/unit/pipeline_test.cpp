// The answer pipeline's plain parts: KB pipeline settings (defaults,
// validation, round trip), the rewrite reply parser, the guided workflow's
// definition parser, slot merging, evaluation and verdict parsing, flow
// state, HTTP tool evidence, the pipeline graph, and the extractive
// generator without citations.
#include <future>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <gtest/gtest.h>

#include "llm/extractive_generator.hpp"
#include "llm/query_rewrite.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/http_json.hpp"
#include "pipeline/tool_agent.hpp"
#include "pipeline/workflow.hpp"
#include "protocol/errc.hpp"
#include "protocol/kb_settings.hpp"

namespace ragtor {
namespace {

TEST(pipeline_settings, defaults_follow_the_seed) {
  auto s = kb_settings_from_json(R"({"name":"k"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->answer_mode, "pipeline");
  EXPECT_FALSE(s->enable_query_rewrite);
  EXPECT_FALSE(s->enable_rerank);
  EXPECT_EQ(s->search_mode, "hybrid");
  EXPECT_TRUE(s->enable_source_citation);
  EXPECT_DOUBLE_EQ(s->min_confidence_score, 0);
  EXPECT_EQ(s->max_tool_calls, 4);
}

TEST(pipeline_settings, round_trip_and_default_top_k_alias) {
  auto s = kb_settings_from_json(
      R"({"name":"k","default_top_k":8,"enable_query_rewrite":true,"search_mode":"bm25",)"
      R"("min_confidence_score":0.5,"enable_source_citation":false,"temperature":0.2,)"
      R"("max_tokens":300,"answer_mode":"tool_agent","max_tool_calls":6})");
  ASSERT_TRUE(s) << error_message(s.error());
  EXPECT_EQ(s->top_k, 8);
  auto again = kb_settings_from_json(to_json(*s));
  ASSERT_TRUE(again) << error_message(again.error());
  EXPECT_EQ(to_json(*again), to_json(*s));
  EXPECT_EQ(again->answer_mode, "tool_agent");
  EXPECT_EQ(again->max_tool_calls, 6);
  EXPECT_DOUBLE_EQ(again->temperature, 0.2);
}

TEST(pipeline_settings, bad_values_name_their_field) {
  for (auto [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"name":"k","search_mode":"fuzzy"})", "search_mode"},
           {R"({"name":"k","answer_mode":"magic"})", "answer_mode"},
           {R"({"name":"k","min_confidence_score":1.5})", "min_confidence_score"},
           {R"({"name":"k","max_tool_calls":0})", "max_tool_calls"},
           {R"({"name":"k","temperature":3})", "temperature"},
           {R"({"name":"k","max_tokens":-5})", "max_tokens"},
           {R"({"name":"k","top_k":3,"default_top_k":4})", "top_k"},
           {R"({"name":"k","answer_mode":"workflow"})", "workflow"},
           {R"({"name":"k","workflow":{"intents":[{"l2":"chitchat"}]}})", "chitchat"}}) {
    auto s = kb_settings_from_json(body);
    ASSERT_FALSE(s) << body;
    EXPECT_NE(error_message(s.error()).find(field), std::string::npos)
        << body << ": " << error_message(s.error());
  }
}

TEST(query_rewrite, the_reply_is_cleaned_or_refused) {
  EXPECT_EQ(llm::parse_rewrite_reply("Lumenlatch K7 battery life"), "Lumenlatch K7 battery life");
  EXPECT_EQ(llm::parse_rewrite_reply("\n  Query: \"K7 pairing code\"\n"), "K7 pairing code");
  EXPECT_EQ(llm::parse_rewrite_reply("```\nK7 price\n```"), "K7 price");
  EXPECT_EQ(llm::parse_rewrite_reply(""), "");
  EXPECT_EQ(llm::parse_rewrite_reply(std::string(600, 'x')), "") << "an answer, not a query";
  auto req = llm::rewrite_request("and its price?", {{"user", "Tell me about the K7"},
                                                     {"assistant", "It is a lock."}});
  EXPECT_EQ(req.purpose, "query_rewrite");
  EXPECT_NE(req.messages.back().content.find("User: Tell me about the K7"), std::string::npos);
  EXPECT_NE(req.messages.back().content.find("Latest question: and its price?"),
            std::string::npos);
}

constexpr const char* def_json =
    R"({"business":"locks","max_ask_rounds":2,"tools":[{"name":"orders","url":"http://127.0.0.1:9/o"}],)"
    R"("intents":[{"l1":"support","l2":"refund","description":"refunds",)"
    R"("slots":[{"name":"order_id","description":"order number"},{"name":"reason","description":"why"}],)"
    R"("sources":["tool:orders","kb"]},{"l2":"info","description":"product information"}]})";

TEST(workflow, definitions_parse_with_defaults) {
  auto d = wf::parse_workflow(def_json);
  ASSERT_TRUE(d) << error_message(d.error());
  EXPECT_EQ(d->max_ask_rounds, 2);
  EXPECT_EQ(d->max_retrieval_rounds, 3);
  ASSERT_NE(d->intent("refund"), nullptr);
  EXPECT_EQ(d->intent("refund")->slots.size(), 2u);
  EXPECT_EQ(d->intent("info")->sources, (std::vector<std::string>{"kb"})) << "default source";
  EXPECT_EQ(d->tool("orders")->timeout_ms, 5000);
  EXPECT_FALSE(wf::parse_workflow(R"({"intents":[{"l2":"a"}],"colour":1})"));
  EXPECT_FALSE(wf::parse_workflow(R"({"intents":[{"l2":"a"},{"l2":"a"}]})"));
  EXPECT_FALSE(wf::parse_workflow(R"({"intents":[{"l2":"a","sources":["web"]}]})"));
  EXPECT_FALSE(wf::parse_workflow(R"({"tools":[{"name":"t","url":"https://x"}],"intents":[{"l2":"a"}]})"));
  EXPECT_FALSE(wf::parse_workflow("[1]"));
}

TEST(workflow, slots_merge_incrementally_and_ignore_junk) {
  auto d = *wf::parse_workflow(def_json);
  auto& refund = *d.intent("refund");
  wf::flow_state st;
  EXPECT_EQ(wf::merge_slots(refund, R"({"slots":{"order_id":"A-12","colour":"red","reason":null}})", st),
            (std::vector<std::string>{"order_id"}));
  EXPECT_EQ(wf::missing_slots(refund, st), (std::vector<std::string>{"reason"}));
  EXPECT_TRUE(wf::merge_slots(refund, "not json at all", st).empty());
  EXPECT_TRUE(wf::merge_slots(refund, R"({"slots":{"reason":"unknown"}})", st).empty());
  // Fenced JSON with prose around it is still read; a later value wins.
  wf::merge_slots(refund, "Sure:\n```json\n{\"slots\":{\"reason\":\"broken\",\"order_id\":\"A-13\"}}\n```", st);
  EXPECT_EQ(st.slots.at("order_id"), "A-13");
  EXPECT_TRUE(wf::missing_slots(refund, st).empty());
  st.question = "I want a refund";
  EXPECT_EQ(wf::full_question(st), "I want a refund (order_id: A-13, reason: broken)");
  EXPECT_EQ(wf::search_query(st), "I want a refund A-13 broken");
  auto back = wf::flow_state_from_json(wf::to_json(st));
  EXPECT_EQ(wf::to_json(back), wf::to_json(st));
  EXPECT_EQ(wf::to_json(wf::flow_state_from_json("{broken")), wf::to_json(wf::flow_state{}));
  auto ask = wf::ask_text(refund, {"order_id"});
  EXPECT_NE(ask.find("order number"), std::string::npos);
}

TEST(workflow, intent_evaluation_and_verdict_replies) {
  auto d = *wf::parse_workflow(def_json);
  EXPECT_EQ(wf::parse_intent_reply(d, R"({"intent":"refund","confidence":0.8})"), "refund");
  EXPECT_EQ(wf::parse_intent_reply(d, R"({"intent":"chitchat"})"), "chitchat");
  EXPECT_EQ(wf::parse_intent_reply(d, R"({"intent":"weather"})"), "") << "unknown intent";
  EXPECT_EQ(wf::parse_intent_reply(d, "refund"), "");
  auto e = wf::parse_evaluation(R"({"is_sufficient":false,"suggestion":"switch_source"})");
  EXPECT_TRUE(e.parsed);
  EXPECT_FALSE(e.sufficient);
  EXPECT_EQ(e.suggestion, "switch_source");
  e = wf::parse_evaluation(R"({"is_sufficient":true,"suggestion":"dance"})");
  EXPECT_EQ(e.suggestion, "pass") << "unknown suggestions follow is_sufficient";
  e = wf::parse_evaluation("[1,2");
  EXPECT_FALSE(e.parsed);
  EXPECT_FALSE(e.sufficient);
  auto v = wf::parse_verdict(R"({"answers":false,"reason":"about winter"})");
  EXPECT_TRUE(v.parsed);
  EXPECT_FALSE(v.answers);
  EXPECT_EQ(v.reason, "about winter");
  EXPECT_FALSE(wf::parse_verdict("yes!").parsed);
}

TEST(workflow, tool_answers_become_evidence) {
  auto items = wf::tool_evidence(
      "orders", R"({"results":[{"id":"o1","title":"Order A-12","text":"Shipped on May 2."},{"text":""}]})");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].evidence, "Shipped on May 2.");
  EXPECT_EQ(items[0].source, "tool:orders");
  EXPECT_EQ(items[0].title, "Order A-12");
  auto raw = wf::tool_evidence("orders", R"({"status":"shipped"})");
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].evidence, R"({"status":"shipped"})");
  EXPECT_TRUE(wf::tool_evidence("orders", "").empty());
}

TEST(pipeline_graph, nodes_follow_the_switches_and_mode) {
  kb_settings s;
  s.name = "k";
  auto g = pipeline_graph_of(s);
  ASSERT_EQ(g.nodes.size(), 5u);
  EXPECT_FALSE(g.nodes[1].enabled) << "rewrite is off by default";
  s.answer_mode = "workflow";
  s.workflow_json = def_json;
  g = pipeline_graph_of(s);
  bool escalate = false;
  for (auto& n : g.nodes)
    escalate = escalate || n.id == "escalate";
  EXPECT_TRUE(escalate);
  auto m = to_mermaid(g);
  EXPECT_NE(m.find("verify -- \"does not answer\" --> escalate"), std::string::npos) << m;
  EXPECT_NE(m.find("after 2 rounds"), std::string::npos) << m;
}

TEST(extractive_generator, citations_can_be_switched_off) {
  retrieval_result r;
  retrieval_item it;
  it.result_id = "1";
  it.doc_id = "d1";
  it.title = "Battery guide";
  it.evidence = "The K7 runs on four AA batteries. They last about fourteen months.";
  r.retrieval_results.push_back(it);
  extractive_options on, off;
  off.cite = false;
  auto a = extractive_answer_for("How long do K7 batteries last?", r, on);
  auto b = extractive_answer_for("How long do K7 batteries last?", r, off);
  EXPECT_NE(a.text.find("[1]"), std::string::npos) << a.text;
  EXPECT_FALSE(a.citations.empty());
  EXPECT_EQ(b.text.find("[1]"), std::string::npos) << b.text;
  EXPECT_EQ(b.text.find("Sources:"), std::string::npos) << b.text;
  EXPECT_TRUE(b.citations.empty());
  EXPECT_NE(b.text.find("fourteen months"), std::string::npos) << b.text;
}

TEST(tool_agent, tools_are_offered_in_the_openai_format) {
  auto& tools = agent::tools_json();
  for (auto name : agent::tool_names) {
    EXPECT_NE(tools.find("\"name\":\"" + std::string{name} + "\""), std::string::npos) << name;
    EXPECT_TRUE(agent::is_tool(name));
  }
  EXPECT_NE(tools.find("\"type\":\"function\""), std::string::npos);
  EXPECT_NE(tools.find("\"required\":[\"question\"]"), std::string::npos);
  EXPECT_FALSE(agent::is_tool("web_search"));
  EXPECT_NE(agent::system_prompt("door locks", 4).find("at most 4 tool calls"), std::string::npos);
}

TEST(tool_agent, arguments_are_checked) {
  EXPECT_EQ(agent::argument_of("vector_retrieve", R"({"query":"K7 battery"})"), "K7 battery");
  EXPECT_EQ(agent::argument_of("query_rewrite", R"({"question":"and its price?"})"),
            "and its price?");
  EXPECT_FALSE(agent::argument_of("query_rewrite", R"({"query":"x"})"));
  EXPECT_FALSE(agent::argument_of("vector_retrieve", R"({"query":"  "})"));
  EXPECT_FALSE(agent::argument_of("vector_retrieve", R"({"query":42})"));
  EXPECT_FALSE(agent::argument_of("vector_retrieve", "{query: K7"));
  EXPECT_FALSE(agent::argument_of("vector_retrieve", ""));
}

TEST(tool_agent, small_talk_takes_the_fast_path) {
  EXPECT_TRUE(agent::fast_path("Hello!"));
  EXPECT_TRUE(agent::fast_path("  thank you. "));
  EXPECT_TRUE(agent::fast_path("谢谢"));
  EXPECT_FALSE(agent::fast_path("Hello, how long do K7 batteries last?"));
  EXPECT_FALSE(agent::fast_path("battery"));
}

TEST(tool_agent, grade_replies_pick_passages) {
  EXPECT_EQ(agent::parse_grade_reply(R"({"relevant":[3,1,3,9]})", 4),
            (std::vector<size_t>{2, 0}));
  EXPECT_EQ(agent::parse_grade_reply(R"(Sure: {"relevant":["2"]})", 4), (std::vector<size_t>{1}));
  EXPECT_EQ(agent::parse_grade_reply(R"({"relevant":[]})", 4), (std::vector<size_t>{}));
  EXPECT_FALSE(agent::parse_grade_reply("all of them", 4));
  retrieval_item a;
  a.doc_id = "d1";
  a.evidence = "The K7 runs on AA batteries.";
  EXPECT_NE(agent::evidence_summary({a}).find("[1] (d1) The K7"), std::string::npos);
  EXPECT_EQ(agent::evidence_summary({}), "The evidence is empty.");
}

// The workflow's HTTP tool client never blocks its caller and bounds the
// whole call: a server that accepts but never answers times out (naming
// the stage), a cancel answers at once, a bad URL is refused.
class http_json_client_test : public testing::Test {
protected:
  // A listening socket nobody accepts from: connects succeed (backlog),
  // requests are never answered.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent{
      io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/tool";
  }
  http_json_client client;

  caf::expected<std::string> wait(std::future<caf::expected<std::string>>& f) {
    EXPECT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return f.get();
  }
};

TEST_F(http_json_client_test, a_silent_server_times_out) {
  std::promise<caf::expected<std::string>> p;
  auto f = p.get_future();
  client.post(url(), "{}", 100, [&](caf::expected<std::string> r) { p.set_value(std::move(r)); });
  auto r = wait(f);
  ASSERT_FALSE(r);
  EXPECT_EQ(code_of(r.error()), errc::timeout);
  EXPECT_NE(error_message(r.error()).find("(read)"), std::string::npos)
      << error_message(r.error());
}

TEST_F(http_json_client_test, cancel_answers_at_once) {
  std::promise<caf::expected<std::string>> p;
  auto f = p.get_future();
  auto call = client.post(url(), "{}", 600000,
                          [&](caf::expected<std::string> r) { p.set_value(std::move(r)); });
  call->cancel();
  auto r = wait(f);
  ASSERT_FALSE(r);
  EXPECT_EQ(code_of(r.error()), errc::cancelled);
}

TEST_F(http_json_client_test, only_http_urls_are_called) {
  for (auto* bad : {"https://127.0.0.1/x", "ftp://h/x", "not a url", "http:///x"}) {
    std::promise<caf::expected<std::string>> p;
    auto f = p.get_future();
    client.post(bad, "{}", 1000, [&](caf::expected<std::string> r) { p.set_value(std::move(r)); });
    auto r = wait(f);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(code_of(r.error()), errc::invalid_request) << bad;
  }
}

}  // namespace
}  // namespace ragtor
