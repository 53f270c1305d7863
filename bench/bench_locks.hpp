// The door-lock knowledge base the answer-mode benches share: its
// documents, a guided workflow over it, and the fake model's script that
// answers every node of the workflow, the tool agent and the rewriter at
// once (so the benches measure ragtor, not a model).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "bench/bench_proc.hpp"

namespace {

constexpr const char* lock_documents =
    R"({"documents":[{"id":"b1","text":"The Lumenlatch K7 runs on four AA batteries that last about fourteen months."},)"
    R"({"id":"b2","text":"The Lumenlatch K5 battery pack is charged over USB in two hours."},)"
    R"({"id":"b3","text":"K7 batteries are replaced by sliding the back cover of the lock down."},)"
    R"({"id":"b4","text":"Low battery: the K7 beeps three times when the batteries need replacing."},)"
    R"({"id":"p1","text":"To pair the K7, hold the cog button for six seconds."}]})";

constexpr const char* lock_workflow =
    R"({"model_retries":0,"intents":[{"l2":"battery","description":"battery life",)"
    R"("slots":[{"name":"model","description":"lock model"}]},{"l2":"pairing","description":"pairing"}]})";

// Starts the fake model (build/tests/fake_openai) with the lock script,
// writing its files under `scratch`.
child spawn_lock_model(const std::filesystem::path& bin_dir, const std::filesystem::path& scratch) {
  std::ofstream{scratch / "script.json"} << R"({"default":{"reply":"Four AA batteries [1]."},"rules":[
    {"system":"rewrite a user's latest question","reply":"Lumenlatch K7 battery life"},
    {"system":"classify the user's latest message","reply":"{\"intent\":\"battery\"}"},
    {"system":"extract information","reply":"{\"slots\":{\"model\":\"K7\"}}"},
    {"system":"judge whether search results","reply":"{\"is_sufficient\":true,\"suggestion\":\"pass\"}"},
    {"system":"check the quality of evidence","reply":"{\"answers\":true,\"reason\":\"ok\"}"},
    {"system":"You are a retrieval agent","tool_results":1,"reply":"READY"},
    {"system":"You are a retrieval agent","tool_calls":[{"name":"vector_retrieve","arguments":{"query":"K7 battery"}}]}]})";
  return spawn({(bin_dir / "tests/fake_openai").string(), "--port", "0", "--threads", "2",
                "--script", (scratch / "script.json").string()},
               "fake_openai listening on http://", {}, scratch / "fake.log");
}

}  // namespace
