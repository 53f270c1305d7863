// Store append benchmark: messages/s acknowledged and acknowledgement
// latency (p50/p99) with 1, 16 and 256 concurrent writers, for group commit
// (one transaction per flush) versus the naive one-transaction-per-message
// baseline, measured in the same run. SQLite always; PostgreSQL too when
// RAGTOR_BENCH_POSTGRES_DSN names a scratch database. Prints a table; never
// asserts on timing.
//
//   build/bench_store_append [messages_per_writer_scale=1]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "persistence/migrations.hpp"
#include "persistence/postgres/pg_backend.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "persistence/store_executor.hpp"

using namespace ragtor;
using bench::percentile;
using clock_type = std::chrono::steady_clock;

namespace {

struct result {
  double msgs_per_s;
  double p50_ms;
  double p99_ms;
  uint64_t batches;
};


// Each writer appends `per_writer` messages one after another, waiting for
// each acknowledgement (like a session storing its turns).
result run(const std::function<std::unique_ptr<store_backend>()>& open, size_t writers,
           size_t per_writer, size_t max_batch) {
  auto writer_db = open();
  apply_migrations(*writer_db, embedded_migrations());
  std::vector<std::unique_ptr<store_backend>> readers;
  readers.push_back(open());
  store_executor ex{std::move(writer_db), std::move(readers), max_batch};
  std::vector<std::vector<double>> latencies(writers);
  auto started = clock_type::now();
  std::vector<std::thread> threads;
  for (size_t w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      std::mutex mx;
      std::condition_variable cv;
      std::string conversation;
      for (size_t i = 0; i < per_writer; ++i) {
        bool done = false;
        auto t0 = clock_type::now();
        ex.submit_write(
            [&, w](store_backend& db) {
              auto t =
                  db.begin_turn("bench", "w" + std::to_string(w) + "-" + new_id().substr(20),
                                "a message of moderate length for the benchmark", "", now_ms());
              (void)t;
            },
            [&](const std::string& err) {
              if (!err.empty())
                std::fprintf(stderr, "write failed: %s\n", err.c_str());
              std::lock_guard lock{mx};
              done = true;
              cv.notify_one();
            });
        std::unique_lock lock{mx};
        cv.wait(lock, [&] { return done; });
        latencies[w].push_back(
            std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
      }
    });
  for (auto& t : threads)
    t.join();
  auto secs = std::chrono::duration<double>(clock_type::now() - started).count();
  auto stats = ex.snapshot();
  ex.stop();
  std::vector<double> all;
  for (auto& l : latencies)
    all.insert(all.end(), l.begin(), l.end());
  return {static_cast<double>(all.size()) / secs, percentile(all, 0.5), percentile(all, 0.99),
          stats.committed_batches};
}

void bench_backend(const char* name, const std::function<std::unique_ptr<store_backend>()>& open,
                   const std::function<void()>& reset, size_t scale) {
  for (size_t writers : {1u, 16u, 256u}) {
    // Bounded work: about 2000 messages per configuration (times scale).
    size_t per_writer = std::max<size_t>(1, scale * 2000 / writers / (writers == 1 ? 4 : 1));
    for (size_t batch : {size_t{256}, size_t{1}}) {
      reset();
      auto r = run(open, writers, per_writer, batch);
      std::printf("%-8s %-13s %8zu %9zu %12.0f %10.2f %10.2f %9llu\n", name,
                  batch == 1 ? "naive(1/tx)" : "group-commit", writers, writers * per_writer,
                  r.msgs_per_s, r.p50_ms, r.p99_ms, static_cast<unsigned long long>(r.batches));
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t scale = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  std::printf("%-8s %-13s %8s %9s %12s %10s %10s %9s\n", "backend", "mode", "writers", "messages",
              "msgs/s", "p50_ms", "p99_ms", "commits");
  auto dir = std::filesystem::temp_directory_path() / ("ragtor-bench-" + new_id());
  std::filesystem::create_directories(dir);
  auto file = dir / "bench.db";
  bench_backend(
      "sqlite", [&] { return std::make_unique<sqlite_backend>(file); },
      [&] {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
      },
      scale);
  std::filesystem::remove_all(dir);
  if (auto* dsn = std::getenv("RAGTOR_BENCH_POSTGRES_DSN")) {
    std::string d{dsn};
    bench_backend(
        "postgres", [&] { return std::make_unique<pg_backend>(d); },
        [&] { pg_backend{d}.execute_script("DROP SCHEMA public CASCADE; CREATE SCHEMA public;"); },
        scale);
  } else {
    std::printf("(set RAGTOR_BENCH_POSTGRES_DSN to include PostgreSQL)\n");
  }
  return 0;
}
