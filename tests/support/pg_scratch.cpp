#include "tests/support/pg_scratch.hpp"

#include <cstdlib>
#include <random>
#include <stdexcept>

#include <libpq-fe.h>

namespace ragtor::test {

namespace {

void admin_exec(const std::string& dsn, const std::string& sql) {
  auto* conn = PQconnectdb(dsn.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    throw std::runtime_error("scratch database: cannot connect: " + msg);
  }
  auto* r = PQexec(conn, sql.c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string msg = PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(conn);
  if (!ok)
    throw std::runtime_error("scratch database: " + sql + ": " + msg);
}

}  // namespace

std::string test_postgres_dsn() {
  auto* dsn = std::getenv("RAGTOR_TEST_POSTGRES_DSN");
  return dsn ? dsn : "";
}

scratch_database::scratch_database(std::string admin_dsn) : admin_dsn_(std::move(admin_dsn)) {
  std::random_device rd;
  name_ = "ragtor_scratch_" + std::to_string(rd()) + std::to_string(rd() % 1000);
  admin_exec(admin_dsn_, "CREATE DATABASE " + name_);
  // A later dbname keyword overrides an earlier one in a libpq DSN.
  dsn_ = admin_dsn_ + " dbname=" + name_;
}

scratch_database::~scratch_database() {
  try {
    admin_exec(admin_dsn_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception&) {
    // Best effort: the whole cluster is removed after the run anyway.
  }
}

}  // namespace ragtor::test
