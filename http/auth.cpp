#include "http/auth.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <simdjson.h>

#include "llm/base_url.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/workflow_def.hpp"
#include <boost/asio/ip/address.hpp>

namespace ragtor::http {

namespace {

std::string hex_of(const unsigned char* p, size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 0xf];
  }
  return out;
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::string_view trim_ws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

std::string generate_api_key() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("no random bytes from the OpenSSL CSPRNG");
  return "rgt_" + hex_of(bytes, sizeof bytes);
}

std::string hash_api_key(std::string_view key) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(key.data(), key.size(), md, &n, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  return hex_of(md, n);
}

bool secret_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view credential_of(std::string_view authorization, std::string_view x_api_key) {
  authorization = trim_ws(authorization);
  if (authorization.size() > 7 && iequals_ascii(authorization.substr(0, 7), "bearer "))
    return trim_ws(authorization.substr(7));
  return trim_ws(x_api_key);
}

std::vector<std::string> split_list(std::string_view csv) {
  std::vector<std::string> out;
  while (!csv.empty()) {
    auto comma = csv.find(',');
    auto part = trim_ws(csv.substr(0, comma));
    if (!part.empty())
      out.emplace_back(part);
    if (comma == std::string_view::npos)
      break;
    csv.remove_prefix(comma + 1);
  }
  return out;
}

std::optional<std::string> parse_scopes(std::string_view csv, scope_set& out) {
  out = {};
  for (auto& name : split_list(csv)) {
    bool known = false;
    for (auto s : {scope::chat, scope::kb_read, scope::kb_write, scope::admin})
      if (name == to_string(s)) {
        out.bits |= 1u << unsigned(s);
        known = true;
      }
    if (!known)
      return name;
  }
  return std::nullopt;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost")
    return true;
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(std::string{host}, ec);
  return !ec && addr.is_loopback();
}

std::optional<spec_error> validate_key_spec(key_spec& spec) {
  auto valid_id = [](std::string_view s) {
    return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
           });
  };
  if (!valid_id(spec.name))
    return spec_error{"name", "name must be 1-128 characters of [A-Za-z0-9_.:@-]"};
  if (spec.tenant.size() > 128)
    return spec_error{"tenant", "tenant must be at most 128 characters"};
  if (!spec.user_prefix.empty() && !valid_id(spec.user_prefix))
    return spec_error{"user_prefix", "user_prefix must be at most 128 characters of [A-Za-z0-9_.:@-]"};
  scope_set scopes;
  if (auto unknown = parse_scopes(spec.scopes, scopes))
    return spec_error{"scopes", "unknown scope \"" + *unknown
                                    + "\" (known: chat, kb:read, kb:write, admin)"};
  if (scopes.bits == 0)
    return spec_error{"scopes", "a key needs at least one scope"};
  std::string joined;
  for (auto& s : split_list(spec.scopes))
    joined += (joined.empty() ? "" : ",") + s;
  spec.scopes = joined;
  joined.clear();
  for (auto& kb : split_list(spec.kbs))
    joined += (joined.empty() ? "" : ",") + kb;
  spec.kbs = joined;
  if (!(spec.rate >= 0) || !std::isfinite(spec.rate) || spec.rate > 1e6)
    return spec_error{"rate", "rate must be between 0 (no limit) and 1000000 requests per second"};
  if (spec.burst < 0 || spec.burst > 1000000)
    return spec_error{"burst", "burst must be between 0 and 1000000"};
  if (spec.rate > 0 && spec.burst < 1)
    return spec_error{"burst", "burst must be at least 1 when rate is set"};
  return std::nullopt;
}

api_key_record record_of(const key_spec& spec, std::string_view key) {
  api_key_record r;
  r.name = spec.name;
  r.hash = hash_api_key(key);
  r.tenant = spec.tenant;
  r.user_prefix = spec.user_prefix;
  r.scopes = spec.scopes;
  r.kbs = spec.kbs;
  r.rate = spec.rate;
  r.burst = spec.burst;
  return r;
}

