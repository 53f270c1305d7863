#include "persistence/store_executor.hpp"

#include <pthread.h>

#include <chrono>

#include <spdlog/spdlog.h>

#include "protocol/log.hpp"
#include "protocol/metrics.hpp"

namespace ragtor {

namespace {
const log::component lg{"store"};
}  // namespace

store_executor::store_executor(std::unique_ptr<store_backend> writer,
                               std::vector<std::unique_ptr<store_backend>> readers,
                               size_t max_batch, bool run_inline)
    : writer_(std::move(writer)),
      readers_(std::move(readers)),
      max_batch_(std::max<size_t>(1, max_batch)),
      inline_(run_inline) {
  if (inline_)
    return;
  writes_.threads.emplace_back([this] {
    pthread_setname_np(pthread_self(), "store-write");
    write_loop();
  });
  for (auto& r : readers_)
    reads_.threads.emplace_back([this, db = r.get()] {
      pthread_setname_np(pthread_self(), "store-read");
      read_loop(*db);
    });
}

store_executor::~store_executor() {
  stop();
}

void store_executor::submit_write(work_fn work, done_fn done) {
  if (inline_) {
    std::deque<job> one;
    one.push_back(job{std::move(work), std::move(done)});
    run_batch(one);
    return;
  }
  {
    std::lock_guard lock{writes_.mx};
    if (writes_.stopping) {
      done("the store is shutting down");
      return;
    }
    writes_.jobs.push_back(job{std::move(work), std::move(done)});
    ++queued_;
  }
  writes_.cv.notify_one();
}

void store_executor::submit_read(work_fn work, done_fn done) {
  job j{std::move(work), std::move(done)};
  if (inline_) {
    run_read(*readers_.front(), j);
    return;
  }
  {
    std::lock_guard lock{reads_.mx};
    if (reads_.stopping) {
      j.done("the store is shutting down");
      return;
    }
    reads_.jobs.push_back(std::move(j));
  }
  reads_.cv.notify_one();
}

void store_executor::write_loop() {
  for (;;) {
    std::deque<job> batch;
    {
      std::unique_lock lock{writes_.mx};
      writes_.cv.wait(lock, [&] { return writes_.stopping || !writes_.jobs.empty(); });
      if (writes_.jobs.empty())
        return;  // stopping and drained
      while (!writes_.jobs.empty() && batch.size() < max_batch_) {
        batch.push_back(std::move(writes_.jobs.front()));
        writes_.jobs.pop_front();
      }
      queued_ -= batch.size();
    }
    run_batch(batch);
  }
}

// Most batches have no job that fails, so a batch first runs without a
// savepoint per job: on SQLite a savepoint copies every page its job
// changes (the statement journal), on PostgreSQL it is a subtransaction.
// A job that throws rolls that transaction back, and the batch runs again
// with a savepoint per job, which undoes a failing job alone. So a job's
// work may run twice; it writes only to the database and to its own
// result (store_executor.hpp).
void store_executor::run_batch(std::deque<job>& batch) {
  auto started = std::chrono::steady_clock::now();
  std::vector<std::string> errors(batch.size());
  std::string batch_error;
  bool committed = false;
  try {
    if (!run_unisolated(batch)) {
      ++rerun_batches_;
      committed = run_isolated(batch, errors);
    } else {
      committed = true;
    }
  } catch (const std::exception& e) {
    batch_error = e.what();
    try {
      writer_->rollback();
    } catch (const std::exception&) {
      // The connection is broken; the next batch reports it again.
    }
  }
  if (committed) {
    ++committed_batches_;
    auto& m = metrics::global();
    m.store_commit_duration.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    m.store_batch_size.observe(static_cast<double>(batch.size()));
  } else if (!batch_error.empty()) {
    lg->error("store: a batch of {} write(s) failed: {}", batch.size(), batch_error);
  }
  writer_->after_job();
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& err = batch_error.empty() ? errors[i] : batch_error;
    if (err.empty())
      ++committed_jobs_;
    else
      ++failed_jobs_;
    batch[i].done(err);
  }
}

// The batch's jobs one after another in one transaction, no savepoints
// (in_savepoint() inside a job takes none either). True once committed;
// false, rolled back, when a job threw.
bool store_executor::run_unisolated(std::deque<job>& batch) {
  struct not_isolating {
    store_backend& db;
    explicit not_isolating(store_backend& d) : db(d) { db.set_isolating(false); }
    ~not_isolating() { db.set_isolating(true); }
  };
  writer_->begin();
  {
    not_isolating scope{*writer_};
    try {
      for (auto& j : batch)
        j.work(*writer_);
    } catch (const std::exception&) {
      writer_->rollback();
      return false;
    }
  }
  writer_->commit();
  return true;
}

// The batch again, each job under a savepoint of its own so that a failing
// one is undone alone (its error in `errors`). A job alone has none: its
// transaction is all a savepoint would undo. True once committed.
bool store_executor::run_isolated(std::deque<job>& batch, std::vector<std::string>& errors) {
  writer_->begin();
  if (batch.size() == 1) {
    try {
      batch[0].work(*writer_);
    } catch (const std::exception& e) {
      errors[0] = e.what();
      writer_->rollback();
      return false;
    }
  } else {
    for (size_t i = 0; i < batch.size(); ++i)
      errors[i] = in_savepoint(*writer_, [&] { batch[i].work(*writer_); });
  }
  writer_->commit();
  return true;
}

void store_executor::read_loop(store_backend& reader) {
  for (;;) {
    job j;
    {
      std::unique_lock lock{reads_.mx};
      reads_.cv.wait(lock, [&] { return reads_.stopping || !reads_.jobs.empty(); });
      if (reads_.jobs.empty())
        return;
      j = std::move(reads_.jobs.front());
      reads_.jobs.pop_front();
    }
    run_read(reader, j);
  }
}

void store_executor::run_read(store_backend& reader, job& j) {
  std::string err;
  try {
    j.work(reader);
  } catch (const std::exception& e) {
    err = e.what();
  }
  reader.after_job();
  j.done(err);
}

void store_executor::stop() {
  for (auto* l : {&writes_, &reads_}) {
    {
      std::lock_guard lock{l->mx};
      l->stopping = true;
    }
    l->cv.notify_all();
  }
  for (auto* l : {&writes_, &reads_}) {
    for (auto& t : l->threads)
      if (t.joinable())
        t.join();
    l->threads.clear();
  }
}

store_executor::stats store_executor::snapshot() const {
  return {queued_.load(), committed_batches_.load(), committed_jobs_.load(), failed_jobs_.load(),
          rerun_batches_.load()};
}

}  // namespace ragtor
