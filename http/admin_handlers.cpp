// /admin/api/keys: API key administration over HTTP (docs/security.md),
// guarded by the admin token (or a key with the admin scope). A created
// key is shown once, in the 201 answer; the store keeps its hash. Creating
// and revoking on this node take effect here at once, on other nodes
// within [auth] key_refresh_ms.
#include <array>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>

#include "http/auth.hpp"
#include "protocol/log.hpp"
#include "http/caf_asio.hpp"
#include "http/handler_context.hpp"
#include "http/handlers.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_object.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor::http {

namespace {
const log::component lg{"http"};
}  // namespace

namespace {

std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ",") + x;
  return out;
}

}  // namespace

handler_result admin_create_key(handler_context& ctx, exchange& ex) {
  static constexpr std::array<field_spec, 7> specs{{
      {"name", field_kind::string, true},
      {"tenant", field_kind::string, false},
      {"user_prefix", field_kind::string, false},
      {"scopes", field_kind::string_array, false},
      {"kbs", field_kind::string_array, false},
      {"rate", field_kind::number, false},
      {"burst", field_kind::integer, false},
  }};
  auto parsed = parse_json_object(ex.body, ctx.settings.limits.max_body_bytes, specs);
  if (!parsed.ok)
    co_return co_await reply_request_error(ex, parsed.error);
  auto& f = parsed.fields;
  key_spec spec;
  spec.name = f.string_or("name");
  spec.tenant = f.string_or("tenant");
  spec.user_prefix = f.string_or("user_prefix");
  if (auto i = f.string_arrays.find("scopes"); i != f.string_arrays.end())
    spec.scopes = joined(i->second);
  if (auto i = f.string_arrays.find("kbs"); i != f.string_arrays.end())
    spec.kbs = joined(i->second);
  if (auto i = f.numbers.find("rate"); i != f.numbers.end())
    spec.rate = i->second;
  if (auto i = f.integers.find("burst"); i != f.integers.end()) {
    if (i->second < 0 || i->second > 1000000)
      co_return co_await reply_error(ex, 400, "invalid_request",
                                     "burst must be between 0 and 1000000", "burst");
    spec.burst = static_cast<int32_t>(i->second);
  }
  if (auto err = validate_key_spec(spec))
    co_return co_await reply_error(ex, 400, "invalid_request", err->message, err->field);
  auto key = generate_api_key();
  auto stored = co_await async_request<api_key_record>(ctx.sys, ctx.store, store_timeout,
                                                       atom::key_create_v, record_of(spec, key));
  if (!stored)
    co_return co_await reply_caf_error(ex, stored.error());
  if (ctx.keys)
    ctx.keys->add(*stored);
  lg->info("auth: API key \"{}\" created", stored->name);
  // The key itself, this once; then the record as listings show it.
  std::string body = key_json(*stored);
  body.pop_back();
  json_writer w;
  w.value(key);
  body += ",\"key\":" + w.take() + "}";
  co_await reply_json(ex, 201, std::move(body));
}

handler_result admin_list_keys(handler_context& ctx, exchange& ex) {
  auto keys = co_await async_request<std::vector<api_key_record>>(ctx.sys, ctx.store,
                                                                  store_timeout, atom::key_list_v);
  if (!keys)
    co_return co_await reply_caf_error(ex, keys.error());
  std::string body = "{\"keys\":[";
  for (size_t i = 0; i < keys->size(); ++i) {
    if (i > 0)
      body += ',';
    body += key_json((*keys)[i]);
  }
  body += "]}";
  co_await reply_json(ex, 200, std::move(body));
}

handler_result admin_revoke_key(handler_context& ctx, exchange& ex) {
  std::string name = ex.params["name"];
  auto revoked = co_await async_request<bool>(ctx.sys, ctx.store, store_timeout,
                                              atom::key_revoke_v, name);
  if (!revoked)
    co_return co_await reply_caf_error(ex, revoked.error());
  if (!*revoked)
    co_return co_await reply_error(ex, 404, "not_found", "no active API key \"" + name + "\"");
  if (ctx.keys)
    ctx.keys->remove_name(name);
  lg->info("auth: API key \"{}\" revoked", name);
  json_writer w;
  w.begin_object().field("status", "revoked").field("name", name).end_object();
  co_await reply_json(ex, 200, w.take());
}

}  // namespace ragtor::http
