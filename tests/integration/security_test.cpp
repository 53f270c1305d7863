// Security and admission control against a real `ragtor serve`
// (docs/security.md): every route of the route table with no key, a wrong
// key, a revoked key, a key without the route's scope, a key whose
// user_prefix does not match and the right key; keys created and revoked
// with the CLI and the admin API; per-key rate limits; the stream and
// connection caps; the header deadline; and no key or admin token in the
// server's log.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "http/routes.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/json.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* admin_token = "adm-6f1c2a9e0b7d4c35a8e1";

header_list bearer(const std::string& key) {
  return {{"Authorization", "Bearer " + key}};
}

header_list x_api_key(const std::string& key) {
  return {{"X-API-Key", key}};
}

// Replaces every "{U}" in `text` with `user`.
std::string with_user(std::string text, const std::string& user) {
  for (auto at = text.find("{U}"); at != std::string::npos; at = text.find("{U}"))
    text.replace(at, 3, user);
  return text;
}

// How to call one route of the table: a path and body naming user "{U}"
// (empty `has_user`: the route names no user), and what the right key gets.
struct route_call {
  std::string method;
  std::string path;
  std::string body;
  bool has_user = true;
  std::set<int> ok = {};  // statuses the right key may get ({} = any but 401/403/429)
};

std::map<std::string, route_call> route_calls() {
  const std::string chat = R"({"user_id":"{U}","session_id":"sec-1","message":"Who designed the Port Quellin lighthouse?","kb_prefix":"test"})";
  return {
      {"health", {"GET", "/healthz", "", false, {200}}},
      {"ready", {"GET", "/readyz", "", false, {200}}},
      {"openai_models", {"GET", "/v1/models", "", false, {200}}},
      {"openai_chat",
       {"POST", "/v1/chat/completions",
        R"({"model":"kb:test","messages":[{"role":"user","content":"Who designed the lighthouse?"}],"user":"{U}"})",
        true,
        {200}}},
      {"chat_stream", {"POST", "/api/v1/chat/stream", chat, true, {200}}},
      {"chat_resume", {"GET", "/api/v1/chat/stream/no-such-req?user_id={U}", "", true}},
      {"chat_json", {"POST", "/api/v1/chat", chat, true, {200}}},
      {"chat_stop",
       {"POST", "/api/v1/chat/stop", R"({"request_id":"r-none","user_id":"{U}"})", true}},
      {"clear_conversation",
       {"POST", "/api/v1/clear", R"({"user_id":"{U}","session_id":"sec-x"})", true}},
      {"feedback",
       {"POST", "/api/v1/feedback",
        R"({"message_id":"m-none","query":"q","is_positive":true,"thread_id":"t"})", false}},
      {"list_conversations", {"GET", "/api/v1/conversations?user_id={U}", "", true, {200}}},
      {"delete_conversation",
       {"DELETE", "/api/v1/conversations/c-none?user_id={U}", "", true}},
      {"conversation_messages",
       {"GET", "/api/v1/conversations/c-none/messages?user_id={U}", "", true}},
      {"conversation_summary",
       {"GET", "/api/v1/conversations/c-none/summary?user_id={U}", "", true}},
      {"cluster_members", {"GET", "/api/v1/cluster", "", false, {200}}},
      {"list_kbs", {"GET", "/api/v1/kbs", "", false, {200}}},
      {"create_kb", {"POST", "/api/v1/kbs", R"({"name":"made_by_key"})", false, {201}}},
      {"get_kb", {"GET", "/api/v1/kbs/test", "", false, {200}}},
      {"ingest_documents",
       {"POST", "/api/v1/kbs/test/documents",
        R"({"documents":[{"id":"sec-doc","text":"Keys are checked before bodies are read."}]})",
        false}},
      {"search_kb", {"POST", "/api/v1/kbs/test/search", R"({"query":"lighthouse"})", false}},
      {"kb_pipeline", {"GET", "/api/v1/kbs/test/pipeline", "", false, {200}}},
      {"get_core_memory", {"GET", "/api/v1/users/{U}/memory", "", true, {200}}},
      {"put_core_memory", {"PUT", "/api/v1/users/{U}/memory", R"({"city":"Oslo"})", true}},
      {"list_memories", {"GET", "/api/v1/users/{U}/memories", "", true, {200}}},
      {"delete_memories", {"DELETE", "/api/v1/users/{U}/memories", "", true}},
      {"delete_memory", {"DELETE", "/api/v1/users/{U}/memories/m-none", "", true}},
      {"admin_create_key",
       {"POST", "/admin/api/keys", R"({"name":"made-by-admin-route","scopes":["chat"]})", false,
        {201}}},
      {"admin_list_keys", {"GET", "/admin/api/keys", "", false, {200}}},
      {"admin_revoke_key", {"DELETE", "/admin/api/keys/no-such-key", "", false, {404}}},
      {"admin_page", {"GET", "/admin", "", false, {200}}},
      {"metrics", {"GET", "/metrics", "", false, {200}}},
      {"admin_nodes", {"GET", "/admin/api/nodes", "", false, {200}}},
      {"admin_actors", {"GET", "/admin/api/actors?kind=router", "", false, {200}}},
      {"admin_actor", {"GET", "/admin/api/actors/nowhere/1", "", false, {404}}},
      {"admin_sessions", {"GET", "/admin/api/sessions", "", false, {200}}},
      {"admin_streams", {"GET", "/admin/api/streams", "", false, {200}}},
      {"admin_stop_stream", {"POST", "/admin/api/streams/r-none/stop", "", false, {404}}},
      {"admin_evict_session",
       {"POST", "/admin/api/sessions/{U}/s-none/evict", "", true, {404}}},
      {"admin_loggers", {"GET", "/admin/api/loggers", "", false, {200}}},
      {"admin_set_logger",
       {"PUT", "/admin/api/loggers", R"({"name":"http","level":"debug"})", false, {200}}},
      // The feed streams for as long as it is read: a bad view answers at once.
      {"admin_events", {"GET", "/admin/api/events?view=bogus", "", false, {400}}},
  };
}

