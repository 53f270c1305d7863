// Many simultaneous streams: each one is complete and correct on its own and
// every turn is persisted. Correctness only; speed belongs to bench/.
#include <thread>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ragtor::test
