// Versioned schema migrations (persistence/migrations/NNNN_name.sql),
// embedded into the binary at build time and applied at start-up, each in
// its own transaction, exactly once (recorded in schema_migrations).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ragtor {

class store_backend;

struct migration {
  int version;
  std::string_view name;
  std::string_view sql;
};

// Every migration in version order (generated file).
const std::vector<migration>& embedded_migrations();

// Applies the migrations `backend` has not seen; returns how many ran.
// Throws store_error on failure (the failing migration is rolled back).
int apply_migrations(store_backend& backend, const std::vector<migration>& all);

}  // namespace ragtor
