// API keys and their limits without sockets (http/auth.hpp): key format and
// hashing, the token bucket, the key cache, what a key's user prefix and
// KB list allow, and the scope of every route in the route table.
#include "http/auth.hpp"

#include <set>

#include <gtest/gtest.h>

#include "http/routes.hpp"

namespace ragtor::http {
namespace {

using namespace std::chrono_literals;

api_key_record record(std::string name, std::string key, std::string scopes,
                      std::string user_prefix = "", std::string kbs = "") {
  api_key_record r;
  r.id = "id-" + name;
  r.name = std::move(name);
  r.hash = hash_api_key(key);
  r.scopes = std::move(scopes);
  r.user_prefix = std::move(user_prefix);
  r.kbs = std::move(kbs);
  r.rate = 1;
  r.burst = 3;
  return r;
}

TEST(http_auth, keys_are_long_random_and_stored_as_sha256) {
  auto a = generate_api_key();
  auto b = generate_api_key();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 4u + 64u);  // "rgt_" + 256 bits in hex
  EXPECT_TRUE(a.starts_with("rgt_"));
  EXPECT_EQ(hash_api_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hash_api_key(a).size(), 64u);
  EXPECT_EQ(hash_api_key(a).find(a.substr(4)), std::string::npos);
}

TEST(http_auth, credential_from_bearer_or_x_api_key) {
  EXPECT_EQ(credential_of("Bearer abc", ""), "abc");
  EXPECT_EQ(credential_of("bearer  abc ", "zzz"), "abc");
  EXPECT_EQ(credential_of("", "xyz"), "xyz");
  EXPECT_EQ(credential_of("Basic dXNlcjpw", "xyz"), "xyz");
  EXPECT_EQ(credential_of("", ""), "");
  EXPECT_TRUE(secret_equals("token", "token"));
  EXPECT_FALSE(secret_equals("token", "tokem"));
  EXPECT_FALSE(secret_equals("token", "token2"));
}

TEST(http_auth, scopes_parse_and_unknown_names_are_reported) {
  scope_set s;
  EXPECT_FALSE(parse_scopes("chat, kb:read", s));
  EXPECT_TRUE(s.has(scope::chat));
  EXPECT_TRUE(s.has(scope::kb_read));
  EXPECT_FALSE(s.has(scope::kb_write));
  EXPECT_FALSE(s.has(scope::admin));
  EXPECT_TRUE(s.has(scope::none));
  EXPECT_EQ(parse_scopes("chat,kb:delete", s), std::optional<std::string>{"kb:delete"});
}

TEST(http_auth, key_specs_are_validated_with_the_field_named) {
  key_spec ok;
  ok.name = "bot";
  ok.scopes = " chat ,kb:read,";
  ok.kbs = "a, b";
  EXPECT_FALSE(validate_key_spec(ok));
  EXPECT_EQ(ok.scopes, "chat,kb:read");
  EXPECT_EQ(ok.kbs, "a,b");
  auto field_of = [](key_spec s) {
    auto e = validate_key_spec(s);
    return e ? e->field : std::string{};
  };
  key_spec bad = ok;
  bad.name = "no spaces";
  EXPECT_EQ(field_of(bad), "name");
  bad = ok;
  bad.scopes = "root";
  EXPECT_EQ(field_of(bad), "scopes");
  bad = ok;
  bad.scopes = "";
  EXPECT_EQ(field_of(bad), "scopes");
  bad = ok;
  bad.rate = -1;
  EXPECT_EQ(field_of(bad), "rate");
  bad = ok;
  bad.burst = 0;
  EXPECT_EQ(field_of(bad), "burst");
  bad = ok;
  bad.user_prefix = "a b";
  EXPECT_EQ(field_of(bad), "user_prefix");
}

TEST(http_auth, bucket_grants_exactly_burst_at_once_then_says_when) {
  token_bucket b;
  auto t0 = auth_clock::now();
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(b.take(0.5, 5, t0), 0) << i;
  // Empty: one token takes 2 s at 0.5/s.
  EXPECT_EQ(b.take(0.5, 5, t0), 2);
  EXPECT_EQ(b.take(0.5, 5, t0 + 1s), 1);
  EXPECT_EQ(b.take(0.5, 5, t0 + 2s), 0);
  EXPECT_EQ(b.take(0.5, 5, t0 + 2s), 2);
  // It refills to burst, not beyond.
  auto later = t0 + 1h;
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(b.take(0.5, 5, later), 0) << i;
  EXPECT_GT(b.take(0.5, 5, later), 0);
  // rate 0: no limit.
  token_bucket unlimited;
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(unlimited.take(0, 0, t0), 0);
}

TEST(http_auth, cache_finds_active_keys_and_keeps_buckets_across_refreshes) {
  key_cache cache;
  auto revoked = record("old", "key-old", "chat");
  revoked.revoked_at_ms = 5;
  cache.replace({record("a", "key-a", "chat"), revoked}, auth_clock::now());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find("key-old"), nullptr);
  EXPECT_EQ(cache.find("wrong"), nullptr);
  EXPECT_EQ(cache.find(""), nullptr);
  auto a = cache.find("key-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->record.name, "a");
  auto t0 = auth_clock::now();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(a->bucket.take(a->record.rate, a->record.burst, t0), 0);
  // A refresh must not hand out a fresh burst.
  cache.replace({record("a", "key-a", "chat")}, auth_clock::now());
  auto again = cache.find("key-a");
  ASSERT_EQ(again, a);
  EXPECT_GT(again->bucket.take(again->record.rate, again->record.burst, t0), 0);
  cache.add(record("b", "key-b", "kb:read"));
  EXPECT_NE(cache.find("key-b"), nullptr);
  cache.remove_name("b");
  EXPECT_EQ(cache.find("key-b"), nullptr);
  EXPECT_NE(cache.find("key-a"), nullptr);
}

TEST(http_auth, user_prefix_refuses_writes_and_hides_reads) {
  key_entry k{record("acme", "k", "chat", "acme:")};
  path_params none;
  auto own = subjects_of("chat_json", none, "", R"({"user_id":"acme:ann","session_id":"s"})");
  EXPECT_EQ(check_subjects(k, "POST", true, own).status, 0u);
  auto other = subjects_of("chat_json", none, "", R"({"user_id":"beta:bob","session_id":"s"})");
  auto v = check_subjects(k, "POST", true, other);
  EXPECT_EQ(v.status, 403u);
  EXPECT_EQ(v.field, "user_id");
  auto read = subjects_of("conversation_messages", none, "beta:bob", "");
  EXPECT_EQ(check_subjects(k, "GET", false, read).status, 404u);
  path_params user;
  user.add("user", "beta:bob");
  EXPECT_EQ(check_subjects(k, "PUT", false, subjects_of("put_core_memory", user, "", "{}")).status,
            403u);
  // The OpenAI façade's `user`.
  auto oa = subjects_of("openai_chat", none, "", R"({"model":"general","user":"beta:x"})");
  EXPECT_EQ(check_subjects(k, "POST", true, oa).status, 403u);
  // A body that is not JSON names nobody: its handler answers 400.
  EXPECT_EQ(check_subjects(k, "POST", true, subjects_of("chat_json", none, "", "{nope")).status,
            0u);
}

TEST(http_auth, kb_list_limits_every_way_a_request_names_a_kb) {
  key_entry k{record("faq", "k", "chat,kb:read,kb:write", "", "faq,handbook")};
  path_params none;
  path_params kb;
  kb.add("kb", "secret");
  EXPECT_EQ(check_subjects(k, "GET", false, subjects_of("get_kb", kb, "", "")).status, 403u);
  EXPECT_EQ(check_subjects(k, "POST", true,
                           subjects_of("chat_json", none, "", R"({"kb_prefix":"faq"})"))
                .status,
            0u);
  EXPECT_EQ(check_subjects(k, "POST", true,
                           subjects_of("chat_json", none, "", R"({"kb_prefix":"secret"})"))
                .status,
            403u);
  // A turn that lets the router choose could reach any KB.
  EXPECT_EQ(check_subjects(k, "POST", true, subjects_of("chat_stream", none, "", R"({})")).status,
            403u);
  EXPECT_EQ(check_subjects(k, "POST", true,
                           subjects_of("chat_json", none, "", R"({"kb_prefix":"general"})"))
                .status,
            0u);
  EXPECT_EQ(check_subjects(k, "POST", true,
                           subjects_of("openai_chat", none, "", R"({"model":"kb:secret:x"})"))
                .status,
            403u);
  EXPECT_EQ(check_subjects(k, "POST", true,
                           subjects_of("openai_chat", none, "", R"({"model":"kb:faq"})"))
                .status,
            0u);
  EXPECT_EQ(check_subjects(k, "POST", false,
                           subjects_of("create_kb", none, "", R"({"name":"other"})"))
                .status,
            403u);
  EXPECT_TRUE(k.allows_kb("handbook"));
  EXPECT_FALSE(k.allows_kb("secret"));
}

TEST(http_auth, every_route_names_its_scope) {
  std::set<std::string_view> open;
  for (auto& r : api_routes()) {
    if (r.needs == scope::none)
      open.insert(r.name);
    if (r.pattern.starts_with("/admin/")) {
      EXPECT_EQ(r.needs, scope::admin) << r.name;
    }
    if (r.pattern.starts_with("/api/v1/kbs")) {
      EXPECT_TRUE(r.needs == scope::kb_read || r.needs == scope::kb_write) << r.name;
    }
    if (r.admit == admission::turn) {
      EXPECT_EQ(r.needs, scope::chat) << r.name;
    }
  }
  // The probes, and the console page: static HTML that holds no data (it
  // calls the admin API with the token the operator gives it).
  EXPECT_EQ(open, (std::set<std::string_view>{"health", "ready", "admin_page"}))
      << "only the probes and the console page are open";
}

TEST(http_auth, workflow_tool_hosts_must_be_allowed) {
  kb_settings s;
  s.workflow_json =
      R"({"tools":[{"name":"a","url":"http://127.0.0.1:9/a"},{"name":"b","url":"http://Tools.Example:8443/b"}],)"
      R"("intents":[{"l2":"x","description":"x","sources":["tool:a"]}]})";
  auto e = check_outbound_hosts(s, {"127.0.0.1", "::1", "localhost"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "workflow.tools[1].url");
  EXPECT_FALSE(check_outbound_hosts(s, {"127.0.0.1", "tools.example"}));
  EXPECT_FALSE(check_outbound_hosts(s, {"*"}));
  EXPECT_FALSE(check_outbound_hosts(kb_settings{}, {}));
}

TEST(http_auth, loopback_hosts) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.8.9.10"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host("::"));
  EXPECT_FALSE(is_loopback_host("10.1.2.3"));
}

}  // namespace
}  // namespace ragtor::http
