#include "tests/support/fake_openai.hpp"

#include <fstream>

#include "tests/support/http_client.hpp"

#ifndef FAKE_OPENAI_BINARY
#error "FAKE_OPENAI_BINARY must name the fake_openai executable"
#endif

namespace ragtor::test {

std::string fake_openai_cert() {
  return (source_dir() / "tests/data/tls/cert.pem").string();
}

fake_openai::fake_openai(const std::string& script_json, bool tls) : tls_(tls) {
  auto script = dir_.path() / "script.json";
  std::ofstream{script} << script_json;
  std::vector<std::string> argv{FAKE_OPENAI_BINARY, "--port", "0", "--script", script.string()};
  if (tls) {
    argv.insert(argv.end(), {"--tls-cert", fake_openai_cert(), "--tls-key",
                             (source_dir() / "tests/data/tls/key.pem").string()});
  }
  process_ = std::make_unique<ragtor_process>(std::move(argv), "fake_openai listening on ");
}

fake_openai::~fake_openai() {
  if (process_)
    process_->stop();
}

std::string fake_openai::base_url() const {
  return std::string{tls_ ? "https" : "http"} + "://127.0.0.1:" + std::to_string(port()) + "/v1";
}

void fake_openai::set_script(const std::string& json) {
  auto res = request(port(), "POST", "/_fake/script", json);
  if (res.status != 200)
    throw http_error{"fake_openai rejected the script: " + res.body};
}

void fake_openai::reset_stats() {
  request(port(), "POST", "/_fake/reset", "{}");
}

json fake_openai::first_tokens(size_t from) {
  return json::parse(request(port(), "GET", "/_fake/first_tokens?from=" + std::to_string(from)).body);
}

json fake_openai::token_gaps() {
  return json::parse(request(port(), "GET", "/_fake/token_gaps").body);
}

json fake_openai::stats() {
  return json::parse(request(port(), "GET", "/_fake/stats").body);
}

int64_t fake_openai::stat(std::string_view name) {
  return stats().integer("/" + std::string{name});
}

bool fake_openai::wait_for_stat(std::string_view name, int64_t value,
                                std::chrono::milliseconds timeout) {
  // The fake answers when the counter gets there (or the timeout passed).
  auto res = request(port(), "GET",
                     "/_fake/wait?stat=" + std::string{name} + "&value=" + std::to_string(value)
                         + "&timeout_ms=" + std::to_string(timeout.count()),
                     {}, {}, timeout + std::chrono::seconds(10));
  return res.status == 200 && json::parse(res.body).boolean("/reached");
}

env_vars model_env(const fake_openai& fake) {
  return {{"RAGTOR_LLM__BASE_URL", fake.base_url()}, {"RAGTOR_LLM__MODEL", "fake-model"}};
}

}  // namespace ragtor::test
