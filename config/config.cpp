#include "config/config.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <variant>
#include <vector>

#include <unistd.h>

#include <toml++/toml.h>

#include "llm/base_url.hpp"
#include "protocol/chat_request_json.hpp"
#include "protocol/errc.hpp"
#include "protocol/worker_name.hpp"
#include "protocol/kb_settings.hpp"

namespace ragtor {

namespace {

// One configurable value: where it lives in the TOML file and in `config`.
// The same table drives the file, the environment and the error messages,
// so a key cannot be readable from one and not the other.
using slot = std::variant<std::string*, int*, size_t*, double*, bool*>;

struct binding {
  std::string_view section;  // "" for top-level keys
  std::string_view key;
  slot target;
};

std::vector<binding> bindings_of(config& c) {
  return {
      {"", "data_dir", &c.data_dir},
      {"server", "listen", &c.server.listen},
      {"server", "io_threads", &c.server.io_threads},
      {"server", "max_body_bytes", &c.server.max_body_bytes},
      {"server", "max_message_bytes", &c.server.max_message_bytes},
      {"server", "max_ingest_bytes", &c.server.max_ingest_bytes},
      {"server", "turn_timeout_s", &c.server.turn_timeout_s},
      {"server", "max_planner_turns", &c.server.max_planner_turns},
      {"server", "detach_grace_ms", &c.server.detach_grace_ms},
      {"server", "shutdown_grace_s", &c.server.shutdown_grace_s},
      {"server", "max_streams", &c.server.max_streams},
      {"server", "max_connections", &c.server.max_connections},
      {"server", "idle_timeout_s", &c.server.idle_timeout_s},
      {"server", "header_timeout_s", &c.server.header_timeout_s},
      {"server", "body_timeout_s", &c.server.body_timeout_s},
      {"server", "write_timeout_s", &c.server.write_timeout_s},
      {"server", "max_header_bytes", &c.server.max_header_bytes},
      {"server", "max_url_bytes", &c.server.max_url_bytes},
      {"auth", "mode", &c.auth.mode},
      {"auth", "allow_unauthenticated", &c.auth.allow_unauthenticated},
      {"auth", "admin_token", &c.auth.admin_token},
      {"auth", "key_refresh_ms", &c.auth.key_refresh_ms},
      {"admin", "token", &c.admin.token},
      {"admin", "enabled", &c.admin.enabled},
      {"admin", "status_timeout_ms", &c.admin.status_timeout_ms},
      {"security", "allowed_outbound_hosts", &c.security.allowed_outbound_hosts},
      {"cluster", "node_name", &c.cluster.node_name},
      {"cluster", "listen", &c.cluster.listen},
      {"cluster", "seeds", &c.cluster.seeds},
      {"cluster", "roles", &c.cluster.roles},
      {"cluster", "kbs", &c.cluster.kbs},
      {"cluster", "heartbeat_ms", &c.cluster.heartbeat_ms},
      {"cluster", "failure_timeout_ms", &c.cluster.failure_timeout_ms},
      {"cluster", "kb_sync_ms", &c.cluster.kb_sync_ms},
      {"cluster", "tls_certificate", &c.cluster.tls_certificate},
      {"cluster", "tls_key", &c.cluster.tls_key},
      {"cluster", "tls_ca", &c.cluster.tls_ca},
      {"sse", "heartbeat_s", &c.sse.heartbeat_s},
      {"sse", "write_timeout_s", &c.sse.write_timeout_s},
      {"sse", "initial_credit", &c.sse.initial_credit},
      {"sse", "max_pending_bytes", &c.sse.max_pending_bytes},
      {"sse", "direct_writes", &c.sse.direct_writes},
      {"store", "backend", &c.store.backend},
      {"store", "sqlite_path", &c.store.sqlite_path},
      {"store", "postgres_dsn", &c.store.postgres_dsn},
      {"store", "flush_max_batch", &c.store.flush_max_batch},
      {"store", "read_connections", &c.store.read_connections},
      {"store", "postgres_prepared_statements", &c.store.postgres_prepared_statements},
      {"router", "default_kb", &c.router.default_kb},
      {"router", "default_agent_type", &c.router.default_agent_type},
      {"router", "min_confidence", &c.router.min_confidence},
      {"router", "mode", &c.router.mode},
      {"router", "llm_timeout_ms", &c.router.llm_timeout_ms},
      {"retrieval", "top_k", &c.retrieval.top_k},
      {"retrieval", "chunk_max_chars", &c.retrieval.chunk_max_chars},
      {"retrieval", "chunk_overlap_chars", &c.retrieval.chunk_overlap_chars},
      {"retrieval", "bm25_k1", &c.retrieval.bm25_k1},
      {"retrieval", "bm25_b", &c.retrieval.bm25_b},
      {"retrieval", "embedder", &c.retrieval.embedder},
      {"retrieval", "hashed_dims", &c.retrieval.hashed_dims},
      {"retrieval", "embedding_base_url", &c.retrieval.embedding_base_url},
      {"retrieval", "embedding_model", &c.retrieval.embedding_model},
      {"retrieval", "embedding_batch", &c.retrieval.embedding_batch},
      {"retrieval", "vector_exact_below", &c.retrieval.vector_exact_below},
      {"retrieval", "rerank_base_url", &c.retrieval.rerank_base_url},
      {"retrieval", "rerank_model", &c.retrieval.rerank_model},
      {"retrieval", "rerank_timeout_ms", &c.retrieval.rerank_timeout_ms},
      {"retrieval", "agent_workers", &c.retrieval.agent_workers},
      {"generator", "provider", &c.generator.provider},
      {"generator", "extractive_max_sentences", &c.generator.extractive_max_sentences},
      {"generator", "extractive_pace_ms", &c.generator.extractive_pace_ms},
      {"llm", "base_url", &c.llm.base_url},
      {"llm", "api_key", &c.llm.api_key},
      {"llm", "model", &c.llm.model},
      {"llm", "ca_file", &c.llm.ca_file},
      {"llm", "connect_timeout_ms", &c.llm.connect_timeout_ms},
      {"llm", "first_token_timeout_s", &c.llm.first_token_timeout_s},
      {"llm", "idle_timeout_s", &c.llm.idle_timeout_s},
      {"llm", "total_timeout_s", &c.llm.total_timeout_s},
      {"llm", "max_retries", &c.llm.max_retries},
      {"llm", "max_concurrency", &c.llm.max_concurrency},
      {"llm", "max_queue", &c.llm.max_queue},
      {"llm", "temperature", &c.llm.temperature},
      {"llm", "max_tokens", &c.llm.max_tokens},
      {"llm", "prompt_budget_tokens", &c.llm.prompt_budget_tokens},
      {"memory", "window", &c.memory.window},
      {"memory", "recall_cache_mb", &c.memory.recall_cache_mb},
      {"memory", "recall_index_mb", &c.memory.recall_index_mb},
      {"summary", "mode", &c.summary.mode},
      {"summary", "min_messages", &c.summary.min_messages},
      {"summary", "update_delta", &c.summary.update_delta},
      {"summary", "regenerate_every", &c.summary.regenerate_every},
      {"summary", "max_tokens", &c.summary.max_tokens},
      {"summary", "max_input_tokens", &c.summary.max_input_tokens},
      {"summary", "timeout_s", &c.summary.timeout_s},
      {"session", "idle_timeout_s", &c.session.idle_timeout_s},
      {"session", "max_queued_turns", &c.session.max_queued_turns},
      {"session", "early_start", &c.session.early_start},
      {"actors", "scheduler_threads", &c.actors.scheduler_threads},
      {"log", "level", &c.log.level},
  };
}

std::string dotted(std::string_view section, std::string_view key) {
  if (section.empty())
    return std::string{key};
  return std::string{section} + "." + std::string{key};
}

std::string dotted(const binding& b) {
  return dotted(b.section, b.key);
}

caf::error config_error(std::string message) {
  return make_error(errc::invalid_request, std::move(message));
}

caf::error key_error(std::string_view key, std::string_view what) {
  return config_error("config key \"" + std::string{key} + "\" " + std::string{what});
}

const binding* find_binding(const std::vector<binding>& bs, std::string_view section,
                            std::string_view key) {
  auto i = std::find_if(bs.begin(), bs.end(),
                        [&](const binding& b) { return b.section == section && b.key == key; });
  return i == bs.end() ? nullptr : &*i;
}

bool is_section(const std::vector<binding>& bs, std::string_view name) {
  return !name.empty()
         && std::any_of(bs.begin(), bs.end(), [&](const binding& b) { return b.section == name; });
}

std::string_view type_name(const slot& s) {
  return std::visit(
      [](auto* p) -> std::string_view {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>)
          return "must be a string";
        else if constexpr (std::is_same_v<T, int>)
          return "must be an integer";
        else if constexpr (std::is_same_v<T, size_t>)
          return "must be a non-negative integer";
        else if constexpr (std::is_same_v<T, bool>)
          return "must be true or false";
        else
          return "must be a number";
      },
      s);
}

// Stores an integer into an int or size_t slot, checking its range.
template <class T>
caf::error store_integer(T* target, int64_t v, const std::string& name) {
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min())
      || static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())
      || (std::is_unsigned_v<T> && v < 0))
    return key_error(name, "is out of range (got " + std::to_string(v) + ")");
  *target = static_cast<T>(v);
  return {};
}