std::string key_json(const api_key_record& r) {
  json_writer w;
  w.begin_object()
      .field("id", r.id)
      .field("name", r.name)
      .field("tenant", r.tenant)
      .field("user_prefix", r.user_prefix);
  w.key("scopes").begin_array();
  for (auto& s : split_list(r.scopes))
    w.value(s);
  w.end_array();
  w.key("kbs").begin_array();
  for (auto& kb : split_list(r.kbs))
    w.value(kb);
  w.end_array();
  w.field("rate", r.rate).field("burst", r.burst).field("created_at", r.created_at_ms);
  w.key("revoked_at");
  if (r.revoked_at_ms != 0)
    w.value(r.revoked_at_ms);
  else
    w.null();
  w.end_object();
  return w.take();
}

std::optional<spec_error> check_outbound_hosts(const kb_settings& settings,
                                               const std::vector<std::string>& allowed) {
  if (settings.workflow_json.empty())
    return std::nullopt;
  auto wf = wf::parse_workflow(settings.workflow_json);
  if (!wf)
    return std::nullopt;  // the KB's own validation reports it
  for (size_t i = 0; i < wf->tools.size(); ++i) {
    auto field = "workflow.tools[" + std::to_string(i) + "].url";
    auto url = llm::parse_base_url(wf->tools[i].url);
    if (!url)
      return spec_error{field, "not an http:// or https:// URL"};
    if (!llm::host_allowed(allowed, url->host))
      return spec_error{field, "host \"" + url->host
                                   + "\" is not in [security] allowed_outbound_hosts"};
  }
  return std::nullopt;
}

int64_t token_bucket::take(double rate, double burst, auth_clock::time_point now) {
  if (rate <= 0)
    return 0;
  burst = std::max(1.0, burst);
  std::lock_guard guard{mx_};
  if (!started_) {
    started_ = true;
    tokens_ = burst;
  } else if (now > last_) {
    tokens_ = std::min(burst, tokens_ + std::chrono::duration<double>(now - last_).count() * rate);
  }
  last_ = std::max(last_, now);
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return 0;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1.0 - tokens_) / rate)));
}

key_entry::key_entry(api_key_record r) : record(std::move(r)) {
  parse_scopes(record.scopes, scopes);  // unknown names grant nothing
  kbs = split_list(record.kbs);
}

bool key_entry::allows_user(std::string_view user_id) const {
  return std::string_view{user_id}.starts_with(record.user_prefix);
}

bool key_entry::allows_kb(std::string_view kb) const {
  if (kbs.empty() || iequals_ascii(kb, "general"))
    return true;
  return std::find(kbs.begin(), kbs.end(), kb) != kbs.end();
}

std::shared_ptr<key_entry> key_cache::find(std::string_view key) const {
  if (key.empty())
    return nullptr;
  auto hash = hash_api_key(key);
  std::shared_ptr<const map_type> m;
  {
    std::lock_guard guard{mx_};
    m = map_;
  }
  auto i = m->find(hash);
  return i == m->end() ? nullptr : i->second;
}

void key_cache::replace(const std::vector<api_key_record>& records, auth_clock::time_point now) {
  std::shared_ptr<const map_type> old;
  {
    std::lock_guard guard{mx_};
    old = map_;
  }
  auto next = std::make_shared<map_type>();
  for (auto& r : records) {
    if (r.revoked_at_ms != 0)
      continue;
    auto i = old->find(r.hash);
    if (i != old->end() && i->second->record.id == r.id)
      next->emplace(r.hash, i->second);  // keeps its bucket
    else
      next->emplace(r.hash, std::make_shared<key_entry>(r));
  }
  std::lock_guard guard{mx_};
  map_ = std::move(next);
  loaded_at_ = now;
}

