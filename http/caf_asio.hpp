// The CAF -> Asio bridge for request/response calls from coroutines on I/O
// threads: `co_await async_request<R>(sys, handle, timeout, xs...)` spawns a
// short-lived actor that sends the request and posts the reply (or error)
// back to the awaiting coroutine's executor. The I/O thread never blocks on
// an actor (no scoped_actor, no function_view).
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

template <class R, class Handle, class... Ts>
boost::asio::awaitable<caf::expected<R>> async_request(caf::actor_system& sys, Handle dest,
                                                       caf::timespan timeout, Ts... xs) {
  namespace net = boost::asio;
  auto ex = co_await net::this_coro::executor;
  auto initiate = [&sys, dest, timeout, ex, xs...](auto handler) mutable {
    using handler_t = decltype(handler);
    // CAF handlers must be copyable, Asio handlers are move-only.
    auto h = std::make_shared<handler_t>(std::move(handler));
    auto work = std::make_shared<net::executor_work_guard<net::any_io_executor>>(ex);
    auto complete = [h, work, ex](caf::expected<R> result) {
      net::post(ex, [h, work, result = std::move(result)]() mutable {
        (*h)(std::move(result));
        work->reset();
      });
    };
    sys.spawn([dest, timeout, complete, xs...](caf::event_based_actor* self) mutable {
      self->request(dest, timeout, xs...)
          .then(
              [complete](R& value) mutable { complete(caf::expected<R>{std::move(value)}); },
              [complete](caf::error& err) mutable { complete(caf::expected<R>{std::move(err)}); });
    });
  };
  co_return co_await net::async_initiate<decltype(net::use_awaitable), void(caf::expected<R>)>(
      std::move(initiate), net::use_awaitable);
}

}  // namespace ragtor::http