caf::error assign_from_toml(const binding& b, const toml::node& node) {
  auto name = dotted(b);
  auto wrong_type = [&] {
    std::string where;
    if (auto line = node.source().begin.line; line > 0)
      where = " (line " + std::to_string(line) + ")";
    return key_error(name, std::string{type_name(b.target)} + where);
  };
  return std::visit(
      [&](auto* target) -> caf::error {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, std::string>) {
          auto* s = node.as_string();
          if (!s)
            return wrong_type();
          *target = s->get();
          return {};
        } else if constexpr (std::is_same_v<T, bool>) {
          auto* b = node.as_boolean();
          if (!b)
            return wrong_type();
          *target = b->get();
          return {};
        } else if constexpr (std::is_same_v<T, double>) {
          if (auto* f = node.as_floating_point()) {
            *target = f->get();
            return {};
          }
          // `bm25_b = 1` is a number too.
          if (auto* i = node.as_integer()) {
            *target = static_cast<double>(i->get());
            return {};
          }
          return wrong_type();
        } else {
          auto* i = node.as_integer();
          if (!i)
            return wrong_type();
          return store_integer(target, i->get(), name);
        }
      },
      b.target);
}


caf::error assign_from_text(const binding& b, std::string_view text, std::string_view var) {
  auto fail = [&](std::string_view what) {
    return config_error("environment variable " + std::string{var} + ": config key \"" + dotted(b)
                        + "\" " + std::string{what});
  };
  return std::visit(
      [&](auto* target) -> caf::error {
        using T = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<T, std::string>) {
          *target = std::string{text};
          return {};
        } else if constexpr (std::is_same_v<T, bool>) {
          auto v = to_lower_ascii(text);
          if (v == "true" || v == "1")
            *target = true;
          else if (v == "false" || v == "0")
            *target = false;
          else
            return fail(type_name(b.target));
          return {};
        } else {
          T v{};
          auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          if (ec == std::errc::result_out_of_range)
            return fail("is out of range (got " + std::string{text} + ")");
          if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty())
            return fail(type_name(b.target));
          *target = v;
          return {};
        }
      },
      b.target);
}

