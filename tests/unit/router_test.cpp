// The router's decision logic (DESIGN §4.2) without actors.
#include <gtest/gtest.h>

#include "actors/router/router.hpp"

using namespace ragtor;

TEST(router, requested_kb_wins) {
  chat_request req;
  req.kb_prefix = "edu";
  auto rd = decide_route(req, router_settings{});
  EXPECT_EQ(rd.kb_prefix, "edu");
  EXPECT_EQ(rd.method, "requested");
  EXPECT_EQ(rd.requested_kb_prefix, "edu");
  EXPECT_EQ(rd.worker_name, "edu:hybrid_agent:retrieve_only");
  EXPECT_EQ(rd.agent_type, "hybrid_agent");
}

TEST(router, no_kb_means_general_without_worker) {
  chat_request req;
  auto rd = decide_route(req, router_settings{});
  EXPECT_EQ(rd.kb_prefix, "general");
  EXPECT_EQ(rd.worker_name, "");
  EXPECT_EQ(rd.intent, "general");
}

TEST(router, explicit_general_is_normalised) {
  chat_request req;
  req.kb_prefix = "General";
  auto rd = decide_route(req, router_settings{});
  EXPECT_EQ(rd.kb_prefix, "general");
  EXPECT_EQ(rd.worker_name, "");
}

TEST(router, default_kb_and_agent_type) {
  chat_request req;
  req.agent_type = "naive_rag_agent";
  router_settings s;
  s.default_kb = "docs";
  auto rd = decide_route(req, s);
  EXPECT_EQ(rd.kb_prefix, "docs");
  EXPECT_EQ(rd.method, "default");
  EXPECT_EQ(rd.worker_name, "docs:naive_rag_agent:retrieve_only");
}

namespace {

std::vector<kb_route_profile> profiles() {
  return {
      {"harbour", "Ships, cargo and trade of Port Quellin", {"ships", "cargo", "harbour"},
       {"The schooner Marigold", "Harbour fees"}, ""},
      {"tea", "Brewing tea", {"tea", "brewing", "kettle"}, {"Green tea temperatures"},
       "naive_rag_agent"},
      {"cn", "中文知识库：茶叶与泡茶", {"泡茶", "茶叶"}, {}, ""},
  };
}

}  // namespace

TEST(router_heuristic, matches_the_message_against_kb_profiles) {
  auto d = detect_intent("Which ships pay harbour fees for cargo?", profiles());
  EXPECT_EQ(d.kb, "harbour");
  EXPECT_EQ(d.intent, "kb_query");
  EXPECT_GE(d.confidence, 0.75) << d.reason;
  auto t = detect_intent("How hot should the kettle be for green tea brewing?", profiles());
  EXPECT_EQ(t.kb, "tea");
  EXPECT_EQ(t.agent_type, "naive_rag_agent") << "the KB's default agent is suggested";
  auto cn = detect_intent("泡茶的水温应该是多少？", profiles());
  EXPECT_EQ(cn.kb, "cn");
  auto none = detect_intent("What is the capital of Mongolia?", profiles());
  EXPECT_EQ(none.kb, "");
  EXPECT_EQ(none.confidence, 0);
}

TEST(router_heuristic, small_talk_goes_to_general) {
  for (auto msg : {"Hello!", "thanks", "Thank you very much.", "你好！", "谢谢", " bye "}) {
    auto d = detect_intent(msg, profiles());
    EXPECT_EQ(d.kb, "general") << msg;
    EXPECT_EQ(d.intent, "chitchat") << msg;
  }
  EXPECT_NE(detect_intent("hello, which ships carry cargo?", profiles()).kb, "general");
}

TEST(router_heuristic, an_ambiguous_message_has_lower_confidence) {
  auto clear = detect_intent("ships cargo harbour", profiles());
  auto mixed = detect_intent("ships and tea", profiles());
  EXPECT_GT(clear.confidence, mixed.confidence);
}

TEST(router_policy, routed_kb_overrides_only_when_confident) {
  router_settings s;  // min_confidence 0.75
  chat_request req;
  req.kb_prefix = "tea";
  detected_intent weak{"harbour", 0.5, "heuristic", "weak match", "kb_query", ""};
  auto rd = decide_route(req, s, weak);
  EXPECT_EQ(rd.kb_prefix, "tea");
  EXPECT_EQ(rd.method, "requested");
  EXPECT_EQ(rd.routed_kb_prefix, "harbour");
  detected_intent strong{"harbour", 0.9, "heuristic", "strong match", "kb_query", "graph_agent"};
  rd = decide_route(req, s, strong);
  EXPECT_EQ(rd.kb_prefix, "harbour");
  EXPECT_EQ(rd.method, "heuristic");
  EXPECT_EQ(rd.requested_kb_prefix, "tea");
  EXPECT_EQ(rd.worker_name, "harbour:graph_agent:retrieve_only");
  EXPECT_NE(rd.reason.find("overrides"), std::string::npos);
  // The client's agent_type beats the suggestion.
  req.agent_type = "fusion_agent";
  EXPECT_EQ(decide_route(req, s, strong).agent_type, "fusion_agent");
}

TEST(router_policy, auto_routing_without_request_and_fallback_methods) {
  router_settings s;
  chat_request req;
  detected_intent none{"", 0, "heuristic", "nothing", "other", ""};
  auto rd = decide_route(req, s, none);
  EXPECT_EQ(rd.kb_prefix, "general");
  EXPECT_EQ(rd.worker_name, "");
  detected_intent timeout{"harbour", 0.8, "timeout", "model timed out", "kb_query", ""};
  rd = decide_route(req, s, timeout);
  EXPECT_EQ(rd.kb_prefix, "harbour");
  EXPECT_EQ(rd.method, "timeout");
  detected_intent chit{"general", 0.9, "heuristic", "small talk", "chitchat", ""};
  req.kb_prefix = "tea";
  rd = decide_route(req, s, chit);
  EXPECT_EQ(rd.kb_prefix, "general");
  EXPECT_EQ(rd.intent, "chitchat");
  EXPECT_EQ(rd.worker_name, "");
}
