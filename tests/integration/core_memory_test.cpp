// Core memory (DESIGN §8, seed 002): GET/PUT /api/v1/users/{user_id}/memory
// stores an editable JSON profile per user, which goes into the model's
// prompt (<user_memory>) — except for incognito turns, which read no memory.
#include <gtest/gtest.h>

#include <set>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

class core_memory_test : public ragtor_server_test {
protected:
  fake_openai fake_{R"({"default":{"reply":"ok"}})"};
  env_vars server_env() const override { return model_env(fake_); }
};

TEST_F(core_memory_test, profile_round_trip_and_prompt_inclusion) {
  auto empty = request(port(), "GET", "/api/v1/users/ann/memory");
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_EQ(json::parse(empty.body).at("/profile").dump(), "{}");

  auto put = request(port(), "PUT", "/api/v1/users/ann/memory",
                     R"({ "name": "Ann", "prefers": "short answers in French" })");
  ASSERT_EQ(put.status, 200) << put.body;
  auto got = json::parse(request(port(), "GET", "/api/v1/users/ann/memory").body);
  EXPECT_EQ(got.str("/user_id"), "ann");
  EXPECT_EQ(got.str("/profile/prefers"), "short answers in French");
  EXPECT_EQ(
      json::parse(request(port(), "GET", "/api/v1/users/bob/memory").body).at("/profile").dump(),
      "{}")
      << "per user";

  auto r = chat_stream(port(), chat_body("ann", "s1", "How is tea brewed?"));
  ASSERT_TRUE(well_formed_stream(r));
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  auto system = sent.items("/messages")[0].str("/content");
  EXPECT_NE(system.find("<user_memory>"), std::string::npos);
  EXPECT_NE(system.find("short answers in French"), std::string::npos);

  auto inc = chat_stream(
      port(), chat_body("ann", "s2", "How is tea brewed?", "test", {{"incognito", "true", true}}));
  ASSERT_TRUE(well_formed_stream(inc));
  auto sent2 = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_EQ(sent2.items("/messages")[0].str("/content").find("<user_memory>"), std::string::npos)
      << "incognito reads no memory";
}

TEST_F(core_memory_test, bad_profiles_are_refused_and_change_nothing) {
  ASSERT_EQ(request(port(), "PUT", "/api/v1/users/ann/memory", R"({"a":1})").status, 200);
  for (auto body : {"[1,2]", "not json", "\"text\""})
    EXPECT_EQ(request(port(), "PUT", "/api/v1/users/ann/memory", body).status, 400) << body;
  EXPECT_EQ(request(port(), "PUT", "/api/v1/users/ann/memory",
                    "{\"big\":\"" + std::string(20000, 'x') + "\"}")
                .status,
            413);
  EXPECT_EQ(request(port(), "PUT", "/api/v1/users/bad%20id/memory", "{}").status, 400);
  EXPECT_EQ(request(port(), "DELETE", "/api/v1/users/ann/memory").status, 405);
  EXPECT_EQ(
      json::parse(request(port(), "GET", "/api/v1/users/ann/memory").body).integer("/profile/a"),
      1);
}

}  // namespace
}  // namespace ragtor::test

namespace ragtor::test {
namespace {

TEST_F(core_memory_test, stated_facts_become_memories_recalled_with_a_caution) {
  auto r = chat_stream(port(), chat_body("cleo", "s1",
                                         "I really love green tea. I'm allergic to peanuts. "
                                         "How should I brew sencha?"));
  ASSERT_TRUE(well_formed_stream(r));
  // `done` follows the commit of the turn's memories.
  auto list = json::parse(request(port(), "GET", "/api/v1/users/cleo/memories").body);
  ASSERT_EQ(list.items("/memories").size(), 2u) << list.dump();
  auto mems = list.items("/memories");
  std::set<std::string> kinds{mems[0].str("/kind"), mems[1].str("/kind")};
  EXPECT_EQ(kinds, (std::set<std::string>{"preference", "constraint"}));
  EXPECT_FALSE(mems[0].str("/source_message_id").empty());

  // The next turn's prompt carries them under a caution header.
  auto next = chat_stream(port(), chat_body("cleo", "s2", "Which tea would you suggest?"));
  ASSERT_TRUE(well_formed_stream(next));
  auto system =
      json::parse(fake_.stats().str("/last_chat_request")).items("/messages")[0].str("/content");
  EXPECT_NE(system.find("I really love green tea"), std::string::npos);
  EXPECT_NE(system.find("May be outdated"), std::string::npos) << system;

  // Incognito turns neither store nor read memories.
  auto inc = chat_stream(
      port(), chat_body("cleo", "s3", "I hate rooibos.", "test", {{"incognito", "true", true}}));
  ASSERT_TRUE(well_formed_stream(inc));
  auto sys3 =
      json::parse(fake_.stats().str("/last_chat_request")).items("/messages")[0].str("/content");
  EXPECT_EQ(sys3.find("I really love green tea"), std::string::npos);
  auto after = chat_stream(port(), chat_body("cleo", "s4", "thanks"));
  ASSERT_TRUE(well_formed_stream(after));
  EXPECT_EQ(json::parse(request(port(), "GET", "/api/v1/users/cleo/memories").body)
                .items("/memories")
                .size(),
            2u);

  // Delete one, then all.
  auto id = mems[0].str("/id");
  EXPECT_EQ(request(port(), "DELETE", "/api/v1/users/cleo/memories/" + id).status, 200);
  EXPECT_EQ(request(port(), "DELETE", "/api/v1/users/cleo/memories/" + id).status, 404);
  auto all = request(port(), "DELETE", "/api/v1/users/cleo/memories");
  EXPECT_EQ(json::parse(all.body).integer("/deleted"), 1);
  EXPECT_TRUE(json::parse(request(port(), "GET", "/api/v1/users/cleo/memories").body)
                  .items("/memories")
                  .empty());
}

}  // namespace
}  // namespace ragtor::test

namespace ragtor::test {
namespace {

TEST_F(core_memory_test, past_turns_from_other_conversations_are_recalled) {
  auto first = chat_stream(port(), chat_body("dan", "a", "How long should green tea steep?"));
  ASSERT_TRUE(well_formed_stream(first));
  // Another conversation, a related question: the earlier turn is recalled.
  auto related = chat_stream(port(), chat_body("dan", "b", "Green tea steeping time again?"));
  ASSERT_TRUE(well_formed_stream(related));
  auto system =
      json::parse(fake_.stats().str("/last_chat_request")).items("/messages")[0].str("/content");
  EXPECT_NE(system.find("<episodic_memory>"), std::string::npos) << system;
  EXPECT_NE(system.find("User: How long should green tea steep?"), std::string::npos);
  // An unrelated question recalls nothing; another user's turns never.
  auto unrelated = chat_stream(port(), chat_body("dan", "c", "Where is the lighthouse?"));
  ASSERT_TRUE(well_formed_stream(unrelated));
  auto sys2 =
      json::parse(fake_.stats().str("/last_chat_request")).items("/messages")[0].str("/content");
  EXPECT_EQ(sys2.find("<episodic_memory>"), std::string::npos);
  auto other = chat_stream(port(), chat_body("eve", "a", "How long should green tea steep?"));
  ASSERT_TRUE(well_formed_stream(other));
  auto sys3 =
      json::parse(fake_.stats().str("/last_chat_request")).items("/messages")[0].str("/content");
  EXPECT_EQ(sys3.find("<episodic_memory>"), std::string::npos);
}

}  // namespace
}  // namespace ragtor::test
