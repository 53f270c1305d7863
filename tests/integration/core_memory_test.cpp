// Core memory (DESIGN §8, seed 002): GET/PUT /api/v1/users/{user_id}/memory
// stores an editable JSON profile per user, which goes into the model's
// prompt (<user_memory>) — except for incognito turns, which read no memory.
#include <gtest/gtest.h>

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
  EXPECT_EQ(json::parse(request(port(), "GET", "/api/v1/users/bob/memory").body)
                .at("/profile")
                .dump(),
            "{}")
      << "per user";

  auto r = chat_stream(port(), chat_body("ann", "s1", "How is tea brewed?"));
  ASSERT_TRUE(well_formed_stream(r));
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  auto system = sent.items("/messages")[0].str("/content");
  EXPECT_NE(system.find("<user_memory>"), std::string::npos);
  EXPECT_NE(system.find("short answers in French"), std::string::npos);

  auto inc = chat_stream(port(), chat_body("ann", "s2", "How is tea brewed?", "test",
                                           {{"incognito", "true", true}}));
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
  EXPECT_EQ(json::parse(request(port(), "GET", "/api/v1/users/ann/memory").body).integer("/profile/a"),
            1);
}

}  // namespace
}  // namespace ragtor::test
