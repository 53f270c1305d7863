#include "persistence/migrations.hpp"

#include <algorithm>

#include "persistence/store_backend.hpp"

namespace ragtor {

int apply_migrations(store_backend& backend, const std::vector<migration>& all) {
  backend.lock_schema();
  struct unlock {
    store_backend& b;
    ~unlock() {
      try {
        b.unlock_schema();
      } catch (const store_error&) {
        // the lock ends with the connection anyway
      }
    }
  } guard{backend};
  auto applied = backend.applied_migrations();
  int ran = 0;
  for (auto& m : all) {
    if (std::find(applied.begin(), applied.end(), m.version) != applied.end())
      continue;
    backend.begin();
    try {
      backend.execute_script(m.sql);
      backend.record_migration(m.version, m.name, now_ms());
      backend.commit();
    } catch (const store_error& e) {
      backend.rollback();
      throw store_error("migration " + std::string{m.name} + " failed: " + e.what());
    }
    ++ran;
  }
  return ran;
}

}  // namespace ragtor
