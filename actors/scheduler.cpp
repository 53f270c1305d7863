#include "actors/scheduler.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <vector>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/logger.hpp>

// CAF's worker loop (caf/scheduler/worker.hpp, instantiated here alone for
// this file's policy) tells CAF's logger which actor it is about to run:
// a dynamic_cast from the job to abstract_actor (a cast across the
// hierarchy, about 1,200 instructions, 23 a turn) before every resume.
// The actor's resume tells the logger the same again (libcaf's
// scheduled_actor::resume), and ragtor logs through spdlog, so the
// worker's part is left out: defined to nothing before the worker's
// header is read (docs/performance.md, "A batch without savepoints; the
// worker's cast; ...").
#undef CAF_PUSH_AID_FROM_PTR
#define CAF_PUSH_AID_FROM_PTR(ptr) static_cast<void>(0)

#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>

namespace ragtor {

namespace {

using caf::detail::simple_actor_clock;

// The schedule under a mutex (see scheduler.hpp). Derived from CAF's
// thread_safe_actor_clock only because the coordinator's clock() must
// return one; none of its own machinery is used.
//
// Re-entry: the schedule holds strong references to actors (a timeout's
// owner, a delayed message's receiver and sender). Dropping the last one
// destroys an actor that never terminated, and its destructor cancels its
// timeouts — on the thread that is changing the schedule, under the lock.
// Such a call is queued and runs once the change is done (CAF's clock
// queues every call for the same reason).
class locked_clock final : public caf::detail::thread_safe_actor_clock {
public:
  void set_ordinary_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                            uint64_t id) override {
    setting(t, self, [=, this](caf::abstract_actor* a) {
      simple_actor_clock::set_ordinary_timeout(t, a, type, id);
    });
  }

  void set_request_timeout(time_point t, caf::abstract_actor* self, caf::message_id id) override {
    setting(t, self, [=, this](caf::abstract_actor* a) {
      simple_actor_clock::set_request_timeout(t, a, id);
    });
  }

  void set_multi_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                         uint64_t id) override {
    setting(t, self, [=, this](caf::abstract_actor* a) {
      simple_actor_clock::set_multi_timeout(t, a, type, id);
    });
  }

  // Cancellations keep the actor's id only: a destroyed actor's pointer
  // does not outlive the call.
  void cancel_ordinary_timeout(caf::abstract_actor* self, caf::atom_value type) override {
    locked([this, aid = self->id(), type] { handle(ordinary_timeout_cancellation{aid, type}); });
  }

  void cancel_request_timeout(caf::abstract_actor* self, caf::message_id id) override {
    locked([this, aid = self->id(), id] { handle(request_timeout_cancellation{aid, id}); });
  }

  void cancel_timeouts(caf::abstract_actor* self) override {
    locked([this, aid = self->id()] {
      handle(timeouts_cancellation{aid});
      handle(timeouts_cancellation{own_timers_key(aid)});
    });
  }

  // A delayed message. One an actor sent itself (a timer: delayed_send to
  // self, not a request) is indexed by the actor, so that its termination
  // (local_actor::cleanup cancels its timeouts) drops the entry. CAF keeps
  // every delayed message, and the strong reference to its receiver, until
  // it is due: each stream's 5-second watchdog kept the finished stream
  // actor for 5 seconds, 60 MiB at 64 streams (docs/performance.md,
  // "Timers that die with their actor"). They are indexed under their own
  // key (own_timers_key), apart from the actor's timeouts: cancelling a
  // request's timeout searches the actor's entries, and need not search
  // its timers too.
  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override {
    bool own_timer = receiver && content && content->sender == receiver
                     && !content->mid.is_request();
    auto box = std::make_shared<caf::mailbox_element_ptr>(std::move(content));
    adding(t, [=, this] {
      if (!own_timer)
        return simple_actor_clock::schedule_message(t, receiver, std::move(*box));
      auto key = own_timers_key(receiver->id());
      auto i = schedule_.emplace(t, std::make_unique<actor_msg>(t, receiver, std::move(*box)));
      i->second->backlink = actor_lookup_.emplace(key, i);
    });
  }

  void schedule_message(time_point t, caf::group target, caf::strong_actor_ptr sender,
                        caf::message content) override {
    adding(t, [=, this] { simple_actor_clock::schedule_message(t, target, sender, content); });
  }

  void cancel_all() override {
    locked([this] { drop_everything(); });
  }

