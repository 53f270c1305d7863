// The gtest fixture of the integration tests: a fresh data directory with the
// fixture KB (tests/data/kb) ingested as KB "test", and a `ragtor serve` on
// it. Tests that need other server settings override server_env(). On
// failure the server's stderr tail is printed.
#pragma once

#include <filesystem>
#include <memory>

#include <gtest/gtest.h>

#include "tests/support/chat_client.hpp"
#include "tests/support/db_reader.hpp"
#include "tests/support/ragtor_process.hpp"

namespace ragtor::test {

inline constexpr const char* fixture_kb_name = "test";

class ragtor_server_test : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;

  // Environment overrides for the server (RAGTOR_SECTION__KEY=...).
  virtual env_vars server_env() const { return {}; }

  // Starts a server on data_dir() (after a stop(), on the same data).
  void start_server();
  // Stops the server with SIGTERM; the exit status.
  exit_status stop_server();

  uint16_t port() const { return server_->port(); }
  ragtor_process& server() { return *server_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }
  db_reader db() const { return db_reader{data_dir_}; }

  // GET /healthz is 200 {"status":"ok"}.
  ::testing::AssertionResult healthy();

private:
  temp_dir tmp_;
  std::filesystem::path data_dir_ = tmp_.path() / "data";
  std::unique_ptr<ragtor_process> server_;
};

}  // namespace ragtor::test
