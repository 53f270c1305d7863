// The CAF -> Asio bridge for request/response calls from coroutines on I/O
// threads: `co_await async_request<R>(sys, handle, timeout, xs...)` spawns a
// short-lived actor that sends the request and posts the reply (or error)
// back to the awaiting coroutine's executor. The I/O thread never blocks on
// an actor (no scoped_actor, no function_view). `await_from_any_thread`
// does the same for a value another thread computes.
#pragma once

#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

namespace ragtor::http {

// Awaits the value that `start(complete)` hands to `complete` (copyable,
// called once, from any thread): the coroutine resumes on its own executor.
template <class T, class Start>
boost::asio::awaitable<T> await_from_any_thread(Start start) {
  namespace net = boost::asio;
  auto ex = co_await net::this_coro::executor;
  auto initiate = [ex, &start](auto handler) mutable {
    using handler_t = decltype(handler);
    // Asio handlers are move-only; `complete` must be copyable.
    auto h = std::make_shared<handler_t>(std::move(handler));
    auto work = std::make_shared<net::executor_work_guard<net::any_io_executor>>(ex);
    start([h, work, ex](T result) {
      net::post(ex, [h, work, result = std::move(result)]() mutable {
        (*h)(std::move(result));
        work->reset();
      });
    });
  };
  co_return co_await net::async_initiate<decltype(net::use_awaitable), void(T)>(
      std::move(initiate), net::use_awaitable);
}

template <class R, class Handle, class... Ts>
boost::asio::awaitable<caf::expected<R>> async_request(caf::actor_system& sys, Handle dest,
                                                       caf::timespan timeout, Ts... xs) {
  return await_from_any_thread<caf::expected<R>>([&sys, dest, timeout, xs...](auto complete) {
    sys.spawn([dest, timeout, complete, xs...](caf::event_based_actor* self) mutable {
      self->request(dest, timeout, xs...)
          .then(
              [complete](R& value) mutable { complete(caf::expected<R>{std::move(value)}); },
              [complete](caf::error& err) mutable { complete(caf::expected<R>{std::move(err)}); });
    });
  });
}

}  // namespace ragtor::http
