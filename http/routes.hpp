// The route table of the HTTP API (DESIGN §5): which handler serves which
// method and path. The server builds its router from it once.
#pragma once

#include <vector>

#include "http/router.hpp"

namespace ragtor::http {

std::vector<route> api_routes();

}  // namespace ragtor::http
