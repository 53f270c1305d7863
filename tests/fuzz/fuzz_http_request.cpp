// libFuzzer target: the HTTP request path up to a handler, as one function
// over the bytes a client sends. In the order http/server.cpp runs them:
// Beast parses the header and body with the server's default limits
// (16 KiB header, 1 MiB body); the target's length is capped (8 KiB); the
// target is split into path and decoded query; the route table (the same
// list as routes.cpp, http/route_list.hpp) is matched; the credential is
// read; and, for a key limited to some users and KBs, what the request
// names is collected and judged. Whatever the bytes: no crash, and every
// verdict is "allowed" or a 403/404 that says why.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include "http/auth.hpp"
#include "http/request_target.hpp"
#include "http/route_list.hpp"
#include "http/router.hpp"

namespace {

using namespace ragtor::http;
namespace bhttp = boost::beast::http;

std::vector<route> fuzz_routes() {
  using enum body_kind;
  using enum scope;
  using enum admission;
#define RAGTOR_FUZZ_ROUTE(method, pattern, name, needs, handler, ...) \
  route{method, pattern, name, needs, nullptr __VA_OPT__(, ) __VA_ARGS__},
  return {RAGTOR_API_ROUTES(RAGTOR_FUZZ_ROUTE)};
#undef RAGTOR_FUZZ_ROUTE
}

// A key limited to users "acme:*" and KB "handbook".
const key_entry& limited_key() {
  static key_entry k{[] {
    ragtor::api_key_record r;
    r.name = "fuzz";
    r.user_prefix = "acme:";
    r.scopes = "chat,kb:read,kb:write,admin";
    r.kbs = "handbook";
    return r;
  }()};
  return k;
}

std::string_view view(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const router routes{fuzz_routes()};
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(16 << 10);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::system::error_code ec;
  size_t used = 0;
  while (used < size && !parser.is_done()) {
    auto n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec == bhttp::error::need_more) {
      ec = {};
      break;
    }
    if (ec || n == 0)
      break;
    used += n;
  }
  if (ec || !parser.is_header_done())
    return 0;
  auto& req = parser.get();
  if (req.target().size() > (8u << 10))
    return 0;  // 414
  auto target = parse_request_target(view(req.target()));
  auto match = routes.match(view(req.method_string()), target.path);
  auto credential = credential_of(view(req[bhttp::field::authorization]), view(req["X-API-Key"]));
  if (!credential.empty() && credential.size() > size)
    std::abort();  // a credential is a part of the request
  if (!match.matched || !target.valid)
    return 0;
  const route& r = *match.matched;
  auto q = target.query.find("user_id");
  auto subjects = subjects_of(r.name, match.params,
                              q == target.query.end() ? "" : std::string_view{q->second},
                              parser.is_done() && r.body == body_kind::json
                                  ? std::string_view{req.body()}
                                  : std::string_view{});
  auto v = check_subjects(limited_key(), r.method, r.admit == admission::turn, subjects);
  if (v.status != 0 && ((v.status != 403 && v.status != 404) || v.message.empty()))
    std::abort();
  return 0;
}
