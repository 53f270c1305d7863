// Group commit for a store backend. A writer thread owns one connection: it
// takes every queued write job (up to max_batch), runs them in ONE
// transaction, commits, and only then reports each job's outcome. A
// failing job is undone alone: when one throws, the batch is rolled back
// and runs again with each job inside its own savepoint (run_batch). A pool of
// reader threads, each with its own connection, serves read jobs. None of
// them ever runs on a CAF scheduler thread. In `inline` mode (deterministic tests) jobs run on
// the submitting thread, one transaction each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "persistence/store_backend.hpp"

namespace ragtor {

class store_executor {
public:
  // Runs inside the transaction; throws store_error to fail the job. A
  // write job's work runs again when another job of its batch failed (its
  // first run rolled back), so it writes only to the database and to its
  // own result, and may be called more than once.
  using work_fn = std::function<void(store_backend&)>;
  // Called after the outcome is durable (or known failed): error is empty
  // on success. Runs on the executor's thread.
  using done_fn = std::function<void(const std::string& error)>;

  struct stats {
    uint64_t queued = 0;
    uint64_t committed_batches = 0;
    uint64_t committed_jobs = 0;
    uint64_t failed_jobs = 0;
    // Batches run again, a savepoint per job, because a job failed.
    uint64_t rerun_batches = 0;
  };

  store_executor(std::unique_ptr<store_backend> writer,
                 std::vector<std::unique_ptr<store_backend>> readers, size_t max_batch,
                 bool run_inline = false);
  ~store_executor();
  store_executor(const store_executor&) = delete;
  store_executor& operator=(const store_executor&) = delete;

  void submit_write(work_fn work, done_fn done);
  void submit_read(work_fn work, done_fn done);

  // Runs every queued job, then joins the threads. Idempotent.
  void stop();

  stats snapshot() const;

private:
  struct job {
    work_fn work;
    done_fn done;
  };
  struct lane {
    std::mutex mx;
    std::condition_variable cv;
    std::deque<job> jobs;
    bool stopping = false;
    std::vector<std::thread> threads;
  };

  void write_loop();
  void read_loop(store_backend& reader);
  void run_batch(std::deque<job>& batch);
  bool run_unisolated(std::deque<job>& batch);
  bool run_isolated(std::deque<job>& batch, std::vector<std::string>& errors);
  void run_read(store_backend& reader, job& j);

  std::unique_ptr<store_backend> writer_;
  std::vector<std::unique_ptr<store_backend>> readers_;
  size_t max_batch_;
  bool inline_;
  lane writes_;
  lane reads_;
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> committed_batches_{0};
  std::atomic<uint64_t> committed_jobs_{0};
  std::atomic<uint64_t> failed_jobs_{0};
  std::atomic<uint64_t> rerun_batches_{0};
};

}  // namespace ragtor