// [kbs.<name>] tables: each one's JSON form (with "name"), validated as
// KB settings so a typo stops the start with the key named.
caf::error apply_kbs(const toml::node& node, std::map<std::string, std::string>& kbs) {
  auto* table = node.as_table();
  if (!table)
    return config_error("config section \"kbs\" must be a table of [kbs.<name>] tables");
  for (auto&& [name, kb] : *table) {
    auto* t = kb.as_table();
    if (!t)
      return config_error("[kbs." + std::string{name.str()} + "] must be a table");
    if (t->contains("name"))
      return config_error("[kbs." + std::string{name.str()}
                          + "] must not set name: the table's name is the KB's");
    toml::table copy = *t;
    copy.insert_or_assign("name", std::string{name.str()});
    std::ostringstream json;
    json << toml::json_formatter{copy};
    auto settings = kb_settings_from_json(json.str());
    if (!settings)
      return config_error("[kbs." + std::string{name.str()} + "]: " + error_message(settings.error()));
    kbs[std::string{name.str()}] = to_json(*settings);
  }
  return {};
}

caf::error apply_toml(const toml::table& root, std::vector<binding>& bs,
                      std::map<std::string, std::string>& kbs) {
  for (auto&& [k, node] : root) {
    auto key = k.str();
    if (key == "kbs") {
      if (auto err = apply_kbs(node, kbs))
        return err;
      continue;
    }
    if (auto* b = find_binding(bs, "", key)) {
      if (auto err = assign_from_toml(*b, node))
        return err;
      continue;
    }
    if (!is_section(bs, key))
      return config_error("unknown config section \"" + std::string{key} + "\"");
    auto* table = node.as_table();
    if (!table)
      return config_error("config section \"" + std::string{key} + "\" must be a table");
    for (auto&& [k2, node2] : *table) {
      auto* b = find_binding(bs, key, k2.str());
      if (!b)
        return config_error("unknown config key \"" + dotted(key, k2.str()) + "\"");
      if (auto err = assign_from_toml(*b, node2))
        return err;
    }
  }
  return {};
}


