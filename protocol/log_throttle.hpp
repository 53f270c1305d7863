// At most one log line per second from one call site (accept errors,
// refusals, waits for a file descriptor), whatever thread asks.
#pragma once

#include <atomic>
#include <chrono>
#include <limits>

namespace ragtor {

class log_throttle {
public:
  bool allow() {
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    auto last = last_.load(std::memory_order_relaxed);
    if (now - last < std::chrono::steady_clock::duration{std::chrono::seconds(1)}.count())
      return false;
    return last_.compare_exchange_strong(last, now);
  }

private:
  std::atomic<std::chrono::steady_clock::rep> last_{std::numeric_limits<long long>::min() / 2};
};

}  // namespace ragtor
