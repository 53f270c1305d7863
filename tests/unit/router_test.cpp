// The router's decision logic (DESIGN §4.2) without actors, and the
// router actor's profiles of the catalog's KBs.
#include <chrono>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <gtest/gtest.h>

#include "actors/router/router.hpp"
#include "protocol/type_ids.hpp"
#include "retrieval/kb_catalog.hpp"
#include "tests/support/json.hpp"

using namespace ragtor;
using namespace std::chrono_literals;

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

// The router actor works out a KB's terms once per snapshot rather than
// on every turn, and routes by a KB's new snapshot (an ingest, a settings
// change) from the next turn on; KBs added or dropped are seen too.
TEST(router_actor, works_out_a_kbs_terms_once_per_snapshot) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto catalog = std::make_shared<kb_catalog>();
  auto snapshot = [](std::string name, std::string title, std::vector<std::string> keywords) {
    kb_settings s;
    s.name = std::move(name);
    s.keywords = std::move(keywords);
    document d;
    d.id = "d1";
    d.title = std::move(title);
    d.text = "Some text about " + d.title + ".";
    return kb_catalog::build_snapshot(s, {d}, {});
  };
  catalog->put(snapshot("harbour", "The schooner Marigold", {"ships", "cargo"}));
  catalog->put(snapshot("tea", "Green tea temperatures", {"tea", "kettle"}));
  router_settings rs;
  rs.mode = "heuristic";
  auto router = spawn_router(sys, rs, catalog);
  caf::scoped_actor self{sys};
  auto routed_to = [&](const std::string& message) {
    chat_request req;
    req.message = message;
    std::string kb;
    self->request(router, 5s, atom::route_v, req)
        .receive([&](route_decision& rd) { kb = rd.routed_kb_prefix; },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return kb;
  };
  auto built = [&] {
    std::string status;
    self->request(router, 5s, atom::status_v)
        .receive([&](std::string& j) { status = std::move(j); },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return test::json::parse(status).integer("/profiles_built");
  };
  for (int turn = 0; turn < 5; ++turn) {
    EXPECT_EQ(routed_to("Which ships carry cargo?"), "harbour") << turn;
    EXPECT_EQ(routed_to("How hot should the kettle be?"), "tea") << turn;
  }
  EXPECT_EQ(built(), 2) << "one profile per KB, not one per turn";

  // The tea KB ingested again with other documents and keywords.
  catalog->put(snapshot("tea", "Lighthouse keepers' logs", {"lighthouse", "keepers"}));
  EXPECT_EQ(routed_to("Who kept the lighthouse logs?"), "tea");
  EXPECT_NE(routed_to("How hot should the kettle be?"), "tea") << "routed by the old snapshot";
  EXPECT_EQ(built(), 3) << "only the changed KB made again";

  catalog->put(snapshot("ferries", "Ferry timetables", {"ferry", "timetable"}));
  EXPECT_EQ(routed_to("When does the ferry leave?"), "ferries");
  EXPECT_EQ(built(), 4);
  anon_send_exit(router, caf::exit_reason::user_shutdown);
}