  // The clock thread: sleeps until the earliest deadline (or a new, earlier
  // one), then ships what is due. Shipping enqueues messages to actors,
  // which never sets a timer; an actor destroyed meanwhile queues its
  // cancellation (see above).
  void run() {
    std::unique_lock lock{mx_};
    holder = this;
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
      run_queued();
    }
    // What never came due is dropped here, while the system still runs,
    // not by the destructor (as CAF's clock does at shutdown).
    drop_everything();
    run_queued();
    holder = nullptr;
  }

  void stop() {
    std::lock_guard lock{mx_};
    stopping_ = true;
    cv_.notify_one();
  }

  clock_counts counts() {
    std::lock_guard lock{mx_};
    return {operations_, wakeups_, schedule_.size()};
  }

private:
  // Where an actor's own timers are indexed: its id with the top bit set
  // (ids count up from 1 and never reach it).
  static caf::actor_id own_timers_key(caf::actor_id aid) { return aid | (caf::actor_id{1} << 63); }

  // Runs `op` under the lock, or queues it when this thread holds the lock
  // already (re-entry, see above).
  template <class F>
  void locked(F&& op) {
    ++operations_;  // (a plain counter: read for tests under the lock)
    if (holder == this) {
      queued_.emplace_back(std::forward<F>(op));
      return;
    }
    std::lock_guard lock{mx_};
    holder = this;
    op();
    run_queued();
    holder = nullptr;
  }

  // An entry due at `t` is added by `op`; the sleeping thread is woken if
  // it sleeps past `t`.
  template <class F>
  void adding(time_point t, F&& op) {
    locked([this, t, op = std::forward<F>(op)]() mutable {
      op();
      if (t < sleeping_until_) {
        sleeping_until_ = time_point::min();
        ++wakeups_;
        cv_.notify_one();
      }
    });
  }

  // An actor's own timeout due at `t`, set by `op(actor)`. The caller runs
  // the actor, so its pointer is good for the call; only a queued call
  // keeps a reference to it.
  template <class F>
  void setting(time_point t, caf::abstract_actor* self, F op) {
    if (holder == this)
      return adding(t, [op, ptr = caf::strong_actor_ptr{self->ctrl()}] { op(ptr->get()); });
    adding(t, [op, self] { op(self); });
  }

  void run_queued() {
    while (!queued_.empty()) {
      auto ops = std::move(queued_);
      queued_.clear();
      for (auto& op : ops)
        op();
    }
  }

  // Empties the schedule; the entries die after both maps are consistent.
  void drop_everything() {
    auto dead = std::move(schedule_);
    schedule_.clear();
    actor_lookup_.clear();
    dead.clear();
  }

  static thread_local locked_clock* holder;  // the clock whose lock this thread holds

  std::mutex mx_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // When the sleeping thread wakes by itself; min() while it is awake (or
  // already woken), so that no operation signals it needlessly.
  time_point sleeping_until_ = time_point::min();
  std::vector<std::function<void()>> queued_;
  std::atomic<uint64_t> operations_{0};
  uint64_t wakeups_ = 0;
};

thread_local locked_clock* locked_clock::holder = nullptr;

// CAF's work stealing, but a job enqueued from outside the workers (the
// HTTP and model I/O threads, the store's threads, the clock) wakes a
// sleeping worker after releasing the worker's lock, not while holding
// it. Woken under the lock, the worker ran only to block on that lock
// again and be woken a second time when the enqueuer released it: two
// futex calls and a context switch more per wake-up, which slow streams
// (a token every 50 ms per stream, workers often asleep between them)
// pay for nearly every token. The worker still checks its queue under the
// lock before it sleeps, so a job appended before the enqueuer reads
// `sleeping` is never missed.
class stealing_policy : public caf::policy::work_stealing {
public:
  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    auto& data = d(self);
    data.queue.append(job);
    bool asleep;
    {
      std::lock_guard guard{data.waitdata.lock};
      asleep = data.waitdata.sleeping;
    }
    if (asleep)
      data.waitdata.cv.notify_one();
  }
};

using stealing = caf::scheduler::coordinator<stealing_policy>;

class coordinator final : public stealing {
public:
  explicit coordinator(caf::actor_system& sys) : stealing(sys) {}

  locked_clock& clock() noexcept override { return clock_; }

protected:
  // The clock's thread replaces CAF's: one per process, which only sleeps
  // until a deadline and ships what is due (it runs no actor).
  void start() override {
    timer_ = std::thread{[this] {
      caf::detail::set_thread_name("ragtor.clock");
      clock_.run();
    }};
    stealing::start();
    // CAF's coordinator started its own clock thread too, for a clock
    // nothing uses now: it ends here, so the process keeps one clock
    // thread, as with CAF's clock (stop() joins it).
    stealing::clock().cancel_dispatch_loop();
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