class security_test : public ragtor_server_test {
protected:
  env_vars server_env() const override {
    return {{"RAGTOR_AUTH__MODE", "api_key"},
            {"RAGTOR_AUTH__ADMIN_TOKEN", admin_token},
            {"RAGTOR_AUTH__KEY_REFRESH_MS", "200"},
            {"RAGTOR_LOG__LEVEL", "debug"}};
  }

  // Creates a key through the admin API; its secret.
  std::string create_key(const std::string& json_body) {
    auto res = request(port(), "POST", "/admin/api/keys", json_body, bearer(admin_token));
    EXPECT_EQ(res.status, 201) << res.body;
    auto key = json::parse(res.body).str("/key");
    keys_.push_back(key);
    return key;
  }

  // Creates a key with the CLI on the server's data dir; its secret.
  std::string cli_create_key(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"keys", "create", "--data-dir", data_dir().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_ragtor(argv);
    EXPECT_TRUE(r.status.clean()) << r.output;
    // stdout holds the key alone; stderr (interleaved here) says what it is.
    std::string key;
    size_t at = r.output.find("rgt_");
    if (at != std::string::npos)
      key = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_EQ(key.size(), 68u) << r.output;
    keys_.push_back(key);
    return key;
  }

  // Fails when a key or the admin token ever reached the server's log.
  void expect_no_secret_in_log() {
    auto log = server().stderr_tail(64 << 20);
    for (auto& k : keys_)
      EXPECT_EQ(log.find(k), std::string::npos) << "a key appears in the server's log";
    EXPECT_EQ(log.find(admin_token), std::string::npos) << "the admin token appears in the log";
  }

  std::vector<std::string> keys_;
};

