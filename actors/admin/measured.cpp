#include "actors/admin/measured.hpp"

#include <algorithm>

namespace ragtor {

std::pair<double, double> actor_stats::handler_ms() const {
  size_t n = std::min<uint64_t>(messages, window);
  if (n == 0)
    return {0.0, 0.0};
  std::array<uint32_t, window> xs;
  std::copy_n(recent_ns.begin(), n, xs.begin());
  auto at = [&](double q) {
    auto k = std::min(n - 1, static_cast<size_t>(q * static_cast<double>(n)));
    std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k),
                     xs.begin() + static_cast<std::ptrdiff_t>(n));
    return static_cast<double>(xs[k]) / 1e6;
  };
  double p50 = at(0.50);
  double p99 = at(0.99);
  return {p50, p99};
}

actor_directory& actor_directory::instance() {
  static actor_directory dir;
  return dir;
}

void actor_directory::per_system::uncount(const std::string& kind) {
  if (auto k = kinds.find(kind); k != kinds.end() && --k->second == 0)
    kinds.erase(k);
}

void actor_directory::add(const caf::actor_system& sys, directory_entry e) {
  std::lock_guard lock{mx_};
  auto& ps = systems_[&sys];
  auto [i, added] = ps.actors.try_emplace(e.id);
  if (!added)
    ps.uncount(i->second.kind);
  i->second = std::move(e);
  ++ps.kinds[i->second.kind];
}

void actor_directory::remove(const caf::actor_system& sys, uint64_t id) {
  std::lock_guard lock{mx_};
  if (auto i = systems_.find(&sys); i != systems_.end())
    if (auto j = i->second.actors.find(id); j != i->second.actors.end()) {
      i->second.uncount(j->second.kind);
      i->second.actors.erase(j);
    }
}

std::vector<directory_entry> actor_directory::list(const caf::actor_system& sys,
                                                   std::string_view kind) const {
  std::vector<directory_entry> out;
  std::lock_guard lock{mx_};
  auto i = systems_.find(&sys);
  if (i == systems_.end())
    return out;
  out.reserve(kind.empty() ? i->second.actors.size() : 16);
  for (auto& [id, e] : i->second.actors)
    if (kind.empty() || e.kind == kind)
      out.push_back(e);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

std::optional<directory_entry> actor_directory::find(const caf::actor_system& sys,
                                                     uint64_t id) const {
  std::lock_guard lock{mx_};
  if (auto i = systems_.find(&sys); i != systems_.end())
    if (auto j = i->second.actors.find(id); j != i->second.actors.end())
      return j->second;
  return std::nullopt;
}

std::optional<directory_entry> actor_directory::find_named(const caf::actor_system& sys,
                                                           std::string_view kind,
                                                           std::string_view name) const {
  std::lock_guard lock{mx_};
  if (auto i = systems_.find(&sys); i != systems_.end())
    for (auto& [id, e] : i->second.actors)
      if (e.kind == kind && e.name == name)
        return e;
  return std::nullopt;
}

size_t actor_directory::count(const caf::actor_system& sys, std::string_view kind) const {
  std::lock_guard lock{mx_};
  auto i = systems_.find(&sys);
  if (i == systems_.end())
    return 0;
  if (kind.empty())
    return i->second.actors.size();
  auto k = i->second.kinds.find(kind);
  return k == i->second.kinds.end() ? 0 : k->second;
}

std::map<std::string, size_t, std::less<>> actor_directory::kinds(
    const caf::actor_system& sys) const {
  std::lock_guard lock{mx_};
  auto i = systems_.find(&sys);
  return i == systems_.end() ? std::map<std::string, size_t, std::less<>>{} : i->second.kinds;
}

void actor_directory::set_node(const caf::actor_system& sys, std::string node) {
  std::lock_guard lock{mx_};
  systems_[&sys].node = std::move(node);
}

std::string actor_directory::node(const caf::actor_system& sys) const {
  std::lock_guard lock{mx_};
  if (auto i = systems_.find(&sys); i != systems_.end() && !i->second.node.empty())
    return i->second.node;
  return "local";
}

void actor_directory::forget(const caf::actor_system& sys) {
  std::lock_guard lock{mx_};
  systems_.erase(&sys);
}

void write_status_head(json_writer& w, std::string_view kind, std::string_view name,
                       std::string_view node, uint64_t id, const actor_stats& stats,
                       size_t mailbox) {
  auto [p50, p99] = stats.handler_ms();
  auto uptime = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - stats.started)
                    .count();
  w.begin_object()
      .field("kind", kind)
      .field("name", name)
      .field("node", node)
      .field("id", id)
      .field("uptime_ms", static_cast<int64_t>(uptime))
      .field("messages", stats.messages)
      .field("mailbox", static_cast<uint64_t>(mailbox))
      .key("handler_ms")
      .begin_object()
      .field("p50", p50)
      .field("p99", p99)
      .end_object()
      .field("errors", stats.errors)
      .field("last_error", stats.last_error);
}

}  // namespace ragtor
