#include "protocol/log.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include <spdlog/spdlog.h>

namespace ragtor::log {

namespace {

std::mutex mx;
std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers;

bool known(std::string_view name) {
  return std::any_of(components.begin(), components.end(),
                     [&](const char* c) { return name == c; });
}

}  // namespace

spdlog::logger& get(std::string_view name) {
  std::lock_guard lock{mx};
  auto i = loggers.find(name);
  if (i == loggers.end()) {
    auto base = spdlog::default_logger();
    auto l = std::make_shared<spdlog::logger>(std::string{name}, base->sinks().begin(),
                                              base->sinks().end());
    l->set_level(base->level());
    l->flush_on(base->flush_level());
    i = loggers.emplace(std::string{name}, std::move(l)).first;
  }
  return *i->second;
}

void rebind() {
  for (auto* c : components)
    get(c);
  std::lock_guard lock{mx};
  auto base = spdlog::default_logger();
  for (auto& [name, l] : loggers) {
    l->sinks() = base->sinks();
    l->set_level(base->level());
    l->flush_on(base->flush_level());
  }
}

std::vector<std::pair<std::string, std::string>> levels() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto* c : components) {
    auto& l = get(c);
    auto name = spdlog::level::to_string_view(l.level());
    std::string level{name.data(), name.size()};
    out.emplace_back(c, level == "warning" ? "warn" : level);
  }
  return out;
}

std::optional<std::string> set_level(std::string_view name, std::string_view level) {
  static constexpr std::array<std::string_view, 7> names{"trace", "debug", "info",    "warn",
                                                         "error", "critical", "off"};
  if (std::find(names.begin(), names.end(), level) == names.end())
    return "unknown level \"" + std::string{level}
           + "\" (known: trace, debug, info, warn, error, critical, off)";
  if (name != "*" && !known(name))
    return "unknown logger \"" + std::string{name} + "\"";
  // from_str knows "warning" and "warn" alike.
  auto lv = spdlog::level::from_str(std::string{level});
  if (name == "*") {
    for (auto* c : components)
      get(c).set_level(lv);
  } else {
    get(name).set_level(lv);
  }
  return std::nullopt;
}

}  // namespace ragtor::log
