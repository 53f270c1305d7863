// ragtor's scheduler (actors/scheduler.hpp): CAF's work stealing with a
// clock that keeps its schedule under a mutex and wakes its thread only for
// an earlier deadline. Timeouts and delayed messages still arrive, an
// earlier deadline still wakes the sleeping thread, later ones do not, a
// system with timers pending still shuts down, and a message from outside
// the workers wakes a sleeping one.
#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <future>
#include <thread>

#include "actors/request_timeout.hpp"
#include "actors/scheduler.hpp"

using namespace ragtor;
using namespace std::chrono_literals;

namespace {

caf::actor_system_config& ragtor_config(caf::actor_system_config& cfg) {
  use_ragtor_scheduler(cfg);
  return cfg;
}

struct ragtor_scheduler : ::testing::Test {
  caf::actor_system_config cfg;
  caf::actor_system sys{ragtor_config(cfg)};
  caf::actor echo = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int x) { return x; }};
  });
  caf::actor silent = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int) -> caf::result<int> { return caf::delegated<int>{}; }};
  });
};

TEST_F(ragtor_scheduler, runs_the_system_on_its_clock) {
  caf::scoped_actor self{sys};
  auto before = clock_counts_of(sys).operations;
  self->request(echo, 1min, 1).receive([](int) {}, [](caf::error& e) { FAIL() << to_string(e); });
  EXPECT_GT(clock_counts_of(sys).operations, before) << "the request's timeout went to this clock";
}

TEST_F(ragtor_scheduler, a_request_nobody_answers_times_out) {
  caf::scoped_actor self{sys};
  bool timed_out = false;
  self->request(silent, 50ms, 1)
      .receive([](int) { FAIL() << "answered"; },
               [&](caf::error& e) { timed_out = e == caf::sec::request_timeout; });
  EXPECT_TRUE(timed_out);
}

TEST_F(ragtor_scheduler, an_earlier_deadline_wakes_the_sleeping_clock) {
  caf::scoped_actor self{sys};
  // The clock thread sleeps until this one...
  self->delayed_send(self, std::chrono::seconds(3600), std::string{"late"});
  // ...and must wake for this one, or it would arrive an hour late.
  self->delayed_send(self, 20ms, std::string{"early"});
  std::string got;
  self->receive([&](const std::string& s) { got = s; },
                caf::after(std::chrono::seconds(30)) >> [&] { got = "nothing"; });
  EXPECT_EQ(got, "early");
}

TEST_F(ragtor_scheduler, later_deadlines_do_not_wake_the_clock) {
  caf::scoped_actor self{sys};
  self->delayed_send(self, std::chrono::seconds(3600), std::string{"pending"});
  // Let the clock thread take the hour as its deadline.
  self->request(echo, std::chrono::seconds(7200), 0).receive([](int) {}, [](caf::error& e) { FAIL() << to_string(e); });
  auto before = clock_counts_of(sys);
  for (int i = 0; i < 500; ++i)
    self->request(echo, std::chrono::seconds(7200), i).receive([](int) {},
                                       [](caf::error& e) { FAIL() << to_string(e); });
  auto after = clock_counts_of(sys);
  EXPECT_GE(after.operations - before.operations, 500u);
  EXPECT_EQ(after.wakeups, before.wakeups)
      << "a deadline after the one the thread sleeps until needs no wake-up";
  // The system shuts down with the hour and the requests' entries pending.
}

// An actor that answers its requests only when told, last asked first.
caf::behavior answer_later(caf::event_based_actor* self) {
  auto held = std::make_shared<std::vector<std::pair<caf::response_promise, int>>>();
  return {
      [self, held](int x) -> caf::result<int> {
        held->emplace_back(self->make_response_promise(), x);
        return caf::delegated<int>{};
      },
      [held](const std::string&) {
        while (!held->empty()) {
          held->back().first.deliver(held->back().second);
          held->pop_back();
        }
      },
  };
}

