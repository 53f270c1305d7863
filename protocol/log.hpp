// Named loggers (docs/admin.md "Loggers"): every component logs through its
// own spdlog logger, so an operator can change one component's level at run
// time (PUT /admin/api/loggers) without drowning in the others. All of them
// write to the sinks of the default logger `setup_logging` configures.
//
//   namespace { const log::component lg{"store"}; }
//   lg->info("...", ...);
#pragma once

#include <array>
#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

namespace ragtor::log {

// Every component with a logger, in the order the console lists them.
inline constexpr std::array<const char*, 13> components{
    "serve",  "http",       "session", "stream", "router", "agents", "retrieval",
    "kb",     "summarizer", "planner", "llm",    "store",  "cluster"};

// The logger of `name` (one of `components`), created on first use.
spdlog::logger& get(std::string_view name);

// A file's handle on its component's logger: the lookup happens once.
class component {
public:
  explicit component(const char* name) : name_(name) {}
  spdlog::logger* operator->() const {
    auto* p = cached_.load(std::memory_order_acquire);
    if (!p) {
      p = &get(name_);
      cached_.store(p, std::memory_order_release);
    }
    return p;
  }

private:
  const char* name_;
  mutable std::atomic<spdlog::logger*> cached_{nullptr};
};

// Points every component logger at the default logger's sinks and level
// (after setup_logging replaced the default logger).
void rebind();

// Every component and its level name, in `components` order.
std::vector<std::pair<std::string, std::string>> levels();

// Sets the level of `name` ("*" = every component) to `level` (trace,
// debug, info, warn, error, critical, off); the error names what is wrong.
std::optional<std::string> set_level(std::string_view name, std::string_view level);

}  // namespace ragtor::log