TEST_F(security_test, every_route_checks_key_scope_and_user_prefix) {
  auto calls = route_calls();
  // Every route of the table has a call here: a new route is tested by
  // construction.
  for (auto& r : http::api_routes())
    ASSERT_TRUE(calls.count(std::string{r.name})) << "no call for route " << r.name;

  auto all = create_key(
      R"({"name":"acme-all","user_prefix":"acme:","scopes":["chat","kb:read","kb:write","admin"],"rate":0})");
  auto chat_only = create_key(R"({"name":"chat-only","scopes":["chat"],"rate":0})");
  auto kb_only = create_key(R"({"name":"kb-only","scopes":["kb:read","kb:write"],"rate":0})");
  auto revoked = create_key(R"({"name":"gone","scopes":["chat","kb:read","kb:write","admin"]})");
  auto rv = request(port(), "DELETE", "/admin/api/keys/gone", "", bearer(admin_token));
  ASSERT_EQ(rv.status, 200) << rv.body;
  const std::string wrong = "rgt_" + std::string(64, '0');

  for (auto& r : http::api_routes()) {
    auto& c = calls.at(std::string{r.name});
    SCOPED_TRACE(std::string{r.name} + ": " + c.method + " " + c.path);
    auto send = [&](const header_list& h, const std::string& user = "acme:ann") {
      return request(port(), c.method, with_user(c.path, user), with_user(c.body, user), h, 60s);
    };
    if (r.needs == http::scope::none) {
      EXPECT_EQ(send({}).status, 200);
      EXPECT_EQ(send(bearer(wrong)).status, 200);
      continue;
    }
    auto none = send({});
    EXPECT_EQ(none.status, 401) << none.body;
    EXPECT_EQ(none.header("www-authenticate"), "Bearer");
    EXPECT_EQ(send(bearer(wrong)).status, 401);
    EXPECT_EQ(send(x_api_key(wrong)).status, 401);
    EXPECT_EQ(send(bearer(revoked)).status, 401);
    auto lacking = r.needs == http::scope::chat ? kb_only : chat_only;
    auto scoped = send(bearer(lacking));
    EXPECT_EQ(scoped.status, 403) << scoped.body;
    if (c.has_user) {
      auto other = send(bearer(all), "beta:bob");
      EXPECT_EQ(other.status, c.method == "GET" ? 404 : 403) << other.body;
    }
    auto right = send(r.name == "list_kbs" ? x_api_key(all) : bearer(all));
    EXPECT_NE(right.status, 401) << right.body;
    EXPECT_NE(right.status, 403) << right.body;
    EXPECT_NE(right.status, 429) << right.body;
    if (!c.ok.empty()) {
      EXPECT_TRUE(c.ok.count(right.status)) << right.status << " " << right.body;
    }
  }
  // The admin token works on the admin routes only.
  EXPECT_EQ(request(port(), "GET", "/admin/api/keys", "", bearer(admin_token)).status, 200);
  EXPECT_EQ(request(port(), "GET", "/api/v1/kbs", "", bearer(admin_token)).status, 401);
  expect_no_secret_in_log();
}

TEST_F(security_test, listings_never_show_keys_or_hashes) {
  auto key = create_key(R"({"name":"listed","tenant":"acme","scopes":["chat"]})");
  auto res = request(port(), "GET", "/admin/api/keys", "", bearer(admin_token));
  ASSERT_EQ(res.status, 200);
  EXPECT_NE(res.body.find("\"listed\""), std::string::npos);
  EXPECT_EQ(res.body.find(key), std::string::npos);
  EXPECT_EQ(res.body.find("hash"), std::string::npos);
  auto cli = run_ragtor({"keys", "list", "--data-dir", data_dir().string()});
  ASSERT_TRUE(cli.status.clean()) << cli.output;
  EXPECT_NE(cli.output.find("listed"), std::string::npos);
  EXPECT_EQ(cli.output.find(key), std::string::npos);
  EXPECT_EQ(cli.output.find(key.substr(4, 16)), std::string::npos);
  // A name is taken once.
  auto again = request(port(), "POST", "/admin/api/keys", R"({"name":"listed"})", bearer(admin_token));
  EXPECT_EQ(again.status, 409) << again.body;
  auto bad = request(port(), "POST", "/admin/api/keys", R"({"name":"x","scopes":["root"]})",
                     bearer(admin_token));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body).str("/error/field"), "scopes");
  expect_no_secret_in_log();
}

