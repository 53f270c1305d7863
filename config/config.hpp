// ragtor's configuration (DESIGN §10): one TOML file, documented key by key
// in config/ragtor.toml, overridable by RAGTOR_SECTION__KEY environment
// variables. Unknown keys and wrong types are errors, so typos never pass
// silently; loading also validates every range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <caf/expected.hpp>

namespace ragtor {

struct server_config {
  std::string listen = "127.0.0.1:8080";
  int io_threads = 2;
  size_t max_body_bytes = 1 << 20;
  size_t max_message_bytes = 32 << 10;
  size_t max_ingest_bytes = 64 << 20;
  int turn_timeout_s = 300;
  int shutdown_grace_s = 5;
  int max_planner_turns = 4096;
  int detach_grace_ms = 15000;
  // Admission and deadlines (docs/security.md); 0 = no cap.
  int max_streams = 1024;
  int max_connections = 4096;
  int idle_timeout_s = 60;
  int header_timeout_s = 10;
  int body_timeout_s = 60;
  int write_timeout_s = 30;
  size_t max_header_bytes = 16 << 10;
  size_t max_url_bytes = 8 << 10;
  bool operator==(const server_config&) const = default;
};

// [security] (docs/security.md).
struct security_config {
  // Comma-separated hosts outbound requests (workflow tool URLs) may go
  // to; "*" = any.
  std::string allowed_outbound_hosts = "127.0.0.1,::1,localhost";
  bool operator==(const security_config&) const = default;
};

// [auth] (docs/security.md).
struct auth_config {
  std::string mode = "off";  // off | api_key
  // Lets `serve` start with mode off on a non-loopback address (warned at
  // every start).
  bool allow_unauthenticated = false;
  std::string admin_token;  // bearer token of /admin/api/keys ("" = none)
  int key_refresh_ms = 2000;  // how often the key cache is reloaded
  bool operator==(const auth_config&) const = default;
};

// [admin] (docs/admin.md): the admin console, its API and /metrics.
struct admin_config {
  // Bearer token of /admin/api/... and /metrics ("" = none: [auth]
  // admin_token if set; without any token the console answers only on a
  // loopback listen address, and a non-loopback one refuses to start).
  std::string token;
  // false: every admin route answers 403 (and a non-loopback listen
  // address needs no token).
  bool enabled = true;
  int status_timeout_ms = 1000;  // one actor's `status` answer; a peer node gets twice that
  bool operator==(const admin_config&) const = default;
};

struct sse_config {
  int heartbeat_s = 15;
  int write_timeout_s = 5;
  int initial_credit = 16;
  size_t max_pending_bytes = 1 << 20;
  bool direct_writes = true;
  bool operator==(const sse_config&) const = default;
};

struct store_config_section {
  std::string backend = "auto";  // auto|sqlite|postgres
  std::string sqlite_path;       // "" = <data_dir>/ragtor.db
  std::string postgres_dsn;
  int flush_max_batch = 256;
  int read_connections = 2;
  bool postgres_prepared_statements = true;
  bool operator==(const store_config_section&) const = default;
};

struct router_config {
  std::string default_kb;  // used when the request names none; "" = general
  std::string default_agent_type = "hybrid_agent";
  double min_confidence = 0.75;
  std::string mode = "off";  // off | heuristic | llm
  int llm_timeout_ms = 5000;
  bool operator==(const router_config&) const = default;
};

struct retrieval_config {
  int top_k = 5;
  size_t chunk_max_chars = 800;
  size_t chunk_overlap_chars = 100;
  double bm25_k1 = 0.9;
  double bm25_b = 0.4;
  std::string embedder = "hashed";  // hashed | openai | none
  size_t hashed_dims = 256;
  std::string embedding_base_url;  // "" = llm.base_url
  std::string embedding_model;
  int embedding_batch = 64;
  size_t vector_exact_below = 100000;
  // An OpenAI-compatible /rerank endpoint for KBs with enable_rerank;
  // "" = the model in [llm] reranks listwise.
  std::string rerank_base_url;
  std::string rerank_model;
  int rerank_timeout_ms = 10000;
  // Workers per retrieval agent = queries of one (KB, agent type) searched
  // at once; 0 = one per core (at most actors.scheduler_threads when set).
  int agent_workers = 0;
  bool operator==(const retrieval_config&) const = default;
};

struct generator_config {
  std::string provider = "auto";
  int extractive_max_sentences = 3;
  int extractive_pace_ms = 0;
  bool operator==(const generator_config&) const = default;
};

// An OpenAI-compatible model server (vLLM, llama.cpp server, hosted APIs).
struct llm_config {
  std::string base_url;  // "" = no model configured
  std::string api_key;   // "" = OPENAI_API_KEY from the environment, if set
  std::string model;
  std::string ca_file;  // extra trusted CA certificates (PEM) for https
  int connect_timeout_ms = 5000;
  int first_token_timeout_s = 60;
  int idle_timeout_s = 30;
  int total_timeout_s = 300;
  int max_retries = 2;
  int max_concurrency = 16;
  int max_queue = 64;
  double temperature = 0.2;
  int max_tokens = 1024;
  int prompt_budget_tokens = 6000;
  bool operator==(const llm_config&) const = default;
};

struct memory_config {
  int window = 6;
  int recall_cache_mb = 16;
  int recall_index_mb = 64;
  bool operator==(const memory_config&) const = default;
};

struct summary_config {
  std::string mode = "auto";  // auto | model | extractive | off
  int min_messages = 10;
  int update_delta = 5;
  int regenerate_every = 10;
  int max_tokens = 400;
  int max_input_tokens = 6000;
  int timeout_s = 120;
  bool operator==(const summary_config&) const = default;
};

struct session_config {
  int idle_timeout_s = 600;
  int max_queued_turns = 8;
  bool early_start = true;
  bool operator==(const session_config&) const = default;
};

struct actors_config {
  int scheduler_threads = 0;  // 0 = CAF default (one per core, at least 4)
  bool operator==(const actors_config&) const = default;
};

struct log_config {
  std::string level = "info";
  bool operator==(const log_config&) const = default;
};

// [cluster] (docs/cluster.md). An empty listen = a single node.
struct cluster_config {
  std::string node_name;  // unique; "" = host name + ":" + the HTTP port
  std::string listen;     // BASP host:port ("" = no cluster)
  std::string seeds;      // comma-separated host:port of other nodes
  std::string roles = "frontend,retrieval";  // comma-separated
  std::string kbs = "*";  // KBs whose agents this node hosts; "*" = all
  int heartbeat_ms = 500;
  int failure_timeout_ms = 2000;
  // How often a node looks for KB versions other nodes stored.
  int kb_sync_ms = 1000;
  // TLS for BASP (caf_openssl): all three or none.
  std::string tls_certificate;
  std::string tls_key;
  std::string tls_ca;
  bool operator==(const cluster_config&) const = default;
};

struct config {
  std::string data_dir = "data";
  server_config server;
  sse_config sse;
  store_config_section store;
  router_config router;
  retrieval_config retrieval;
  generator_config generator;
  llm_config llm;
  memory_config memory;
  summary_config summary;
  session_config session;
  actors_config actors;
  log_config log;
  auth_config auth;
  admin_config admin;
  security_config security;
  cluster_config cluster;
  // [kbs.<name>]: knowledge-base settings (kb_settings, docs/pipelines.md)
  // as JSON objects by KB name; at start each is written to the KB's
  // kb.json (creating the KB when it does not exist), so the file wins
  // over settings changed through the API since.
  std::map<std::string, std::string> kbs;
  bool operator==(const config&) const = default;
};

// Loads `path` (a missing file is an error; an empty path means "defaults
// only"), then applies environment overrides from `env`:
// - RAGTOR_DATA_DIR sets data_dir;
// - RAGTOR_<SECTION>__<KEY> sets section.key (e.g. RAGTOR_SERVER__LISTEN);
//   an unknown section or key in this form is an error;
// - when store.postgres_dsn is still empty, POSTGRES_DSN, or else a DSN
//   built from POSTGRES_HOST/PORT/USER/PASSWORD/DB (seed 000 §5.3).
// Unknown sections/keys and wrong types are errc::invalid_request naming
// the key; so are out-of-range values.
caf::expected<config> load_config(const std::filesystem::path& path,
                                  const std::map<std::string, std::string>& env);

// The process environment as a map, for load_config.
std::map<std::string, std::string> current_environment();

// Parses "HOST:PORT" or "[IPv6]:PORT"; port 0 (ephemeral) is allowed.
caf::expected<std::pair<std::string, uint16_t>> parse_listen(std::string_view listen);

}  // namespace ragtor
