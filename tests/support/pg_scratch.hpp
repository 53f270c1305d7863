// A scratch PostgreSQL database per test (tests run in parallel processes):
// created on the server named by an admin DSN, dropped afterwards.
#pragma once

#include <string>

namespace ragtor::test {

// RAGTOR_TEST_POSTGRES_DSN, or "" when unset.
std::string test_postgres_dsn();

class scratch_database {
public:
  // Creates database ragtor_scratch_<random> via `admin_dsn`; throws
  // std::runtime_error on failure.
  explicit scratch_database(std::string admin_dsn);
  ~scratch_database();
  scratch_database(const scratch_database&) = delete;
  scratch_database& operator=(const scratch_database&) = delete;

  // A DSN for the scratch database.
  const std::string& dsn() const { return dsn_; }

private:
  std::string admin_dsn_;
  std::string name_;
  std::string dsn_;
};

}  // namespace ragtor::test
