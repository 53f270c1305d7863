#include "http/routes.hpp"

#include "http/handlers.hpp"
#include "http/route_list.hpp"

namespace ragtor::http {

std::vector<route> api_routes() {
  using enum body_kind;
  using enum scope;
  using enum admission;
#define RAGTOR_ROUTE(method, pattern, name, needs, handler, ...) \
  route{method, pattern, name, needs, handler __VA_OPT__(, ) __VA_ARGS__},
  return {RAGTOR_API_ROUTES(RAGTOR_ROUTE)};
#undef RAGTOR_ROUTE
}

}  // namespace ragtor::http
