// Many simultaneous streams: each one is complete and correct on its own and
// every turn is persisted. Searches racing an ingest into their KB each see
// the old or the new version whole. Correctness only; speed belongs to
// bench/.
#include <atomic>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/http_client.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

using concurrency_test = ragtor_server_test;

constexpr size_t stream_count = 50;

const char* const questions[] = {
    "How long do the batteries of the Lumenlatch K7 last?",
    "Who designed the Port Quellin lighthouse?",
    "At what temperature should sencha be steeped?",
    "Which planet rotates on its side?",
    "How many user codes can a Lumenlatch K7 store?",
};

TEST_F(concurrency_test, fifty_streams_at_once_all_complete_and_persist) {
  std::vector<stream_result> results(stream_count);
  std::vector<std::string> failures(stream_count);
  std::vector<std::thread> threads;
  threads.reserve(stream_count);
  for (size_t i = 0; i < stream_count; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto body = chat_body("load-" + std::to_string(i), "conc-" + std::to_string(i),
                              questions[i % std::size(questions)]);
        results[i] = chat_stream(port(), body, 60s);
      } catch (const std::exception& e) {
        failures[i] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();

  size_t ok = 0;
  for (size_t i = 0; i < stream_count; ++i) {
    SCOPED_TRACE("stream " + std::to_string(i));
    ASSERT_TRUE(failures[i].empty()) << failures[i];
    const auto& r = results[i];
    bool good = well_formed_stream(r) && r.errors.empty() && !r.answer().empty();
    EXPECT_TRUE(well_formed_stream(r));
    EXPECT_TRUE(r.errors.empty()) << r.statuses();
    EXPECT_FALSE(r.answer().empty());
    ok += good;
  }
  EXPECT_EQ(ok, stream_count);
  EXPECT_EQ(db().message_count_for_sessions("conc-"), static_cast<int64_t>(2 * stream_count));
  EXPECT_TRUE(healthy());
}

// A KB's documents as a JSON ingest body: `n` documents whose texts
// depend on `version`, so the versions rank differently.
std::string harbour_documents(int version, int n) {
  const char* cargo[] = {"saffron", "indigo", "salt", "timber", "copper", "tea"};
  const char* crew[] = {"captain", "pilot", "cook", "bosun"};
  std::string body = R"({"documents":[)";
  for (int i = 0; i < n; ++i) {
    auto c = cargo[(i + version * 3) % std::size(cargo)];
    auto c2 = cargo[(i * 5 + version) % std::size(cargo)];
    auto who = crew[(i + version) % std::size(crew)];
    body += std::string{i ? "," : ""} + R"({"id":"ship)" + std::to_string(i) + R"(","title":"Ship )"
            + std::to_string(i) + R"(","text":"The ship number )" + std::to_string(i) + " carries "
            + c + " and " + c2 + " from Port Quellin. Its " + who + " trades " + c + " in version "
            + std::to_string(version) + R"(."})";
  }
  return body + "]}";
}

using ranked = std::vector<std::pair<std::string, double>>;

ranked search(uint16_t port, const std::string& query) {
  auto res = request(port, "POST", "/api/v1/kbs/harbour/search",
                     R"({"query":")" + query + R"(","top_k":5})");
  if (res.status != 200)
    throw std::runtime_error("search: HTTP " + std::to_string(res.status) + " " + res.body);
  ranked out;
  for (auto& item : json::parse(res.body).items("/retrieval_results"))
    out.emplace_back(item.str("/result_id"), item.number("/score"));
  return out;
}

TEST_F(concurrency_test, searches_racing_an_ingest_see_one_version_whole) {
  ASSERT_EQ(request(port(), "POST", "/api/v1/kbs", R"({"name":"harbour"})").status, 201);
  ASSERT_EQ(
      request(port(), "POST", "/api/v1/kbs/harbour/documents", harbour_documents(1, 12)).status,
      200);
  const std::vector<std::string> queries = {
      "saffron",        "indigo captain", "salt from Port Quellin", "timber pilot",
      "copper cook",    "tea bosun",      "ship number 3 carries",  "version 2",
      "trades saffron", "indigo and tea", "copper and salt",        "ship 7",
  };
  std::map<std::string, ranked> before, after;
  for (auto& q : queries)
    before[q] = search(port(), q);

  // Searching threads run until the ingest has answered (at least one
  // search each), then every query once more; a search sent after the
  // ingest answered must see it.
  std::atomic<bool> ingested{false};
  std::vector<std::vector<std::pair<std::string, ranked>>> racing(8), later(8);
  std::vector<std::string> failures(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      try {
        size_t i = t;
        do {
          auto& q = queries[i++ % queries.size()];
          racing[t].emplace_back(q, search(port(), q));
        } while (!ingested);
        for (size_t i = 0; i < queries.size(); ++i)
          later[t].emplace_back(queries[i], search(port(), queries[i]));
      } catch (const std::exception& e) {
        failures[t] = e.what();
        ingested = true;
      }
    });
  auto ingest = request(port(), "POST", "/api/v1/kbs/harbour/documents", harbour_documents(2, 16));
  ingested = true;
  for (auto& th : threads)
    th.join();
  ASSERT_EQ(ingest.status, 200) << ingest.body;
  for (auto& f : failures)
    ASSERT_TRUE(f.empty()) << f;

  size_t differing = 0;
  for (auto& q : queries) {
    after[q] = search(port(), q);
    differing += before[q] != after[q];
  }
  ASSERT_GT(differing, queries.size() / 2) << "the versions must be told apart";
  size_t checked = 0;
  for (size_t t = 0; t < 8; ++t) {
    for (auto& [q, got] : racing[t]) {
      EXPECT_TRUE(got == before[q] || got == after[q]) << q << ": a mix of versions";
      ++checked;
    }
    for (auto& [q, got] : later[t])
      EXPECT_EQ(got, after[q]) << q << ": sent after the ingest answered";
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace ragtor::test