// RAGTOR_DATA_DIR and RAGTOR_<SECTION>__<KEY>. Other RAGTOR_* variables
// without "__" are left alone: they may belong to tools and tests.
caf::error apply_environment(const std::map<std::string, std::string>& env,
                             std::vector<binding>& bs) {
  constexpr std::string_view prefix = "RAGTOR_";
  for (auto& [var, text] : env) {
    std::string_view name = var;
    if (!name.starts_with(prefix))
      continue;
    name.remove_prefix(prefix.size());
    const binding* b = nullptr;
    if (name == "DATA_DIR") {
      b = find_binding(bs, "", "data_dir");
    } else if (auto sep = name.find("__"); sep != std::string_view::npos) {
      auto section = to_lower_ascii(name.substr(0, sep));
      auto key = to_lower_ascii(name.substr(sep + 2));
      b = find_binding(bs, section, key);
      if (!b)
        return config_error("environment variable " + var + " names unknown config key \""
                            + dotted(section, key) + "\"");
    } else {
      continue;
    }
    if (auto err = assign_from_text(*b, text, var))
      return err;
  }
  return {};
}

std::string env_value(const std::map<std::string, std::string>& env, const std::string& name) {
  auto i = env.find(name);
  return i == env.end() ? std::string{} : i->second;
}

// A libpq keyword/value pair with the value single-quoted and escaped.
void append_dsn_pair(std::string& dsn, std::string_view key, std::string_view value) {
  if (value.empty())
    return;
  if (!dsn.empty())
    dsn += ' ';
  dsn += key;
  dsn += "='";
  for (char c : value) {
    if (c == '\'' || c == '\\')
      dsn += '\\';
    dsn += c;
  }
  dsn += '\'';
}

// POSTGRES_DSN, else POSTGRES_HOST/PORT/USER/PASSWORD/DB (seed 000 §5.3).
std::string postgres_dsn_from(const std::map<std::string, std::string>& env) {
  if (auto dsn = env_value(env, "POSTGRES_DSN"); !dsn.empty())
    return dsn;
  if (env_value(env, "POSTGRES_HOST").empty())
    return {};
  std::string dsn;
  append_dsn_pair(dsn, "host", env_value(env, "POSTGRES_HOST"));
  append_dsn_pair(dsn, "port", env_value(env, "POSTGRES_PORT"));
  append_dsn_pair(dsn, "user", env_value(env, "POSTGRES_USER"));
  append_dsn_pair(dsn, "password", env_value(env, "POSTGRES_PASSWORD"));
  append_dsn_pair(dsn, "dbname", env_value(env, "POSTGRES_DB"));
  return dsn;
}

// Shortest text of a number ("0.5", not std::to_string's "0.500000").
template <class T>
std::string text_of(T value) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, value);
  return std::string{buf, res.ptr};
}

