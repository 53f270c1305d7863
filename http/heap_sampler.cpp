#include "http/heap_sampler.hpp"

#include <malloc.h>
#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace ragtor::http {
namespace {

// One thread, started by the first scrape, asleep between them.
class sampler {
public:
  ~sampler() {
    {
      std::lock_guard lock{mu_};
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable())
      thread_.join();
  }

  void request(std::function<void(heap_figures)> done) {
    {
      std::lock_guard lock{mu_};
      waiting_.push_back(std::move(done));
      if (!thread_.joinable())
        thread_ = std::thread{[this] { run(); }};
    }
    cv_.notify_one();
  }

private:
  void run() {
    pthread_setname_np(pthread_self(), "heap-sampler");
    std::unique_lock lock{mu_};
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty(); });
      if (stop_)
        return;
      auto batch = std::move(waiting_);
      waiting_.clear();
      lock.unlock();
      auto m = mallinfo2();
      heap_figures f{static_cast<double>(m.uordblks + m.hblkhd), static_cast<double>(m.fordblks)};
      for (auto& done : batch)
        done(f);
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void(heap_figures)>> waiting_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

void sample_heap(std::function<void(heap_figures)> done) {
  static sampler s;
  s.request(std::move(done));
}

}  // namespace ragtor::http