TEST_F(security_test, cli_keys_work_at_once_and_cli_revocation_within_the_refresh) {
  // Created by another process on the same store while the server runs:
  // the unknown key makes the server reload its keys.
  auto key = cli_create_key({"--name", "from-cli", "--scopes", "kb:read", "--rate", "0"});
  EXPECT_EQ(request(port(), "GET", "/api/v1/kbs", "", bearer(key)).status, 200);
  auto revoke = run_ragtor({"keys", "revoke", "from-cli", "--data-dir", data_dir().string()});
  ASSERT_TRUE(revoke.status.clean()) << revoke.output;
  // [auth] key_refresh_ms = 200 here: refused within that (polled up to 5 s).
  auto deadline = std::chrono::steady_clock::now() + 5s;
  int status = 200;
  while (status != 401 && std::chrono::steady_clock::now() < deadline)
    status = request(port(), "GET", "/api/v1/kbs", "", bearer(key)).status;
  EXPECT_EQ(status, 401);
  auto twice = run_ragtor({"keys", "revoke", "from-cli", "--data-dir", data_dir().string()});
  EXPECT_FALSE(twice.status.clean());
  expect_no_secret_in_log();
}

TEST_F(security_test, rate_limit_grants_exactly_burst_then_429_per_key) {
  // 0.01/s: the bucket does not refill noticeably during the test.
  auto a = create_key(R"({"name":"rl-a","scopes":["kb:read"],"rate":0.01,"burst":5})");
  auto b = create_key(R"({"name":"rl-b","scopes":["kb:read"],"rate":0.01,"burst":5})");
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(request(port(), "GET", "/api/v1/kbs", "", bearer(a)).status, 200) << i;
  auto limited = request(port(), "GET", "/api/v1/kbs", "", bearer(a));
  EXPECT_EQ(limited.status, 429) << limited.body;
  auto retry = limited.header("retry-after");
  ASSERT_FALSE(retry.empty());
  EXPECT_GE(std::stoi(retry), 1);
  EXPECT_LE(std::stoi(retry), 100);
  // Another key has its own bucket.
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(request(port(), "GET", "/api/v1/kbs", "", bearer(b)).status, 200) << i;
  EXPECT_EQ(request(port(), "GET", "/api/v1/kbs", "", bearer(b)).status, 429);
  expect_no_secret_in_log();
}

TEST_F(security_test, kb_list_of_a_key_filters_listings_and_refuses_other_kbs) {
  auto faq = create_key(R"({"name":"only-test","scopes":["chat","kb:read"],"kbs":["test"],"rate":0})");
  auto list = request(port(), "GET", "/api/v1/kbs", "", bearer(faq));
  ASSERT_EQ(list.status, 200);
  auto other_kb = request(port(), "POST", "/api/v1/kbs", R"({"name":"elsewhere"})",
                          bearer(create_key(R"({"name":"writer","scopes":["kb:write"],"rate":0})")));
  ASSERT_EQ(other_kb.status, 201) << other_kb.body;
  auto after = request(port(), "GET", "/api/v1/kbs", "", bearer(faq));
  EXPECT_EQ(after.body.find("elsewhere"), std::string::npos) << after.body;
  EXPECT_EQ(request(port(), "GET", "/api/v1/kbs/elsewhere", "", bearer(faq)).status, 403);
  auto models = request(port(), "GET", "/v1/models", "", bearer(faq));
  ASSERT_EQ(models.status, 200);
  EXPECT_NE(models.body.find("\"kb:test\""), std::string::npos) << models.body;
  EXPECT_EQ(models.body.find("elsewhere"), std::string::npos) << models.body;
  auto chat = request(port(), "POST", "/api/v1/chat",
                      R"({"user_id":"u","session_id":"s","message":"hi","kb_prefix":"elsewhere"})",
                      bearer(faq));
  EXPECT_EQ(chat.status, 403) << chat.body;
  EXPECT_EQ(db().conversation_count("u"), 0);
}