template <class T>
caf::error at_least(std::string_view key, T value, T min) {
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(value))
      return key_error(key, "must be a finite number");
  if (!(value >= min))
    return key_error(key, "must be >= " + text_of(min) + " (got " + text_of(value) + ")");
  return {};
}

caf::error in_unit_range(std::string_view key, double value) {
  if (!(value >= 0.0 && value <= 1.0))
    return key_error(key, "must be between 0 and 1 (got " + text_of(value) + ")");
  return {};
}

template <size_t N>
caf::error one_of(std::string_view key, const std::string& value,
                  const std::array<std::string_view, N>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end())
    return {};
  std::string list;
  for (auto a : allowed) {
    if (!list.empty())
      list += ", ";
    list += a;
  }
  return key_error(key, "must be one of " + list + " (got \"" + value + "\")");
}

// Every entry of a comma-separated list (blanks trimmed, empties dropped).
std::vector<std::string> list_of(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find(',', pos);
    if (end == std::string_view::npos)
      end = text.size();
    auto item = text.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    if (!item.empty())
      out.emplace_back(item);
    pos = end + 1;
  }
  return out;
}

caf::error validate_cluster(const config& c) {
  auto& k = c.cluster;
  if (!k.listen.empty()) {
    auto at = parse_listen(k.listen);
    if (!at)
      return config_error("config key \"cluster.listen\": " + error_message(at.error()));
    if (at->second == 0)
      return key_error("cluster.listen", "needs a fixed port (peers find a node by it)");
    bool postgres = c.store.backend == "postgres"
                    || (c.store.backend == "auto" && !c.store.postgres_dsn.empty());
    if (!postgres)
      return key_error("cluster.listen",
                       "a cluster needs the PostgreSQL store, the one store all nodes share: set "
                       "store.postgres_dsn (or store.backend = \"postgres\"), or leave "
                       "cluster.listen empty for a single node on SQLite");
  }
  for (auto& seed : list_of(k.seeds))
    if (auto at = parse_listen(seed); !at || at->second == 0)
      return key_error("cluster.seeds", "\"" + seed + "\" is not host:port");
  auto roles = list_of(k.roles);
  if (roles.empty())
    return key_error("cluster.roles", "must name frontend, retrieval or both");
  for (auto& r : roles)
    if (r != "frontend" && r != "retrieval")
      return key_error("cluster.roles", "must be frontend, retrieval or both (got \"" + r + "\")");
  for (auto& kb : list_of(k.kbs))
    if (kb != "*" && !is_valid_id(kb, 128))
      return key_error("cluster.kbs", "\"" + kb + "\" is not a KB name (or \"*\")");
  if (!k.node_name.empty() && !is_valid_id(k.node_name, 128))
    return key_error("cluster.node_name", "must be 1-128 characters of [A-Za-z0-9_.:@-]");
  if (auto e = at_least("cluster.heartbeat_ms", k.heartbeat_ms, 10))
    return e;
  if (k.failure_timeout_ms < 2 * k.heartbeat_ms)
    return key_error("cluster.failure_timeout_ms",
                     "must be at least twice cluster.heartbeat_ms (got " +
                         std::to_string(k.failure_timeout_ms) + ")");
  if (auto e = at_least("cluster.kb_sync_ms", k.kb_sync_ms, 10))
    return e;
  int tls = !k.tls_certificate.empty() + !k.tls_key.empty() + !k.tls_ca.empty();
  if (tls != 0 && tls != 3)
    return key_error("cluster.tls_certificate",
                     "cluster.tls_certificate, tls_key and tls_ca are set together or not at all");
  return {};
}

