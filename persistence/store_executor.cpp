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

void store_executor::run_batch(std::deque<job>& batch) {
  auto started = std::chrono::steady_clock::now();
  std::vector<std::string> errors(batch.size());
  std::string batch_error;
  bool committed = false;
  const bool alone = batch.size() == 1;
  try {
    writer_->begin();
    if (alone) {
      // A job alone: its transaction is all a savepoint would undo, so it
      // has none (two statements fewer; two round trips on PostgreSQL).
      try {
        batch[0].work(*writer_);
      } catch (const std::exception& e) {
        errors[0] = e.what();
      }
    } else {
      for (size_t i = 0; i < batch.size(); ++i)
        errors[i] = in_savepoint(*writer_, [&] { batch[i].work(*writer_); });
    }
    if (alone && !errors[0].empty()) {
      writer_->rollback();
    } else {
      writer_->commit();
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
  return {queued_.load(), committed_batches_.load(), committed_jobs_.load(), failed_jobs_.load()};
}

}  // namespace ragtor
