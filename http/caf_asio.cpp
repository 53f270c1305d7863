#include "http/caf_asio.hpp"

#include <utility>

#include <boost/asio/io_context.hpp>
#include <caf/actor_companion.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_execution_unit.hpp>

namespace ragtor::http {

namespace net = boost::asio;

net::execution_context::id caf_bridge::id;

caf::strong_actor_ptr spawn_companion(caf::actor_system& sys,
                                      std::function<void(caf::mailbox_element_ptr)> on_message) {
  auto companion = caf::actor_cast<caf::strong_actor_ptr>(
      sys.spawn<caf::actor_companion, caf::hidden>());
  as_companion(companion)->on_enqueue(std::move(on_message));
  return companion;
}

caf::actor_companion* as_companion(const caf::strong_actor_ptr& companion) {
  return static_cast<caf::actor_companion*>(caf::actor_cast<caf::abstract_actor*>(companion));
}

void mute_companion(const caf::strong_actor_ptr& companion) {
  as_companion(companion)->on_enqueue(nullptr);
}

void end_companion(const caf::strong_actor_ptr& companion) {
  mute_companion(companion);
  caf::scoped_execution_unit unit{&as_companion(companion)->home_system()};
  as_companion(companion)->cleanup(caf::make_error(caf::exit_reason::user_shutdown), &unit);
}

caf_bridge::caf_bridge(net::execution_context& ctx) : service(ctx) {}

caf_bridge::~caf_bridge() = default;

std::pair<caf::message_id, caf::strong_actor_ptr> caf_bridge::add(caf::actor_system& sys,
                                                                  std::shared_ptr<call> c) {
  std::lock_guard lock{mx_};
  if (!companion_) {
    companion_ = spawn_companion(
        sys, [this](caf::mailbox_element_ptr ptr) { on_reply(std::move(ptr)); });
  }
  auto id = ++last_id_;
  calls_.emplace(id, std::move(c));
  // A request id in CAF's normal category, as a local_actor makes them.
  return {caf::make_message_id(id), companion_};
}

std::shared_ptr<caf_bridge::call> caf_bridge::take(uint64_t id) {
  std::lock_guard lock{mx_};
  auto i = calls_.find(id);
  if (i == calls_.end())
    return nullptr;
  auto c = std::move(i->second);
  calls_.erase(i);
  return c;
}

// On the replying actor's thread (or the middleman's, for a reply from
// another node). Anything but a reply to a waiting call is dropped.
void caf_bridge::on_reply(caf::mailbox_element_ptr ptr) {
  if (!ptr || !ptr->mid.is_response())
    return;
  auto c = take(ptr->mid.request_id().integer_value());
  if (!c)
    return;  // timed out meanwhile
  auto ex = c->timer.get_executor();
  net::post(ex, [c = std::move(c), reply = ptr->move_content_to_message()]() mutable {
    c->finish(std::move(reply));
  });
}

std::pair<caf::strong_actor_ptr, std::unordered_map<uint64_t, std::shared_ptr<caf_bridge::call>>>
caf_bridge::detach() {
  std::lock_guard lock{mx_};
  return {std::move(companion_), std::exchange(calls_, {})};
}

void caf_bridge::close() {
  auto [companion, calls] = detach();
  // Waits for a reply being handed over on another thread; none after.
  if (companion)
    end_companion(companion);
}

void caf_bridge::shutdown() {
  // The io_context goes: no thread runs its handlers any more. Without a
  // close() before, the actor system may be gone: the reply handler is
  // removed, which touches no system, and the companion is left as it is
  // (CAF would clean up an actor never ended when its last reference goes,
  // through its system). The server always closes its bridges first.
  auto [companion, calls] = detach();
  if (companion) {
    mute_companion(companion);
    companion.release();  // deliberately kept: see above
  }
}

size_t caf_bridge::waiting() {
  std::lock_guard lock{mx_};
  return calls_.size();
}

void close_caf_bridge(net::io_context& ioc) {
  if (net::has_service<caf_bridge>(ioc))
    net::use_service<caf_bridge>(ioc).close();
}

}  // namespace ragtor::http