caf::error validate(const config& c) {
  constexpr std::array<std::string_view, 3> backends = {"auto", "sqlite", "postgres"};
  constexpr std::array<std::string_view, 7> levels = {"trace", "debug",    "info", "warn",
                                                      "error", "critical", "off"};
  if (c.data_dir.empty())
    return key_error("data_dir", "must not be empty");
  if (auto listen = parse_listen(c.server.listen); !listen)
    return config_error("config key \"server.listen\": " + error_message(listen.error()));
  caf::error err;
  auto first = [&](caf::error e) {
    if (!err && e)
      err = std::move(e);
  };
  first(at_least("server.io_threads", c.server.io_threads, 1));
  first(at_least("server.max_body_bytes", c.server.max_body_bytes, size_t{1}));
  first(at_least("server.max_ingest_bytes", c.server.max_ingest_bytes, size_t{1}));
  first(at_least("server.max_message_bytes", c.server.max_message_bytes, size_t{1}));
  if (!err && c.server.max_message_bytes > c.server.max_body_bytes)
    err = key_error("server.max_message_bytes", "must not exceed server.max_body_bytes");
  first(at_least("server.turn_timeout_s", c.server.turn_timeout_s, 1));
  first(at_least("server.max_planner_turns", c.server.max_planner_turns, 1));
  first(at_least("server.detach_grace_ms", c.server.detach_grace_ms, 0));
  first(at_least("server.shutdown_grace_s", c.server.shutdown_grace_s, 0));
  first(at_least("server.max_streams", c.server.max_streams, 0));
  first(at_least("server.max_connections", c.server.max_connections, 0));
  first(at_least("server.idle_timeout_s", c.server.idle_timeout_s, 1));
  first(at_least("server.header_timeout_s", c.server.header_timeout_s, 1));
  first(at_least("server.body_timeout_s", c.server.body_timeout_s, 1));
  first(at_least("server.write_timeout_s", c.server.write_timeout_s, 1));
  first(at_least("server.max_header_bytes", c.server.max_header_bytes, size_t{256}));
  first(at_least("server.max_url_bytes", c.server.max_url_bytes, size_t{16}));
  first(at_least("auth.key_refresh_ms", c.auth.key_refresh_ms, 50));
  first(at_least("admin.status_timeout_ms", c.admin.status_timeout_ms, 10));
  if (!err)
    err = one_of("auth.mode", c.auth.mode, std::array<std::string_view, 2>{"off", "api_key"});
  first(validate_cluster(c));
  first(at_least("sse.heartbeat_s", c.sse.heartbeat_s, 1));
  first(at_least("sse.write_timeout_s", c.sse.write_timeout_s, 1));
  first(at_least("sse.initial_credit", c.sse.initial_credit, 1));
  first(at_least("sse.max_pending_bytes", c.sse.max_pending_bytes, size_t{1}));
  first(one_of("store.backend", c.store.backend, backends));
  if (!err && c.store.backend == "postgres" && c.store.postgres_dsn.empty())
    err = key_error("store.postgres_dsn",
                    "must be set (or POSTGRES_DSN / POSTGRES_HOST) when store.backend is "
                    "\"postgres\"");
  first(at_least("store.flush_max_batch", c.store.flush_max_batch, 1));
  first(at_least("store.read_connections", c.store.read_connections, 1));
  if (!err && !c.router.default_kb.empty() && !is_valid_id(c.router.default_kb, 128))
    err = key_error("router.default_kb", "must be 1-128 characters of [A-Za-z0-9_.:@-]");
  if (!err && !is_agent_type(c.router.default_agent_type)) {
    std::array<std::string_view, agent_types.size()> names;
    std::copy(agent_types.begin(), agent_types.end(), names.begin());
    first(one_of("router.default_agent_type", c.router.default_agent_type, names));
  }
  first(in_unit_range("router.min_confidence", c.router.min_confidence));
  constexpr std::array<std::string_view, 3> router_modes = {"off", "heuristic", "llm"};
  first(one_of("router.mode", c.router.mode, router_modes));
  first(at_least("router.llm_timeout_ms", c.router.llm_timeout_ms, 1));
  first(at_least("retrieval.top_k", c.retrieval.top_k, 1));
  first(at_least("retrieval.chunk_max_chars", c.retrieval.chunk_max_chars, size_t{1}));
  if (!err && c.retrieval.chunk_overlap_chars >= c.retrieval.chunk_max_chars)
    err = key_error("retrieval.chunk_overlap_chars", "must be less than retrieval.chunk_max_chars");
  first(at_least("retrieval.bm25_k1", c.retrieval.bm25_k1, 0.0));
  first(in_unit_range("retrieval.bm25_b", c.retrieval.bm25_b));
  constexpr std::array<std::string_view, 3> embedders = {"hashed", "openai", "none"};
  first(one_of("retrieval.embedder", c.retrieval.embedder, embedders));
  first(at_least("retrieval.hashed_dims", c.retrieval.hashed_dims, size_t{8}));
  first(at_least("retrieval.embedding_batch", c.retrieval.embedding_batch, 1));
  if (!err && c.retrieval.embedder == "openai") {
    if (c.retrieval.embedding_model.empty())
      err = key_error("retrieval.embedding_model",
                      "must be set when retrieval.embedder is \"openai\"");
    else if (c.retrieval.embedding_base_url.empty() && c.llm.base_url.empty())
      err = key_error("retrieval.embedding_base_url",
                      "must be set (or llm.base_url) when retrieval.embedder is \"openai\"");
  }
  if (!err && !c.retrieval.rerank_base_url.empty()) {
    if (!c.retrieval.rerank_base_url.starts_with("http://")
        && !c.retrieval.rerank_base_url.starts_with("https://"))
      err = key_error("retrieval.rerank_base_url", "must start with http:// or https://");
    else if (c.retrieval.rerank_model.empty())
      err = key_error("retrieval.rerank_model", "must be set when retrieval.rerank_base_url is set");
  }
  first(at_least("retrieval.rerank_timeout_ms", c.retrieval.rerank_timeout_ms, 1));
  first(at_least("retrieval.agent_workers", c.retrieval.agent_workers, 0));
  constexpr std::array<std::string_view, 3> providers = {"auto", "extractive", "openai"};
  first(one_of("generator.provider", c.generator.provider, providers));
  if (!err && c.generator.provider == "openai" && c.llm.base_url.empty())
    err = key_error("llm.base_url", "must be set when generator.provider is \"openai\"");
  if (!err && !c.llm.base_url.empty() && !c.llm.base_url.starts_with("http://")
      && !c.llm.base_url.starts_with("https://"))
    err = key_error("llm.base_url", "must start with http:// or https://");
  if (!err && !c.llm.base_url.empty() && c.llm.model.empty())
    err = key_error("llm.model", "must be set when llm.base_url is set");
  // Every URL ragtor calls out to names an allowed host (docs/security.md).
  auto allowed = list_of(c.security.allowed_outbound_hosts);
  auto outbound = [&](std::string_view key, const std::string& url) {
    if (err || url.empty())
      return;
    auto u = llm::parse_base_url(url);
    if (u && !llm::host_allowed(allowed, u->host))
      err = key_error(key, "host \"" + u->host
                               + "\" is not in security.allowed_outbound_hosts (\""
                               + c.security.allowed_outbound_hosts
                               + "\"); add it there to let ragtor call it");
  };
  outbound("llm.base_url", c.llm.base_url);
  outbound("retrieval.embedding_base_url", c.retrieval.embedding_base_url);
  outbound("retrieval.rerank_base_url", c.retrieval.rerank_base_url);
  first(at_least("llm.connect_timeout_ms", c.llm.connect_timeout_ms, 1));
  first(at_least("llm.first_token_timeout_s", c.llm.first_token_timeout_s, 1));
  first(at_least("llm.idle_timeout_s", c.llm.idle_timeout_s, 1));
  first(at_least("llm.total_timeout_s", c.llm.total_timeout_s, 1));
  first(at_least("llm.max_retries", c.llm.max_retries, 0));
  first(at_least("llm.max_concurrency", c.llm.max_concurrency, 1));
  first(at_least("llm.max_queue", c.llm.max_queue, 0));
  if (!err && !(c.llm.temperature >= 0 && c.llm.temperature <= 2))
    err = key_error("llm.temperature", "must be between 0 and 2");
  first(at_least("llm.max_tokens", c.llm.max_tokens, 1));
  first(at_least("llm.prompt_budget_tokens", c.llm.prompt_budget_tokens, 256));
  first(at_least("generator.extractive_max_sentences", c.generator.extractive_max_sentences, 1));
  first(at_least("generator.extractive_pace_ms", c.generator.extractive_pace_ms, 0));
  first(at_least("memory.window", c.memory.window, 0));
  first(at_least("memory.recall_cache_mb", c.memory.recall_cache_mb, 0));
  first(at_least("memory.recall_index_mb", c.memory.recall_index_mb, 0));
  constexpr std::array<std::string_view, 4> summary_modes = {"auto", "model", "extractive",
                                                             "off"};
  first(one_of("summary.mode", c.summary.mode, summary_modes));
  if (!err && c.summary.mode == "model"
      && (c.llm.base_url.empty() || c.generator.provider == "extractive"))
    err = key_error("summary.mode",
                    "is \"model\" but no model generates answers (set llm.base_url and a "
                    "generator.provider other than \"extractive\")");
  first(at_least("summary.min_messages", c.summary.min_messages, 1));
  first(at_least("summary.update_delta", c.summary.update_delta, 1));
  first(at_least("summary.regenerate_every", c.summary.regenerate_every, 1));
  first(at_least("summary.max_tokens", c.summary.max_tokens, 16));
  first(at_least("summary.max_input_tokens", c.summary.max_input_tokens, 256));
  first(at_least("summary.timeout_s", c.summary.timeout_s, 1));
  first(at_least("session.idle_timeout_s", c.session.idle_timeout_s, 1));
  first(at_least("session.max_queued_turns", c.session.max_queued_turns, 1));
  first(at_least("actors.scheduler_threads", c.actors.scheduler_threads, 0));
  first(one_of("log.level", c.log.level, levels));
  return err;
}

}  // namespace