void key_cache::add(const api_key_record& r) {
  std::lock_guard guard{mx_};
  auto next = std::make_shared<map_type>(*map_);
  next->insert_or_assign(r.hash, std::make_shared<key_entry>(r));
  map_ = std::move(next);
}

void key_cache::remove_name(std::string_view name) {
  std::lock_guard guard{mx_};
  auto next = std::make_shared<map_type>(*map_);
  std::erase_if(*next, [&](const auto& kv) { return kv.second->record.name == name; });
  map_ = std::move(next);
}

auth_clock::time_point key_cache::loaded_at() const {
  std::lock_guard guard{mx_};
  return loaded_at_;
}

size_t key_cache::size() const {
  std::lock_guard guard{mx_};
  return map_->size();
}

request_subjects subjects_of(std::string_view route_name, const path_params& params,
                             std::string_view query_user_id, std::string_view json_body) {
  request_subjects s;
  if (auto& u = params["user"]; !u.empty())
    s.users.push_back(u);
  if (auto& kb = params["kb"]; !kb.empty())
    s.kbs.push_back(kb);
  if (!query_user_id.empty())
    s.users.emplace_back(query_user_id);
  bool saw_kb_field = false;
  if (!json_body.empty()) {
    simdjson::ondemand::parser parser;
    simdjson::padded_string padded{json_body};
    simdjson::ondemand::document doc;
    simdjson::ondemand::object obj;
    if (!parser.iterate(padded).get(doc) && !doc.get_object().get(obj)) {
      for (auto field : obj) {
        std::string_view key;
        if (field.unescaped_key().get(key))
          break;
        std::string_view value;
        if (field.value().get_string().get(value))
          continue;  // not a string: not a subject (or a 400 from the handler)
        if (key == "user_id" || key == "user") {
          s.users.emplace_back(value);
        } else if (key == "kb_prefix") {
          saw_kb_field = true;
          if (value.empty())
            s.unnamed_kb = true;
          else
            s.kbs.emplace_back(value);
        } else if (key == "model" && route_name == "openai_chat") {
          // kb:<name>[:agent] | general | auto (the router picks)
          saw_kb_field = true;
          if (value.starts_with("kb:")) {
            auto rest = value.substr(3);
            s.kbs.emplace_back(rest.substr(0, rest.find(':')));
          } else if (!iequals_ascii(value, "general")) {
            s.unnamed_kb = true;
          }
        } else if (key == "name" && route_name == "create_kb") {
          s.kbs.emplace_back(value);
        }
      }
    }
  }
  if (!saw_kb_field && (route_name == "chat_stream" || route_name == "chat_json"
                        || route_name == "openai_chat"))
    s.unnamed_kb = true;
  return s;
}

key_verdict check_subjects(const key_entry& key, std::string_view method, bool turn,
                           const request_subjects& s) {
  key_verdict v;
  for (auto& u : s.users) {
    if (key.allows_user(u))
      continue;
    if (method == "GET") {
      // Reads of another user's data look like missing data.
      v.status = 404;
      v.code = "not_found";
      v.message = "not found";
    } else {
      v.status = 403;
      v.code = "forbidden";
      v.message = "this API key may only act for user ids starting with \""
                  + key.record.user_prefix + "\"";
      v.field = "user_id";
    }
    return v;
  }
  for (auto& kb : s.kbs) {
    if (key.allows_kb(kb))
      continue;
    v.status = 403;
    v.code = "forbidden";
    v.message = "this API key may not use knowledge base \"" + kb + "\"";
    v.field = "kb_prefix";
    return v;
  }
  if (turn && s.unnamed_kb && !key.kbs.empty()) {
    v.status = 403;
    v.code = "forbidden";
    v.message = "this API key is limited to some knowledge bases: name one (kb_prefix)";
    v.field = "kb_prefix";
  }
  return v;
}

}  // namespace ragtor::http
