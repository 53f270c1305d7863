// `ragtor ingest` as a user runs it: success exits 0, a broken input file
// exits non-zero and says which file and line.
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/chat_client.hpp"
#include "tests/support/ragtor_process.hpp"

namespace ragtor::test {
namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

TEST(ingest_cli, fixture_kb_ingests_cleanly) {
  temp_dir tmp;
  auto result = run_ingest(tmp.path(), "test", fixture_kb_files());
  EXPECT_TRUE(result.status.clean()) << result.status.describe() << "\n" << result.output;
}

TEST(ingest_cli, bad_jsonl_line_fails_with_file_and_line) {
  temp_dir tmp;
  auto file = tmp.path() / "broken.jsonl";
  write_file(file, R"({"id":"ok-1","title":"Fine","text":"The first line is a valid document."})"
                   "\n"
                   R"({"id":"bad-2","title":"Broken","text":"unterminated)"
                   "\n");
  auto result = run_ingest(tmp.path(), "test", {file});
  EXPECT_TRUE(result.status.exited && result.status.code != 0) << result.status.describe() << "\n"
                                                               << result.output;
  EXPECT_NE(result.output.find("broken.jsonl:2"), std::string::npos) << result.output;
}

TEST(ingest_cli, jsonl_line_without_text_fails_with_file_and_line) {
  temp_dir tmp;
  auto file = tmp.path() / "notext.jsonl";
  write_file(file, R"({"id":"ok-1","title":"Fine","text":"The first line is a valid document."})"
                   "\n"
                   R"({"id":"ok-2","title":"Fine too","text":"So is the second one."})"
                   "\n"
                   R"({"id":"no-text","title":"Missing its text"})"
                   "\n");
  auto result = run_ingest(tmp.path(), "test", {file});
  EXPECT_TRUE(result.status.exited && result.status.code != 0) << result.status.describe() << "\n"
                                                               << result.output;
  EXPECT_NE(result.output.find("notext.jsonl:3"), std::string::npos) << result.output;
}

TEST(ingest_cli, missing_path_fails) {
  temp_dir tmp;
  auto result = run_ingest(tmp.path(), "test", {tmp.path() / "does-not-exist.md"});
  EXPECT_TRUE(result.status.exited && result.status.code != 0) << result.status.describe() << "\n"
                                                               << result.output;
  EXPECT_NE(result.output.find("does-not-exist.md"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace ragtor::test