// With auth off (the default) on loopback, every route stays open, and the
// stream cap holds: the fifth concurrent stream is refused before anything
// is stored.
class admission_test : public ragtor_server_test {
protected:
  env_vars server_env() const override {
    return {{"RAGTOR_SERVER__MAX_STREAMS", "4"},
            {"RAGTOR_SERVER__MAX_CONNECTIONS", "12"},
            {"RAGTOR_SERVER__HEADER_TIMEOUT_S", "1"},
            {"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "150"}};
  }
};

TEST_F(admission_test, the_fifth_concurrent_stream_gets_503_and_nothing_is_stored) {
  std::vector<sse_stream> open;
  for (int i = 0; i < 4; ++i) {
    open.push_back(open_sse(port(), chat_stream_path,
                            chat_body("holder-" + std::to_string(i), "hold",
                                      "Who designed the Port Quellin lighthouse?")));
    ASSERT_EQ(open.back().status(), 200);
    auto first = open.back().next_event(30s);
    ASSERT_TRUE(first) << "stream " << i << " sent nothing";
  }
  auto fifth = request(port(), "POST", std::string{chat_stream_path},
                       chat_body("fifth", "refused", "Who designed the Port Quellin lighthouse?"));
  EXPECT_EQ(fifth.status, 503) << fifth.body;
  EXPECT_EQ(fifth.header("retry-after"), "1");
  auto fifth_json = request(port(), "POST", std::string{chat_path},
                            chat_body("fifth", "refused", "Who designed it?"));
  EXPECT_EQ(fifth_json.status, 503);
  // Other routes are still served.
  EXPECT_TRUE(healthy());
  EXPECT_EQ(db().conversation_count("fifth"), 0);
  // A finished stream gives its place back.
  auto finished = read_stream(open.front(), 120s);
  ASSERT_TRUE(finished.done) << finished.statuses();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  int status = 503;
  while (status == 503 && std::chrono::steady_clock::now() < deadline)
    status = request(port(), "POST", std::string{chat_path},
                     chat_body("sixth", "later", "Who designed the lighthouse?"), {}, 60s)
                 .status;
  EXPECT_EQ(status, 200);
}

TEST_F(admission_test, a_workflow_tool_on_a_host_not_allowed_is_refused_with_the_field_named) {
  auto kb = [](const std::string& url, const std::string& name) {
    return R"({"name":")" + name + R"(","answer_mode":"workflow","workflow":{"tools":[{"name":"t","url":")"
           + url + R"("}],"intents":[{"l2":"a","description":"a","sources":["tool:t"]}]}})";
  };
  auto refused = request(port(), "POST", "/api/v1/kbs", kb("http://10.20.30.40:9/hook", "leaky"));
  EXPECT_EQ(refused.status, 400) << refused.body;
  auto j = json::parse(refused.body);
  EXPECT_EQ(j.str("/error/field"), "workflow.tools[0].url");
  EXPECT_NE(j.str("/error/message").find("10.20.30.40"), std::string::npos);
  EXPECT_EQ(request(port(), "GET", "/api/v1/kbs/leaky").status, 404) << "nothing was created";
  // Loopback is allowed by default.
  auto local = request(port(), "POST", "/api/v1/kbs", kb("http://127.0.0.1:9/hook", "local"));
  EXPECT_EQ(local.status, 201) << local.body;
}

