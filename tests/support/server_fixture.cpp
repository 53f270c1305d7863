#include "tests/support/server_fixture.hpp"

#include <iostream>

namespace ragtor::test {

void ragtor_server_test::SetUp() {
  std::filesystem::create_directories(data_dir_);
  auto ingest = run_ingest(data_dir_, fixture_kb_name, fixture_kb_files());
  ASSERT_TRUE(ingest.status.clean())
      << "ragtor ingest of the fixture KB: " << ingest.status.describe() << "\n"
      << ingest.output;
  start_server();
}

void ragtor_server_test::TearDown() {
  if (HasFailure() && server_)
    std::cerr << "--- ragtor serve stderr (tail) ---\n" << server_->stderr_tail() << "\n";
  server_.reset();
}

void ragtor_server_test::start_server() {
  server_.reset();
  server_ = std::make_unique<ragtor_process>(data_dir_, server_env());
}

exit_status ragtor_server_test::stop_server() {
  return server_->stop();
}

::testing::AssertionResult ragtor_server_test::healthy() {
  try {
    auto res = request(port(), "GET", "/healthz");
    if (res.status != 200)
      return ::testing::AssertionFailure() << "/healthz status " << res.status << ": " << res.body;
    auto j = json::parse(res.body);
    if (!j.has("/status") || j.str("/status") != "ok")
      return ::testing::AssertionFailure() << "/healthz body " << res.body;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "/healthz: " << e.what();
  }
}

}  // namespace ragtor::test