// A long-lived actor's answered requests (tidy_request) leave the clock,
// answered in any order.
TEST_F(ragtor_scheduler, answered_tidy_requests_leave_the_clock) {
  auto later = sys.spawn(answer_later);
  auto before = clock_counts_of(sys).pending;
  struct tally {
    std::mutex mx;
    std::condition_variable cv;
    bool asked = false;
    int answers = 0;
    int sum = 0;
  };
  auto t = std::make_shared<tally>();
  auto asker = sys.spawn([t, later](caf::event_based_actor* self) -> caf::behavior {
    for (int i = 0; i < 300; ++i)
      tidy_request(self, later, std::chrono::minutes(60), i)
          .then(
              [t](int x) {
                std::lock_guard lock{t->mx};
                ++t->answers;
                t->sum += x;
                t->cv.notify_all();
              },
              [](caf::error&) {});
    std::lock_guard lock{t->mx};
    t->asked = true;
    t->cv.notify_all();
    return {[](const std::string&) {}};
  });
  {
    // The requests (and their timeouts) went out as the asker started, so
    // they are in `later`'s mailbox ahead of the message below.
    std::unique_lock lock{t->mx};
    ASSERT_TRUE(t->cv.wait_for(lock, std::chrono::seconds(30), [&] { return t->asked; }));
  }
  EXPECT_EQ(clock_counts_of(sys).pending, before + 300);
  caf::anon_send(later, std::string{"answer"});
  std::unique_lock lock{t->mx};
  ASSERT_TRUE(t->cv.wait_for(lock, std::chrono::seconds(30), [&] { return t->answers == 300; }));
  EXPECT_EQ(t->sum, 299 * 300 / 2);
  lock.unlock();
  EXPECT_EQ(clock_counts_of(sys).pending, before);
  caf::anon_send_exit(asker, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(later, caf::exit_reason::user_shutdown);
}

// An actor whose last reference is the clock's (the sender of a delayed
// message to an actor that is gone by then) is destroyed by the clock
// thread when it drops that message, and its destructor cancels its
// timeouts on that thread, inside the clock's lock: the call must be
// queued, not deadlock the clock.
TEST_F(ragtor_scheduler, an_actor_the_clock_destroys_does_not_stall_it) {
  auto destroyed = std::make_shared<std::promise<void>>();
  auto gone = sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int) {}}; });
  {
    caf::scoped_actor self{sys};
    self->monitor(gone);
    auto sender = sys.spawn([gone](caf::event_based_actor* a) -> caf::behavior {
      a->delayed_send(gone, std::chrono::milliseconds(50), 1);
      return {[](const std::string&) {}};
    });
    sender->attach_functor([destroyed](const caf::error&) { destroyed->set_value(); });
    caf::anon_send_exit(gone, caf::exit_reason::kill);
    self->receive([](const caf::down_msg&) {});
  }
  gone = nullptr;
  // The sender lives on only in the clock's entry; the clock drops it when
  // the message finds its receiver gone, 50 ms from now.
  ASSERT_EQ(destroyed->get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  // The clock still runs: a delayed message arrives.
  auto works = std::async(std::launch::async, [this] {
    caf::scoped_actor self{sys};
    self->delayed_send(self, std::chrono::milliseconds(20), std::string{"on time"});
    std::string got;
    self->receive([&](const std::string& s) { got = s; },
                  caf::after(std::chrono::seconds(10)) >> [&] { got = "nothing"; });
    return got;
  });
  if (works.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the clock's lock is held by its own stuck thread";
    std::_Exit(1);  // the system could not shut down either
  }
  EXPECT_EQ(works.get(), "on time");
}

// An actor whose destructor says so.
class timer_owner : public caf::event_based_actor {
public:
  timer_owner(caf::actor_config& cfg, std::shared_ptr<std::promise<void>> destroyed)
      : caf::event_based_actor(cfg), destroyed_(std::move(destroyed)) {}
  ~timer_owner() override { destroyed_->set_value(); }