// A TCP connection to the server that sends nothing unless told.
class raw_connection {
public:
  // receive_buffer > 0: a tiny receive window (set before connecting).
  explicit raw_connection(uint16_t port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect failed");
  }
  ~raw_connection() { ::close(fd_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  void send(std::string_view bytes) { (void)::write(fd_, bytes.data(), bytes.size()); }

  // Reads until the server closes the connection or `timeout` passes;
  // false on timeout.
  bool read_until_closed(std::chrono::milliseconds timeout, std::string& out) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char buf[4096];
      auto n = ::read(fd_, buf, sizeof buf);
      if (n <= 0)
        return true;
      out.append(buf, static_cast<size_t>(n));
    }
  }

private:
  int fd_ = -1;
};

TEST_F(admission_test, connections_past_the_cap_are_refused_and_the_others_served) {
  std::vector<std::unique_ptr<raw_connection>> idle;
  for (int i = 0; i < 12; ++i)
    idle.push_back(std::make_unique<raw_connection>(port()));
  // The thirteenth: a short 503 and closed.
  auto refused = request(port(), "GET", "/healthz");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.header("retry-after"), "1");
  // An open connection is still served (accepted before the cap was hit).
  idle.back()->send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string reply;
  EXPECT_TRUE(idle.back()->read_until_closed(10s, reply));
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
}

TEST_F(admission_test, a_header_sent_byte_by_byte_is_cut_at_the_header_deadline) {
  raw_connection slow{port()};
  std::string request_text = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaa\r\n\r\n";
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  std::string reply;
  // One byte every 200 ms (the behaviour under test), checking for the
  // close in between: [server] header_timeout_s = 1 here.
  for (size_t i = 0; i < request_text.size() && !closed; ++i) {
    slow.send(request_text.substr(i, 1));
    closed = slow.read_until_closed(200ms, reply);
  }
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(closed) << "the server waited for the whole slow header";
  EXPECT_EQ(reply.find("200 OK"), std::string::npos) << reply;
  EXPECT_LT(took, 5s);
}

// Open file descriptors of a process.
size_t open_fds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] auto& e :
       std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/fd"})
    ++n;
  return n;
}

class write_deadline_test : public ragtor_server_test {
protected:
  env_vars server_env() const override { return {{"RAGTOR_SERVER__WRITE_TIMEOUT_S", "1"}}; }
};

