// tidy_request (actors/request_timeout.hpp): an answered request leaves no
// entry in the actor clock, where CAF 0.17.6's plain `request` keeps one
// until its timeout passes. Runs on the test coordinator, whose clock tells
// whether any timeout is pending.
#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actors/request_timeout.hpp"
#include "protocol/errc.hpp"
#include "tests/support/test_coordinator.hpp"

using namespace ragtor;
using namespace std::chrono_literals;

namespace {

struct request_timeouts : ::testing::Test {
  caf::actor_system_config cfg;
  caf::actor_system sys{ragtor::test::testing_config(cfg)};
  caf::scheduler::test_coordinator& sched{
      dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())};
  caf::actor responder = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int x) -> caf::result<int> {
      if (x < 0)
        return make_error(errc::invalid_request, "negative");
      return x * 2;
    }};
  });

  struct outcome {
    int value = 0;
    std::string error;
    int calls = 0;
  };

  // An actor that asks the responder once with a 10-minute timeout, through
  // tidy_request or the plain request, and records what came back.
  std::shared_ptr<outcome> ask(int x, bool tidy) {
    auto out = std::make_shared<outcome>();
    sys.spawn([out, x, tidy, dest = responder](caf::event_based_actor* self) -> caf::behavior {
      auto on_value = [=](int v) {
        out->value = v;
        ++out->calls;
      };
      auto on_error = [out, self](caf::error& e) {
        out->error = self->system().render(e);
        ++out->calls;
      };
      if (tidy)
        tidy_request(self, dest, 10min, x).then(on_value, on_error);
      else
        self->request(dest, 10min, x).then(on_value, on_error);
      return {[](const std::string&) {}};  // stays alive, like a long-lived actor
    });
    sched.run();
    return out;
  }
};

TEST_F(request_timeouts, an_answered_tidy_request_leaves_no_clock_entry) {
  auto out = ask(21, true);
  EXPECT_EQ(out->calls, 1);
  EXPECT_EQ(out->value, 42);
  EXPECT_FALSE(sched.clock().has_pending_timeout());
}

TEST_F(request_timeouts, a_failed_tidy_request_leaves_no_clock_entry) {
  auto out = ask(-1, true);
  EXPECT_EQ(out->calls, 1);
  EXPECT_NE(out->error.find("negative"), std::string::npos) << out->error;
  EXPECT_FALSE(sched.clock().has_pending_timeout());
}

TEST_F(request_timeouts, a_plain_request_keeps_its_entry_until_the_timeout) {
  // The CAF behaviour tidy_request exists for; if a CAF upgrade fixes it,
  // this test says so.
  auto out = ask(21, false);
  EXPECT_EQ(out->value, 42);
  EXPECT_TRUE(sched.clock().has_pending_timeout());
  sched.advance_time(10min);
  sched.run();
  EXPECT_EQ(out->calls, 1);  // the late timeout finds no handler
  EXPECT_FALSE(sched.clock().has_pending_timeout());
}

TEST_F(request_timeouts, an_unanswered_tidy_request_still_times_out) {
  auto silent = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int) -> caf::result<int> { return caf::delegated<int>{}; }};
  });
  responder = silent;
  auto out = ask(1, true);
  EXPECT_EQ(out->calls, 0);
  EXPECT_TRUE(sched.clock().has_pending_timeout());
  sched.advance_time(10min);
  sched.run();
  EXPECT_EQ(out->calls, 1);
  EXPECT_NE(out->error.find("timeout"), std::string::npos) << out->error;
}

}  // namespace