caf::expected<config> load_config(const std::filesystem::path& path,
                                  const std::map<std::string, std::string>& env) {
  config result;
  auto bs = bindings_of(result);
  if (!path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      return config_error("config file not found: " + path.string());
    toml::table root;
    try {
      root = toml::parse_file(path.string());
    } catch (const toml::parse_error& e) {
      return config_error(path.string() + ":" + std::to_string(e.source().begin.line) + ":"
                          + std::to_string(e.source().begin.column) + ": "
                          + std::string{e.description()});
    }
    if (auto err = apply_toml(root, bs, result.kbs))
      return config_error(path.string() + ": " + error_message(err));
  }
  if (auto err = apply_environment(env, bs))
    return err;
  if (result.store.postgres_dsn.empty())
    result.store.postgres_dsn = postgres_dsn_from(env);
  if (auto err = validate(result))
    return err;
  return result;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry{*e};
    auto eq = entry.find('=');
    if (eq == std::string_view::npos)
      continue;
    env.emplace(std::string{entry.substr(0, eq)}, std::string{entry.substr(eq + 1)});
  }
  return env;
}

caf::expected<std::pair<std::string, uint16_t>> parse_listen(std::string_view listen) {
  auto bad = [&](std::string_view why) {
    return config_error("invalid listen address \"" + std::string{listen}
                        + "\": " + std::string{why});
  };
  std::string_view host;
  std::string_view port;
  if (listen.starts_with('[')) {
    auto close = listen.find(']');
    if (close == std::string_view::npos)
      return bad("missing ']'");
    host = listen.substr(1, close - 1);
    auto rest = listen.substr(close + 1);
    if (!rest.starts_with(':'))
      return bad("expected HOST:PORT");
    port = rest.substr(1);
  } else {
    auto colon = listen.rfind(':');
    if (colon == std::string_view::npos)
      return bad("expected HOST:PORT");
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return bad("IPv6 addresses must be written as [ADDRESS]:PORT");
  }
  if (host.empty())
    return bad("empty host");
  if (port.empty() || port.size() > 5
      || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad("port must be a number from 0 to 65535");
  unsigned value = 0;
  std::from_chars(port.data(), port.data() + port.size(), value);
  if (value > 65535)
    return bad("port must be a number from 0 to 65535");
  return std::pair<std::string, uint16_t>{std::string{host}, static_cast<uint16_t>(value)};
}

}  // namespace ragtor