TEST_F(write_deadline_test, a_client_that_never_reads_a_large_reply_is_cut) {
  {
    // 60000 keys with long tenants: a GET /admin/api/keys reply of ~30 MB,
    // far more than the socket buffers hold.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db().db_path().c_str(), &raw), SQLITE_OK);
    std::unique_ptr<sqlite3, int (*)(sqlite3*)> conn{raw, sqlite3_close};
    sqlite3_busy_timeout(raw, 5000);
    ASSERT_EQ(sqlite3_exec(raw, "BEGIN", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw,
                                 "INSERT INTO api_keys (id, name, hash, tenant, scopes, created_at) "
                                 "VALUES (?1, ?1, ?1, ?2, 'chat', 1)",
                                 -1, &st, nullptr),
              SQLITE_OK);
    std::string tenant(400, 't');
    for (int i = 0; i < 60000; ++i) {
      auto id = "bulk-" + std::to_string(i);
      sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, tenant.c_str(), -1, SQLITE_STATIC);
      ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
      sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    ASSERT_EQ(sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  auto pid = server().pid();
  auto baseline = open_fds(pid);
  raw_connection reader{port(), 4096};
  reader.send("GET /admin/api/keys HTTP/1.1\r\nHost: x\r\n\r\n");
  // The server holds the connection while it writes and cuts it once the
  // write deadline (1 s here) passed; it logs the cut after closing the
  // descriptor (the close cannot be seen from the client: with its window
  // full the server's FIN never arrives).
  ASSERT_TRUE(server().wait_for_log("connection cut: the client did not take a reply", 1, 20s))
      << "a client that does not read holds its connection past the deadline\n"
      << server().stderr_tail();
  EXPECT_LE(open_fds(pid), baseline) << "the cut connection's descriptor is still open";
  EXPECT_TRUE(healthy());
}

// CPU seconds (user + system) a process used so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat{std::istreambuf_iterator<char>{in}, {}};
  std::istringstream fields{stat.substr(stat.rfind(')') + 2)};
  std::string skip;
  for (int i = 0; i < 11; ++i)
    fields >> skip;  // state .. cmajflt
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(accept_backoff, out_of_file_descriptors_the_listener_backs_off_and_recovers) {
  temp_dir tmp{"ragtor-emfile"};
  // 64 descriptors (soft and hard, so the server cannot raise them): far
  // fewer than the connections below.
  ragtor_process server{{"/usr/bin/prlimit", "--nofile=64:64", ragtor_binary(), "serve", "--listen",
                         "127.0.0.1:0", "--data-dir", (tmp.path() / "data").string()},
                        "ragtor listening on http://",
                        {{"RAGTOR_SERVER__MAX_CONNECTIONS", "0"}}};
  std::vector<std::unique_ptr<raw_connection>> flood;
  for (int i = 0; i < 100; ++i)
    flood.push_back(std::make_unique<raw_connection>(server.port()));
  // The window: from the first "accept failed" warning until the third
  // (logged at most once per second, so at least 2 s out of descriptors).
  // A listener spinning on EMFILE burns a core all along; one that backs
  // off sleeps.
  ASSERT_TRUE(server.wait_for_log("accept failed", 1, 30s)) << "descriptors never ran out";
  auto cpu_before = cpu_seconds(server.pid());
  ASSERT_TRUE(server.wait_for_log("accept failed", 3, 30s)) << server.stderr_tail();
  auto cpu_used = cpu_seconds(server.pid()) - cpu_before;
  EXPECT_LT(cpu_used, 0.5) << "the accept loop spins while out of descriptors";
  auto log = server.stderr_tail(1 << 20);
  size_t warnings = 0;
  for (auto at = log.find("accept failed"); at != std::string::npos;
       at = log.find("accept failed", at + 1))
    ++warnings;
  EXPECT_GE(warnings, 1u) << "descriptors never ran out: the test proves nothing\n" << log;
  EXPECT_LE(warnings, 4u) << "logged more than once per second\n" << log;
  // Once the clients go away, the server serves again.
  flood.clear();
  auto deadline = std::chrono::steady_clock::now() + 20s;
  int status = 0;
  while (status != 200 && std::chrono::steady_clock::now() < deadline) {
    try {
      status = request(server.port(), "GET", "/healthz", "", {}, 2s).status;
    } catch (const std::exception&) {
      status = 0;
    }
  }
  EXPECT_EQ(status, 200) << server.stderr_tail();
}

// The soft and hard open-file limits of a running process.
std::pair<uint64_t, uint64_t> open_file_limits_of(int pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/limits"};
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("Max open files")) {
      std::istringstream fields{line.substr(std::string_view{"Max open files"}.size())};
      uint64_t soft = 0, hard = 0;
      fields >> soft >> hard;
      return {soft, hard};
    }
  return {0, 0};
}

// Whether this process may raise its hard limits (CAP_SYS_RESOURCE, bit
// 24 of the effective capabilities; root in a container may lack it).
bool may_raise_hard_limits() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("CapEff:"))
      return (std::stoull(line.substr(7), nullptr, 16) >> 24) & 1;
  return false;
}

