// The CAF -> Asio bridge (http/caf_asio.hpp): a coroutine on an io_context
// asks a real actor (on CAF's own scheduler threads) and gets its reply,
// its error, a timeout, or the error of a receiver that is gone, without an
// actor spawned per request; after close() a late reply is dropped.
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/response_promise.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "http/caf_asio.hpp"
#include "protocol/errc.hpp"

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using ragtor::http::async_request;

// Doubles a positive number; a negative one is an error; zero is answered
// only when the actor is told to `release` it.
using doubler = caf::typed_actor<caf::replies_to<int>::with<int>,
                                 caf::replies_to<std::string>::with<bool>>;

struct doubler_state {
  std::optional<caf::typed_response_promise<int>> held;
};

doubler spawn_doubler(caf::actor_system& sys, std::promise<void>* holding = nullptr) {
  return sys.spawn([holding](caf::typed_event_based_actor<caf::replies_to<int>::with<int>,
                                                           caf::replies_to<std::string>::with<bool>>*
                                 self) -> doubler::behavior_type {
    auto state = std::make_shared<doubler_state>();
    return {
        [=](int x) -> caf::result<int> {
          if (x < 0)
            return ragtor::make_error(ragtor::errc::invalid_request, "negative");
          if (x == 0) {
            state->held = self->make_response_promise<int>();
            if (holding)
              holding->set_value();
            return *state->held;
          }
          return x * 2;
        },
        [=](const std::string&) {
          if (!state->held)
            return false;
          state->held->deliver(7);
          state->held.reset();
          return true;
        },
    };
  });
}

struct caf_bridge_test : ::testing::Test {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  net::io_context ioc{1};

  // Runs `ask` as a coroutine on the io_context until it finishes.
  template <class R>
  caf::expected<R> run(std::function<net::awaitable<caf::expected<R>>()> ask) {
    std::optional<caf::expected<R>> out;
    net::co_spawn(
        ioc, [&]() -> net::awaitable<void> { out = co_await ask(); }, net::detached);
    ioc.run();
    ioc.restart();
    EXPECT_TRUE(out.has_value());
    return out ? std::move(*out) : caf::expected<R>{caf::make_error(caf::sec::runtime_error)};
  }

  // The actors asked (one holding a promise keeps itself alive: told to go).
  doubler spawn(std::promise<void>* holding = nullptr) {
    auto a = spawn_doubler(sys, holding);
    spawned.push_back(a);
    return a;
  }
  std::vector<doubler> spawned;

  ~caf_bridge_test() override {
    ragtor::http::close_caf_bridge(ioc);
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

TEST_F(caf_bridge_test, a_reply_reaches_the_coroutine) {
  auto a = spawn();
  auto r = run<int>([&] { return async_request<int>(sys, a, 5s, 21); });
  ASSERT_TRUE(r) << sys.render(r.error());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(net::use_service<ragtor::http::caf_bridge>(ioc).waiting(), 0u);
}

TEST_F(caf_bridge_test, an_error_reply_is_the_error) {
  auto a = spawn();
  auto r = run<int>([&] { return async_request<int>(sys, a, 5s, -1); });
  ASSERT_FALSE(r);
  EXPECT_EQ(ragtor::error_message(r.error()), "negative");
}

TEST_F(caf_bridge_test, a_request_never_answered_times_out) {
  auto a = spawn();
  auto r = run<int>([&] { return async_request<int>(sys, a, 50ms, 0); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), caf::sec::request_timeout);
  EXPECT_EQ(net::use_service<ragtor::http::caf_bridge>(ioc).waiting(), 0u);
}

TEST_F(caf_bridge_test, a_receiver_that_is_gone_answers_with_an_error) {
  auto a = spawn();
  {
    caf::scoped_actor self{sys};
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {});
  }
  auto r = run<int>([&] { return async_request<int>(sys, a, 5s, 21); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), caf::sec::request_receiver_down);
}

TEST_F(caf_bridge_test, no_receiver_is_an_invalid_argument) {
  doubler none;
  auto r = run<int>([&] { return async_request<int>(sys, none, 5s, 21); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), caf::sec::invalid_argument);
}

// 500 requests at once from one coroutine each: every reply goes to the
// coroutine that asked, and the bridge spawned one actor for all of them
// (its reply address), not one per request.
TEST_F(caf_bridge_test, many_requests_at_once_each_get_their_own_reply_and_spawn_nothing) {
  auto a = spawn();
  auto first_id = sys.latest_actor_id();
  std::vector<std::optional<caf::expected<int>>> out(500);
  for (int i = 0; i < 500; ++i)
    net::co_spawn(
        ioc,
        [&, i]() -> net::awaitable<void> {
          out[static_cast<size_t>(i)] = co_await async_request<int>(sys, a, 5s, i + 1);
        },
        net::detached);
  ioc.run();
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(out[static_cast<size_t>(i)].has_value()) << i;
    ASSERT_TRUE(*out[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(**out[static_cast<size_t>(i)], 2 * (i + 1));
  }
  EXPECT_EQ(sys.latest_actor_id() - first_id, 1u);
  EXPECT_EQ(net::use_service<ragtor::http::caf_bridge>(ioc).waiting(), 0u);
}

// A reply that comes after close() is dropped: the call never finishes and
// nothing touches the closed bridge.
TEST_F(caf_bridge_test, a_reply_after_close_is_dropped) {
  std::promise<void> holding;
  auto a = spawn(&holding);
  bool finished = false;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        co_await async_request<int>(sys, a, 1h, 0);
        finished = true;
      },
      net::detached);
  ioc.poll();  // sends the request
  holding.get_future().wait();  // the actor holds it, unanswered
  EXPECT_EQ(net::use_service<ragtor::http::caf_bridge>(ioc).waiting(), 1u);
  ragtor::http::close_caf_bridge(ioc);
  EXPECT_EQ(net::use_service<ragtor::http::caf_bridge>(ioc).waiting(), 0u);
  // The actor answers now, to the closed bridge's address; its handler
  // has returned (and the reply was handed over) once `release` is answered.
  caf::scoped_actor self{sys};
  bool released = false;
  self->request(a, caf::infinite, std::string{"release"}).receive([&](bool b) { released = b; },
                                                                 [](caf::error&) {});
  EXPECT_TRUE(released);
  ioc.poll();
  EXPECT_FALSE(finished);
}

}  // namespace