  caf::behavior make_behavior() override {
    // A timer due in an hour, like a stream's watchdog due after its turn.
    delayed_send(this, std::chrono::hours(1), std::string{"tick"});
    return {[this](int) { quit(); }, [](const std::string&) {}};
  }

private:
  std::shared_ptr<std::promise<void>> destroyed_;
};

// A timer an actor set itself dies with the actor: CAF's clock kept the
// entry, and with it a strong reference to the actor, until it was due
// (each finished stream for its 5-second watchdog).
TEST_F(ragtor_scheduler, a_timer_dies_with_the_actor_that_set_it) {
  auto destroyed = std::make_shared<std::promise<void>>();
  auto done = destroyed->get_future();
  {
    auto owner = sys.spawn<timer_owner>(destroyed);
    caf::anon_send(owner, 1);  // it quits
  }
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the actor lives on in its timer's entry";
  // A timer of a living actor still arrives.
  caf::scoped_actor self{sys};
  self->delayed_send(self, 20ms, std::string{"on time"});
  std::string got;
  self->receive([&](const std::string& s) { got = s; },
                caf::after(std::chrono::seconds(10)) >> [&] { got = "nothing"; });
  EXPECT_EQ(got, "on time");
}

// An actor with requests still pending.
class request_owner : public caf::event_based_actor {
public:
  request_owner(caf::actor_config& cfg, caf::actor silent,
                std::shared_ptr<std::promise<void>> destroyed)
      : caf::event_based_actor(cfg), silent_(std::move(silent)), destroyed_(std::move(destroyed)) {}
  ~request_owner() override { destroyed_->set_value(); }

  caf::behavior make_behavior() override {
    for (int i = 0; i < 50; ++i)
      request(silent_, std::chrono::minutes(60), i).then([](int) {}, [](caf::error&) {});
    return {[this](const std::string&) { quit(); }};
  }

private:
  caf::actor silent_;
  std::shared_ptr<std::promise<void>> destroyed_;
};

// The timeouts of an actor's pending requests go with the actor: the clock
// neither keeps them nor keeps the actor alive for them.
TEST_F(ragtor_scheduler, pending_requests_leave_the_clock_with_their_actor) {
  auto before = clock_counts_of(sys).pending;
  auto destroyed = std::make_shared<std::promise<void>>();
  auto done = destroyed->get_future();
  {
    auto owner = sys.spawn<request_owner>(silent, destroyed);
    caf::anon_send(owner, std::string{"quit"});
  }
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the actor lives on in its requests' timeouts";
  EXPECT_EQ(clock_counts_of(sys).pending, before);
}

// A job enqueued from outside the workers wakes a sleeping worker (which
// ragtor's policy does after releasing the worker's lock). Configured as
// `serve` is (moderate-poll-attempts 0: from the busy polls straight to
// sleep), but sleeping an hour when idle instead of 10 ms, so a wake-up
// that went missing would leave the message unhandled and the wait below
// would give up.
TEST(ragtor_scheduler_wakeups, each_message_from_outside_wakes_a_sleeping_worker) {
  caf::actor_system_config cfg;
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::hours(1)});
  caf::actor_system sys{ragtor_config(cfg)};
  struct tally {
    std::mutex mx;
    std::condition_variable cv;
    int handled = 0;
  };
  auto t = std::make_shared<tally>();
  auto counter = sys.spawn([t](caf::event_based_actor*) -> caf::behavior {
    return {[t](int) {
      std::lock_guard lock{t->mx};
      ++t->handled;
      t->cv.notify_all();
    }};
  });
  for (int i = 0; i < 200; ++i) {
    // From this thread, not a worker: each message goes through the
    // coordinator to a worker's queue, and the workers are asleep by the
    // time it comes (each waits for the one before).
    caf::anon_send(counter, i);
    std::unique_lock lock{t->mx};
    ASSERT_TRUE(t->cv.wait_for(lock, std::chrono::seconds(30), [&] { return t->handled > i; }))
        << "message " << i << " was not handled: a sleeping worker was not woken";
  }
  EXPECT_EQ(t->handled, 200);
  caf::anon_send_exit(counter, caf::exit_reason::user_shutdown);
}

}  // namespace