// `serve` raises the open-file limit to what the configured server needs:
// a descriptor per client connection ([server] max_connections) and per
// model connection ([llm] max_concurrency), and 256 more. Above the hard
// limit it raises that too when it may (root); otherwise it warns with
// what is needed. Below it, only the soft limit goes up, as before.
TEST(open_files, the_limit_is_raised_to_what_the_connections_need) {
  struct started {
    uint64_t soft, hard;
    std::string log;
  };
  auto start = [](const std::string& max_connections) {
    temp_dir tmp{"ragtor-nofile"};
    ragtor_process server{{"/usr/bin/prlimit", "--nofile=256:512", ragtor_binary(), "serve",
                           "--listen", "127.0.0.1:0", "--data-dir",
                           (tmp.path() / "data").string()},
                          "ragtor listening on http://",
                          {{"RAGTOR_SERVER__MAX_CONNECTIONS", max_connections},
                           {"RAGTOR_LLM__MAX_CONCURRENCY", "16"}}};
    auto [soft, hard] = open_file_limits_of(server.pid());
    return started{soft, hard, server.stderr_tail(1 << 16)};
  };
  // 100 + 16 + 256 = 372 fit under the hard limit of 512.
  auto fits = start("100");
  EXPECT_EQ(fits.soft, 512u) << fits.log;
  EXPECT_EQ(fits.hard, 512u) << fits.log;
  EXPECT_EQ(fits.log.find("is below the"), std::string::npos) << fits.log;
  // 1000 + 16 + 256 = 1272 do not.
  auto needs_more = start("1000");
  if (may_raise_hard_limits()) {  // ragtor runs with the same capabilities
    EXPECT_EQ(needs_more.soft, 1272u) << needs_more.log;
    EXPECT_EQ(needs_more.hard, 1272u) << needs_more.log;
  } else {
    EXPECT_EQ(needs_more.soft, 512u) << needs_more.log;
    EXPECT_EQ(needs_more.hard, 512u) << needs_more.log;
    EXPECT_NE(needs_more.log.find("open file limit 512 is below the 1272"), std::string::npos)
        << needs_more.log;
  }
  // No cap on connections: the soft limit to the hard one, nothing more.
  auto no_cap = start("0");
  EXPECT_EQ(no_cap.soft, 512u) << no_cap.log;
  EXPECT_EQ(no_cap.hard, 512u) << no_cap.log;
}

// The value of `name` in a running process's environment (nullopt: unset).
std::optional<std::string> environment_of(int pid, const std::string& name) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/environ"};
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry.starts_with(name + "="))
      return entry.substr(name.size() + 1);
  return std::nullopt;
}

// `serve` starts itself once again (same process) with glibc's per-thread
// cache at 64 chunks per size, unless the operator set GLIBC_TUNABLES: then
// it runs with theirs, and an empty one keeps glibc's defaults.
TEST(allocator, serve_sizes_the_per_thread_cache_unless_the_operator_did) {
  auto tunables_of = [](const env_vars& env) {
    temp_dir tmp{"ragtor-tunables"};
    ragtor_process server{tmp.path() / "data", env};
    return std::pair{environment_of(server.pid(), "GLIBC_TUNABLES"), server.stderr_tail(1 << 16)};
  };
  if (!std::getenv("GLIBC_TUNABLES")) {
    auto [set, log] = tunables_of({});
    EXPECT_EQ(set, "glibc.malloc.tcache_count=64") << log;
    EXPECT_NE(log.find("allocator: GLIBC_TUNABLES=glibc.malloc.tcache_count=64"),
              std::string::npos)
        << log;
  }
  auto [theirs, log] = tunables_of({{"GLIBC_TUNABLES", "glibc.malloc.tcache_count=16"}});
  EXPECT_EQ(theirs, "glibc.malloc.tcache_count=16") << log;
  auto [empty, quiet] = tunables_of({{"GLIBC_TUNABLES", ""}});
  EXPECT_EQ(empty, "") << quiet;
  EXPECT_EQ(quiet.find("allocator:"), std::string::npos) << quiet;
}

}  // namespace
}  // namespace ragtor::test
