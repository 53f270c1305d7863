// API keys and per-key limits (docs/security.md), without sockets so they
// can be unit-tested and benchmarked: key generation and hashing, the key
// cache the HTTP server checks every request against, the token bucket of
// each key, and what a key may do (scopes, user-id prefix, KB list).
//
// Keys live in the store (table api_keys, hashes only). The server never
// asks the database on an I/O thread: it looks keys up in a key_cache that
// is refreshed through the store actor (server.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "http/router.hpp"
#include "protocol/kb_settings.hpp"
#include "protocol/messages.hpp"

namespace ragtor::http {

using auth_clock = std::chrono::steady_clock;

// A new API key: "rgt_" + 64 hex digits (256 bits from OpenSSL's CSPRNG).
std::string generate_api_key();

// The hex SHA-256 of a key: what the store keeps.
std::string hash_api_key(std::string_view key);

// Constant-time equality (for the admin token).
bool secret_equals(std::string_view a, std::string_view b);

// The credential of a request: `Authorization: Bearer <key>` (the scheme
// case-insensitive), else `X-API-Key`; "" when neither is present.
std::string_view credential_of(std::string_view authorization, std::string_view x_api_key);

// Parses "chat,kb:read,..." into its scopes; the unknown name, if any.
struct scope_set {
  unsigned bits = 0;
  bool has(scope s) const { return s == scope::none || (bits & (1u << unsigned(s))) != 0; }
};
std::optional<std::string> parse_scopes(std::string_view csv, scope_set& out);

// Splits "a,b" (trimmed, empty parts dropped).
std::vector<std::string> split_list(std::string_view csv);

// Whether a listen host is a loopback address ("127.0.0.1", "::1",
// "localhost").
bool is_loopback_host(std::string_view host);

// What an API key is created with (CLI and POST /admin/api/keys).
struct key_spec {
  std::string name;
  std::string tenant;
  std::string user_prefix;
  std::string scopes = "chat";  // comma-separated
  std::string kbs;              // comma-separated; "" = every KB
  double rate = 10;             // requests per second; 0 = no limit
  int32_t burst = 20;           // bucket size (>= 1 when rate > 0)
};

// Checks a spec (name 1-128 of [A-Za-z0-9_.:@-], known scopes, rate and
// burst in range) and normalizes its lists; the error names the field.
struct spec_error {
  std::string field;
  std::string message;
};
std::optional<spec_error> validate_key_spec(key_spec& spec);

// The record the store keeps for `spec` with key `key` (its hash only).
api_key_record record_of(const key_spec& spec, std::string_view key);

// A record as JSON for listings: never the hash.
std::string key_json(const api_key_record& r);

// Whether `settings` (a KB's) sends requests only to `allowed` hosts (its
// workflow tools' URLs); the error names the field. "*" allows any host.
std::optional<spec_error> check_outbound_hosts(const kb_settings& settings,
                                               const std::vector<std::string>& allowed);

// A token bucket of `burst` tokens refilling at `rate` per second, behind
// one small mutex per key.
class token_bucket {
public:
  // Takes a token; 0 when granted, else whole seconds until the next token
  // (at least 1), for Retry-After. rate <= 0 grants everything.
  int64_t take(double rate, double burst, auth_clock::time_point now);

private:
  std::mutex mx_;
  bool started_ = false;
  double tokens_ = 0;
  auth_clock::time_point last_{};
};

// One active key as the server knows it.
struct key_entry {
  api_key_record record;
  scope_set scopes;
  std::vector<std::string> kbs;  // empty: every KB
  token_bucket bucket;

  explicit key_entry(api_key_record r);

  // Whether the key may act for `user_id` (its user_prefix).
  bool allows_user(std::string_view user_id) const;
  // Whether the key may use knowledge base `kb` ("general" is no KB: always).
  bool allows_kb(std::string_view kb) const;
};

// The active keys by hash. Lookups copy one shared_ptr under a mutex;
// replace() builds a new map and swaps it in, keeping the bucket of every
// key that stays, so a refresh does not hand out a fresh burst.
class key_cache {
public:
  using map_type = std::unordered_map<std::string, std::shared_ptr<key_entry>>;

  std::shared_ptr<key_entry> find(std::string_view key) const;

  // Replaces every key with the active ones of `records`.
  void replace(const std::vector<api_key_record>& records, auth_clock::time_point now);
  // One key created (on this node).
  void add(const api_key_record& r);
  // One key revoked (on this node): refused from now on.
  void remove_name(std::string_view name);

  // When the keys were last loaded from the store (epoch: never).
  auth_clock::time_point loaded_at() const;
  size_t size() const;

private:
  mutable std::mutex mx_;
  std::shared_ptr<const map_type> map_ = std::make_shared<map_type>();
  auth_clock::time_point loaded_at_{};
};

// What a request names, for a key's user_prefix and KB list: user ids from
// the path ({user}), the query (user_id) and the JSON body (user_id, user);
// knowledge bases from the path ({kb}) and the body (kb_prefix, a
// "kb:<name>[:agent]" model, and the name of a KB being created).
struct request_subjects {
  std::vector<std::string> users;
  std::vector<std::string> kbs;
  bool unnamed_kb = false;  // a turn that lets the router pick the KB
};

// Collects the subjects of a request to `route_name` with body `json_body`
// (a body that is not a JSON object contributes nothing: its handler
// refuses it anyway).
request_subjects subjects_of(std::string_view route_name, const path_params& params,
                             std::string_view query_user_id, std::string_view json_body);

// The verdict of a key on a request's subjects: 0 = allowed, else the HTTP
// status (403; 404 for a read of another user's data, so ids cannot be
// probed) with its message.
struct key_verdict {
  unsigned status = 0;
  std::string code;
  std::string message;
  std::string field;
};
key_verdict check_subjects(const key_entry& key, std::string_view method, bool turn,
                           const request_subjects& s);

}  // namespace ragtor::http
