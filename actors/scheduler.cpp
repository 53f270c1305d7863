#include "actors/scheduler.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>

namespace ragtor {

namespace {

using caf::detail::simple_actor_clock;

// The schedule under a mutex (see scheduler.hpp). Derived from CAF's
// thread_safe_actor_clock only because the coordinator's clock() must
// return one; none of its own machinery is used.
class locked_clock final : public caf::detail::thread_safe_actor_clock {
public:
  void set_ordinary_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                            uint64_t id) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::set_ordinary_timeout(t, self, type, id);
    added(t);
  }

  void set_request_timeout(time_point t, caf::abstract_actor* self, caf::message_id id) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::set_request_timeout(t, self, id);
    added(t);
  }

  void set_multi_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                         uint64_t id) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::set_multi_timeout(t, self, type, id);
    added(t);
  }

  void cancel_ordinary_timeout(caf::abstract_actor* self, caf::atom_value type) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::cancel_ordinary_timeout(self, type);
    ++operations_;
  }

  void cancel_request_timeout(caf::abstract_actor* self, caf::message_id id) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::cancel_request_timeout(self, id);
    ++operations_;
  }

  void cancel_timeouts(caf::abstract_actor* self) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::cancel_timeouts(self);
    ++operations_;
  }

  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::schedule_message(t, std::move(receiver), std::move(content));
    added(t);
  }

  void schedule_message(time_point t, caf::group target, caf::strong_actor_ptr sender,
                        caf::message content) override {
    std::lock_guard lock{mx_};
    simple_actor_clock::schedule_message(t, std::move(target), std::move(sender),
                                         std::move(content));
    added(t);
  }

  void cancel_all() override {
    std::lock_guard lock{mx_};
    simple_actor_clock::cancel_all();
    ++operations_;
  }

  // The clock thread: sleeps until the earliest deadline (or a new, earlier
  // one), then ships what is due. Shipping enqueues messages to actors,
  // which never calls back into the clock.
  void run() {
    std::unique_lock lock{mx_};
    while (!stopping_) {
      if (schedule_.empty()) {
        sleeping_until_ = time_point::max();
        cv_.wait(lock);
      } else {
        sleeping_until_ = schedule_.begin()->first;
        if (sleeping_until_ > now())
          cv_.wait_until(lock, sleeping_until_);
      }
      sleeping_until_ = time_point::min();  // awake: nobody needs to wake it
      trigger_expired_timeouts();
    }
  }

  void stop() {
    std::lock_guard lock{mx_};
    stopping_ = true;
    cv_.notify_one();
  }

  clock_counts counts() {
    std::lock_guard lock{mx_};
    return {operations_, wakeups_};
  }

private:
  // Under mx_: an entry due at `t` was added; the thread sleeps past it.
  void added(time_point t) {
    ++operations_;
    if (t < sleeping_until_) {
      sleeping_until_ = time_point::min();
      ++wakeups_;
      cv_.notify_one();
    }
  }

  std::mutex mx_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // When the sleeping thread wakes by itself; min() while it is awake (or
  // already woken), so that no operation signals it needlessly.
  time_point sleeping_until_ = time_point::min();
  uint64_t operations_ = 0;
  uint64_t wakeups_ = 0;
};

using stealing = caf::scheduler::coordinator<caf::policy::work_stealing>;

class coordinator final : public stealing {
public:
  explicit coordinator(caf::actor_system& sys) : stealing(sys) {}

  locked_clock& clock() noexcept override { return clock_; }

protected:
  void start() override {
    timer_ = std::thread{[this] {
      caf::detail::set_thread_name("ragtor.clock");
      clock_.run();
    }};
    stealing::start();
  }

  void stop() override {
    // The workers and utility actors stop first: until they have, actors
    // may still set or cancel timeouts.
    stealing::stop();
    clock_.stop();
    timer_.join();
  }

private:
  locked_clock clock_;
  std::thread timer_;
};

}  // namespace

void use_ragtor_scheduler(caf::actor_system_config& cfg) {
  cfg.module_factories.push_back(
      [](caf::actor_system& sys) -> caf::actor_system::module* { return new coordinator(sys); });
}

clock_counts clock_counts_of(caf::actor_system& sys) {
  if (auto* c = dynamic_cast<locked_clock*>(&sys.clock()))
    return c->counts();
  return {};
}

}  // namespace ragtor
