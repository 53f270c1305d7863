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
