#include "protocol/event_feed.hpp"

#include <mutex>
#include <unordered_map>

namespace ragtor {

namespace {

struct feed_registry {
  std::mutex mtx;
  std::unordered_map<const caf::actor_control_block*, std::shared_ptr<event_feed>> feeds;
};

feed_registry& registry() {
  static feed_registry r;
  return r;
}

}  // namespace

void register_local_feed(const caf::actor_control_block* sink, std::shared_ptr<event_feed> feed) {
  auto& r = registry();
  std::lock_guard guard{r.mtx};
  r.feeds[sink] = std::move(feed);
}

void unregister_local_feed(const caf::actor_control_block* sink) {
  auto& r = registry();
  std::lock_guard guard{r.mtx};
  r.feeds.erase(sink);
}

std::shared_ptr<event_feed> find_local_feed(const caf::actor_control_block* sink) {
  auto& r = registry();
  std::lock_guard guard{r.mtx};
  auto i = r.feeds.find(sink);
  return i == r.feeds.end() ? nullptr : i->second;
}

}  // namespace ragtor
