#include "config/config.hpp"
#include "protocol/kb_settings.hpp"

#include <unistd.h>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "protocol/errc.hpp"

namespace ragtor {
namespace {

using env_map = std::map<std::string, std::string>;

// A TOML file in the temp directory, removed afterwards.
class temp_toml {
public:
  explicit temp_toml(std::string_view text) {
    path_ = std::filesystem::temp_directory_path()
            / ("ragtor_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++)
               + ".toml");
    std::ofstream{path_} << text;
  }
  ~temp_toml() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

std::string load_error(std::string_view toml_text, const env_map& env = {}) {
  temp_toml file{toml_text};
  auto cfg = load_config(file.path(), env);
  EXPECT_FALSE(cfg) << toml_text;
  if (cfg)
    return {};
  EXPECT_EQ(code_of(cfg.error()), errc::invalid_request);
  return error_message(cfg.error());
}

std::string env_error(const env_map& env) {
  auto cfg = load_config({}, env);
  EXPECT_FALSE(cfg);
  return cfg ? std::string{} : error_message(cfg.error());
}

TEST(config, documented_file_equals_defaults) {
  auto cfg = load_config(std::filesystem::path{RAGTOR_SOURCE_DIR} / "config" / "ragtor.toml", {});
  ASSERT_TRUE(cfg) << error_message(cfg.error());
  EXPECT_TRUE(*cfg == config{}) << "config/ragtor.toml and config/config.hpp disagree";
  // Spot checks, so a failure above is easy to locate.
  EXPECT_EQ(cfg->server.listen, "127.0.0.1:8080");
  EXPECT_EQ(cfg->server.max_body_bytes, size_t{1} << 20);
  EXPECT_EQ(cfg->server.max_message_bytes, size_t{32} << 10);
  EXPECT_EQ(cfg->router.min_confidence, 0.75);
  EXPECT_EQ(cfg->retrieval.bm25_k1, 0.9);
  EXPECT_EQ(cfg->log.level, "info");
}

TEST(config, documented_file_mentions_every_key) {
  // A key documented nowhere would silently keep its default: make sure
  // setting every documented key to a non-default value changes the config.
  temp_toml file{R"(
data_dir = "d"
[server]
listen = "0.0.0.0:9"
io_threads = 3
max_body_bytes = 2000
max_message_bytes = 1000
turn_timeout_s = 7
shutdown_grace_s = 0
max_streams = 4
max_connections = 0
idle_timeout_s = 2
header_timeout_s = 3
body_timeout_s = 4
write_timeout_s = 5
max_header_bytes = 4096
max_url_bytes = 512
[sse]
heartbeat_s = 1
write_timeout_s = 2
initial_credit = 3
max_pending_bytes = 4
direct_writes = false
[store]
backend = "sqlite"
sqlite_path = "x.db"
postgres_dsn = "host=h"
flush_max_batch = 5
read_connections = 3
[router]
default_kb = "edu"
default_agent_type = "graph_agent"
min_confidence = 0.5
[retrieval]
top_k = 9
chunk_max_chars = 10
chunk_overlap_chars = 0
bm25_k1 = 1.2
bm25_b = 1
agent_workers = 3
[generator]
provider = "openai"
extractive_max_sentences = 1
extractive_pace_ms = 20
[llm]
base_url = "https://models.example/v1"
model = "m1"
max_concurrency = 3
[memory]
window = 0
[session]
idle_timeout_s = 1
max_queued_turns = 1
early_start = false
[actors]
scheduler_threads = 4
[log]
level = "debug"
[auth]
mode = "api_key"
allow_unauthenticated = true
admin_token = "t0ken"
key_refresh_ms = 100
[security]
allowed_outbound_hosts = "tools.internal,models.example"
)"};
  auto cfg = load_config(file.path(), {});
  ASSERT_TRUE(cfg) << error_message(cfg.error());
  EXPECT_EQ(cfg->data_dir, "d");
  EXPECT_EQ(cfg->server.listen, "0.0.0.0:9");
  EXPECT_EQ(cfg->server.io_threads, 3);
  EXPECT_EQ(cfg->server.max_body_bytes, 2000u);
  EXPECT_EQ(cfg->server.max_message_bytes, 1000u);
  EXPECT_EQ(cfg->server.turn_timeout_s, 7);
  EXPECT_EQ(cfg->server.shutdown_grace_s, 0);
  EXPECT_EQ(cfg->sse.heartbeat_s, 1);
  EXPECT_EQ(cfg->sse.write_timeout_s, 2);
  EXPECT_EQ(cfg->sse.initial_credit, 3);
  EXPECT_EQ(cfg->sse.max_pending_bytes, 4u);
  EXPECT_FALSE(cfg->sse.direct_writes);
  EXPECT_EQ(cfg->store.backend, "sqlite");
  EXPECT_EQ(cfg->store.sqlite_path, "x.db");
  EXPECT_EQ(cfg->store.postgres_dsn, "host=h");
  EXPECT_EQ(cfg->store.flush_max_batch, 5);
  EXPECT_EQ(cfg->store.read_connections, 3);
  EXPECT_EQ(cfg->router.default_kb, "edu");
  EXPECT_EQ(cfg->router.default_agent_type, "graph_agent");
  EXPECT_EQ(cfg->router.min_confidence, 0.5);
  EXPECT_EQ(cfg->retrieval.top_k, 9);
  EXPECT_EQ(cfg->retrieval.chunk_max_chars, 10u);
  EXPECT_EQ(cfg->retrieval.chunk_overlap_chars, 0u);
  EXPECT_EQ(cfg->retrieval.bm25_k1, 1.2);
  EXPECT_EQ(cfg->retrieval.bm25_b, 1.0);
  EXPECT_EQ(cfg->retrieval.agent_workers, 3);
  EXPECT_EQ(cfg->generator.provider, "openai");
  EXPECT_EQ(cfg->llm.base_url, "https://models.example/v1");
  EXPECT_EQ(cfg->llm.model, "m1");
  EXPECT_EQ(cfg->llm.max_concurrency, 3);
  EXPECT_EQ(cfg->generator.extractive_max_sentences, 1);
  EXPECT_EQ(cfg->generator.extractive_pace_ms, 20);
  EXPECT_EQ(cfg->memory.window, 0);
  EXPECT_EQ(cfg->session.idle_timeout_s, 1);
  EXPECT_EQ(cfg->session.max_queued_turns, 1);
  EXPECT_FALSE(cfg->session.early_start);
  EXPECT_EQ(cfg->actors.scheduler_threads, 4);
  EXPECT_EQ(cfg->log.level, "debug");
  EXPECT_EQ(cfg->server.max_streams, 4);
  EXPECT_EQ(cfg->server.max_connections, 0);
  EXPECT_EQ(cfg->server.idle_timeout_s, 2);
  EXPECT_EQ(cfg->server.header_timeout_s, 3);
  EXPECT_EQ(cfg->server.body_timeout_s, 4);
  EXPECT_EQ(cfg->server.write_timeout_s, 5);
  EXPECT_EQ(cfg->server.max_header_bytes, 4096u);
  EXPECT_EQ(cfg->server.max_url_bytes, 512u);
  EXPECT_EQ(cfg->auth.mode, "api_key");
  EXPECT_TRUE(cfg->auth.allow_unauthenticated);
  EXPECT_EQ(cfg->auth.admin_token, "t0ken");
  EXPECT_EQ(cfg->auth.key_refresh_ms, 100);
  EXPECT_EQ(cfg->security.allowed_outbound_hosts, "tools.internal,models.example");
}

TEST(config, auth_section_from_environment_and_validated) {
  auto cfg = load_config({}, {{"RAGTOR_AUTH__MODE", "api_key"},
                              {"RAGTOR_AUTH__ADMIN_TOKEN", "from-env"},
                              {"RAGTOR_AUTH__ALLOW_UNAUTHENTICATED", "true"}});
  ASSERT_TRUE(cfg) << error_message(cfg.error());
  EXPECT_EQ(cfg->auth.mode, "api_key");
  EXPECT_EQ(cfg->auth.admin_token, "from-env");
  EXPECT_TRUE(cfg->auth.allow_unauthenticated);
  auto bad_mode = load_config({}, {{"RAGTOR_AUTH__MODE", "password"}});
  ASSERT_FALSE(bad_mode);
  EXPECT_NE(error_message(bad_mode.error()).find("auth.mode"), std::string::npos);
  auto bad_bool = load_config({}, {{"RAGTOR_AUTH__ALLOW_UNAUTHENTICATED", "yes please"}});
  ASSERT_FALSE(bad_bool);
  EXPECT_NE(error_message(bad_bool.error()).find("true or false"), std::string::npos);
}

TEST(config, empty_path_means_defaults) {
  auto cfg = load_config({}, {});
  ASSERT_TRUE(cfg) << error_message(cfg.error());
  EXPECT_TRUE(*cfg == config{});
}

TEST(config, missing_file_is_an_error) {
  auto cfg = load_config("/nonexistent/ragtor.toml", {});
  ASSERT_FALSE(cfg);
  EXPECT_NE(error_message(cfg.error()).find("/nonexistent/ragtor.toml"), std::string::npos);
}

TEST(config, syntax_error_names_file_and_line) {
  auto msg = load_error("[server]\nlisten = \n");
  EXPECT_NE(msg.find(".toml:2:"), std::string::npos) << msg;
}

TEST(config, environment_overrides_file) {
  temp_toml file{"[server]\nlisten = \"127.0.0.1:1\"\nio_threads = 4\n"};
  auto cfg = load_config(file.path(), {{"RAGTOR_SERVER__LISTEN", "0.0.0.0:0"},
                                       {"RAGTOR_SERVER__MAX_BODY_BYTES", "4096"},
                                       {"RAGTOR_SERVER__MAX_MESSAGE_BYTES", "1024"},
                                       {"RAGTOR_ROUTER__MIN_CONFIDENCE", "0.5"},
                                       {"RAGTOR_RETRIEVAL__AGENT_WORKERS", "6"},
                                       {"RAGTOR_LOG__LEVEL", "debug"},
                                       {"RAGTOR_DATA_DIR", "/var/lib/ragtor"},
                                       {"RAGTOR_UNRELATED", "ignored"},
                                       {"PATH", "/bin"}});
  ASSERT_TRUE(cfg) << error_message(cfg.error());
  EXPECT_EQ(cfg->server.listen, "0.0.0.0:0");
  EXPECT_EQ(cfg->server.io_threads, 4);  // from the file
  EXPECT_EQ(cfg->server.max_body_bytes, 4096u);
  EXPECT_EQ(cfg->server.max_message_bytes, 1024u);
  EXPECT_EQ(cfg->router.min_confidence, 0.5);
  EXPECT_EQ(cfg->retrieval.agent_workers, 6);
  EXPECT_EQ(cfg->log.level, "debug");
  EXPECT_EQ(cfg->data_dir, "/var/lib/ragtor");
}

TEST(config, environment_errors_name_variable_and_key) {
  auto msg = env_error({{"RAGTOR_SERVER__LISTN", "x"}});
  EXPECT_NE(msg.find("RAGTOR_SERVER__LISTN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("server.listn"), std::string::npos) << msg;
  msg = env_error({{"RAGTOR_SERVER__IO_THREADS", "two"}});
  EXPECT_NE(msg.find("server.io_threads"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integer"), std::string::npos) << msg;
  msg = env_error({{"RAGTOR_SERVER__IO_THREADS", "99999999999"}});
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  msg = env_error({{"RAGTOR_SERVER__MAX_BODY_BYTES", "-1"}});
  EXPECT_NE(msg.find("server.max_body_bytes"), std::string::npos) << msg;
  msg = env_error({{"RAGTOR_RETRIEVAL__BM25_B", "0.4x"}});
  EXPECT_NE(msg.find("retrieval.bm25_b"), std::string::npos) << msg;
  msg = env_error({{"RAGTOR_RETRIEVAL__AGENT_WORKERS", "-2"}});
  EXPECT_NE(msg.find("retrieval.agent_workers"), std::string::npos) << msg;
}

TEST(config, postgres_dsn_from_environment) {
  auto cfg = load_config({}, {{"POSTGRES_DSN", "postgresql://u@h/db"}});
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->store.postgres_dsn, "postgresql://u@h/db");
  cfg = load_config({}, {{"POSTGRES_HOST", "db"},
                         {"POSTGRES_PORT", "5433"},
                         {"POSTGRES_USER", "ragtor"},
                         {"POSTGRES_PASSWORD", "it's"},
                         {"POSTGRES_DB", "chat"}});
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->store.postgres_dsn,
            R"(host='db' port='5433' user='ragtor' password='it\'s' dbname='chat')");
  // An explicit store.postgres_dsn wins.
  cfg = load_config({}, {{"RAGTOR_STORE__POSTGRES_DSN", "host=mine"}, {"POSTGRES_DSN", "other"}});
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->store.postgres_dsn, "host=mine");
  // backend = postgres without any DSN is an error.
  auto msg = env_error({{"RAGTOR_STORE__BACKEND", "postgres"}});
  EXPECT_NE(msg.find("store.postgres_dsn"), std::string::npos) << msg;
}

TEST(config, unknown_key_error_names_key) {
  auto msg = load_error("[server]\nlisen = \"0.0.0.0:1\"\n");
  EXPECT_NE(msg.find("\"server.lisen\""), std::string::npos) << msg;
  msg = load_error("[servr]\nlisten = \"0.0.0.0:1\"\n");
  EXPECT_NE(msg.find("\"servr\""), std::string::npos) << msg;
  msg = load_error("datadir = \"x\"\n");
  EXPECT_NE(msg.find("\"datadir\""), std::string::npos) << msg;
  msg = load_error("[server.tls]\ncert = \"x\"\n");
  EXPECT_NE(msg.find("\"server.tls\""), std::string::npos) << msg;
}

TEST(config, wrong_type_error_names_key) {
  auto msg = load_error("[server]\nio_threads = \"2\"\n");
  EXPECT_NE(msg.find("\"server.io_threads\" must be an integer"), std::string::npos) << msg;
  msg = load_error("[server]\nlisten = 8080\n");
  EXPECT_NE(msg.find("\"server.listen\" must be a string"), std::string::npos) << msg;
  msg = load_error("[router]\nmin_confidence = \"high\"\n");
  EXPECT_NE(msg.find("\"router.min_confidence\" must be a number"), std::string::npos) << msg;
  msg = load_error("[retrieval]\ntop_k = 2.5\n");
  EXPECT_NE(msg.find("\"retrieval.top_k\""), std::string::npos) << msg;
  msg = load_error("server = 1\n");
  EXPECT_NE(msg.find("\"server\" must be a table"), std::string::npos) << msg;
  msg = load_error("[server]\nmax_body_bytes = -5\n");
  EXPECT_NE(msg.find("\"server.max_body_bytes\""), std::string::npos) << msg;
  msg = load_error("[server]\nio_threads = 4294967296\n");
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

// Model, embedding and rerank endpoints are outbound calls: their hosts
// must be in [security] allowed_outbound_hosts (default: loopback only).
TEST(config, model_endpoints_must_name_an_allowed_host) {
  auto msg = load_error("[llm]\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n");
  EXPECT_NE(msg.find("\"llm.base_url\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("api.example.com"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allowed_outbound_hosts"), std::string::npos) << msg;
  msg = load_error("[retrieval]\nembedder = \"openai\"\nembedding_base_url = "
                   "\"http://embed.example:8000/v1\"\nembedding_model = \"e\"\n");
  EXPECT_NE(msg.find("\"retrieval.embedding_base_url\""), std::string::npos) << msg;
  msg = load_error("[retrieval]\nrerank_base_url = \"http://10.0.0.7:8001/v1\"\n"
                   "rerank_model = \"r\"\n");
  EXPECT_NE(msg.find("\"retrieval.rerank_base_url\""), std::string::npos) << msg;
  // Listed (any case) or "*": accepted; loopback is allowed by default.
  for (auto* toml :
       {"[llm]\nbase_url = \"https://API.example.com/v1\"\nmodel = \"m\"\n"
        "[security]\nallowed_outbound_hosts = \"127.0.0.1,api.example.com\"\n",
        "[llm]\nbase_url = \"https://api.example.com/v1\"\nmodel = \"m\"\n"
        "[security]\nallowed_outbound_hosts = \"*\"\n",
        "[llm]\nbase_url = \"http://localhost:8000/v1\"\nmodel = \"m\"\n"}) {
    temp_toml file{toml};
    auto cfg = load_config(file.path(), {});
    EXPECT_TRUE(cfg) << toml << " -> " << (cfg ? "" : error_message(cfg.error()));
  }
}

TEST(config, validates_ranges) {
  auto check = [](std::string_view toml, std::string_view key) {
    auto msg = load_error(toml);
    EXPECT_NE(msg.find("\"" + std::string{key} + "\""), std::string::npos) << toml << " -> " << msg;
  };
  check("[server]\nio_threads = 0\n", "server.io_threads");
  check("[server]\nlisten = \"localhost\"\n", "server.listen");
  check("[server]\nlisten = \"localhost:70000\"\n", "server.listen");
  check("[server]\nmax_message_bytes = 2000000\n", "server.max_message_bytes");
  check("[sse]\nheartbeat_s = 0\n", "sse.heartbeat_s");
  check("[store]\nbackend = \"mysql\"\n", "store.backend");
  check("[router]\nmin_confidence = 1.5\n", "router.min_confidence");
  check("[router]\ndefault_agent_type = \"llm_agent\"\n", "router.default_agent_type");
  check("[router]\ndefault_kb = \"a b\"\n", "router.default_kb");
  check("[retrieval]\nchunk_overlap_chars = 800\n", "retrieval.chunk_overlap_chars");
  check("[retrieval]\nbm25_b = -0.1\n", "retrieval.bm25_b");
  check("[retrieval]\nrerank_base_url = \"127.0.0.1:8001\"\nrerank_model = \"r\"\n",
        "retrieval.rerank_base_url");
  check("[retrieval]\nrerank_base_url = \"http://127.0.0.1:8001/v1\"\n", "retrieval.rerank_model");
  check("[retrieval]\nrerank_timeout_ms = 0\n", "retrieval.rerank_timeout_ms");
  check("[session]\nmax_queued_turns = 0\n", "session.max_queued_turns");
  check("[actors]\nscheduler_threads = -1\n", "actors.scheduler_threads");
  check("[retrieval]\nagent_workers = -1\n", "retrieval.agent_workers");
  check("[log]\nlevel = \"verbose\"\n", "log.level");
  check("[generator]\nprovider = \"gpt\"\n", "generator.provider");
  check("[generator]\nprovider = \"openai\"\n", "llm.base_url");
  check("[llm]\nbase_url = \"ftp://x\"\nmodel = \"m\"\n", "llm.base_url");
  check("[llm]\nbase_url = \"http://127.0.0.1:1/v1\"\n", "llm.model");
  check("[llm]\ntemperature = 3.0\n", "llm.temperature");
  check("[llm]\nmax_concurrency = 0\n", "llm.max_concurrency");
  check("data_dir = \"\"\n", "data_dir");
  check("[summary]\nmode = \"always\"\n", "summary.mode");
  check("[summary]\nmode = \"model\"\n", "summary.mode");
  check("[summary]\nmin_messages = 0\n", "summary.min_messages");
  check("[summary]\nupdate_delta = 0\n", "summary.update_delta");
  check("[summary]\nregenerate_every = 0\n", "summary.regenerate_every");
}

TEST(config, parse_listen) {
  auto ok = [](std::string_view s, std::string_view host, uint16_t port) {
    auto r = parse_listen(s);
    ASSERT_TRUE(r) << s << ": " << error_message(r.error());
    EXPECT_EQ(r->first, host);
    EXPECT_EQ(r->second, port);
  };
  ok("127.0.0.1:8080", "127.0.0.1", 8080);
  ok("0.0.0.0:0", "0.0.0.0", 0);
  ok("localhost:65535", "localhost", 65535);
  ok("[::1]:443", "::1", 443);
  for (auto bad : {"", "127.0.0.1", ":8080", "host:", "host:65536", "host:-1", "host:80x",
                   "host:123456", "::1:80", "[::1]80", "[::1", "host: 80"}) {
    auto r = parse_listen(bad);
    EXPECT_FALSE(r) << "'" << bad << "' parsed";
    if (!r) {
      EXPECT_EQ(code_of(r.error()), errc::invalid_request);
    }
  }
}

TEST(config, current_environment_reads_process_environment) {
  ::setenv("RAGTOR_CONFIG_TEST_VAR", "a=b", 1);
  auto env = current_environment();
  EXPECT_EQ(env["RAGTOR_CONFIG_TEST_VAR"], "a=b");
  ::unsetenv("RAGTOR_CONFIG_TEST_VAR");
}

TEST(config, kb_tables_become_validated_kb_settings) {
  temp_toml file{R"(
[kbs.locks]
description = "Door locks"
answer_mode = "workflow"
enable_query_rewrite = true
temperature = 0.2

[kbs.locks.workflow]
business = "locks"

[[kbs.locks.workflow.intents]]
l2 = "battery"
description = "battery life"
sources = ["kb"]

[[kbs.locks.workflow.intents.slots]]
name = "model"
description = "lock model"
)"};
  auto cfg = load_config(file.path(), {});
  ASSERT_TRUE(cfg) << error_message(cfg.error());
  ASSERT_EQ(cfg->kbs.count("locks"), 1u);
  auto s = kb_settings_from_json(cfg->kbs.at("locks"));
  ASSERT_TRUE(s) << error_message(s.error());
  EXPECT_EQ(s->name, "locks");
  EXPECT_EQ(s->answer_mode, "workflow");
  EXPECT_TRUE(s->enable_query_rewrite);
  EXPECT_DOUBLE_EQ(s->temperature, 0.2);
  EXPECT_NE(s->workflow_json.find("\"model\""), std::string::npos) << s->workflow_json;

  auto err = load_error("[kbs.x]\nsearch_mode = \"fuzzy\"\n");
  EXPECT_NE(err.find("[kbs.x]"), std::string::npos) << err;
  EXPECT_NE(err.find("search_mode"), std::string::npos) << err;
  err = load_error("[kbs.x]\nname = \"y\"\n");
  EXPECT_NE(err.find("must not set name"), std::string::npos) << err;
  err = load_error("kbs = 3\n");
  EXPECT_NE(err.find("kbs"), std::string::npos) << err;
}

}  // namespace
}  // namespace ragtor
