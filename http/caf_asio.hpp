// The CAF -> Asio bridge for request/response calls from coroutines on I/O
// threads: `co_await async_request<R>(sys, handle, timeout, xs...)` sends
// the request straight from the I/O thread into the receiver's mailbox and
// resumes the coroutine on its executor with the reply (or error). The I/O
// thread never waits for an actor: the coroutine is suspended until the
// reply is posted to it.
//
// Replies go to one actor per io_context (a CAF `actor_companion`, owned by
// the `caf_bridge` service below), which is never scheduled: its mailbox is
// a callback that hands the reply to the waiting call. No actor is spawned
// per request and none waits in the actor clock: the timeout is an Asio
// timer on the I/O thread. (Before, each call spawned a short-lived actor
// that made the request, a spawn, two runs, a clock entry and a teardown
// per HTTP request; docs/performance.md, "One bridge per I/O thread".)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/check_typed_input.hpp>
#include <caf/detail/implicit_conversions.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/message.hpp>
#include <caf/response_type.hpp>
#include <caf/sec.hpp>
#include <caf/timespan.hpp>

namespace boost::asio {
class io_context;
}

namespace ragtor::http {

// The reply side of the bridge, one per io_context (an Asio service, made
// on the first request from that context's thread).
class caf_bridge final : public boost::asio::execution_context::service {
public:
  using key_type = caf_bridge;
  static boost::asio::execution_context::id id;

  // A request waiting for its reply. Whoever takes it from the bridge
  // first (the reply, on a CAF thread; the timeout, on the I/O thread)
  // finishes it, on the I/O thread.
  struct call {
    explicit call(boost::asio::any_io_executor ex) : timer(std::move(ex)) {}
    virtual ~call() = default;
    virtual void finish(caf::message reply) = 0;
    boost::asio::steady_timer timer;
  };

  explicit caf_bridge(boost::asio::execution_context& ctx);
  ~caf_bridge() override;

  // Registers `c`: the request id to send it with and the address replies
  // go to.
  std::pair<caf::message_id, caf::strong_actor_ptr> add(caf::actor_system& sys,
                                                        std::shared_ptr<call> c);

  // The call waiting for request `id`, removed; null once it is finished.
  std::shared_ptr<call> take(uint64_t id);

  // Stops taking replies, ends the reply actor and drops the calls still
  // waiting (their coroutines with them). For the server's stop, while
  // the actor system still runs; without it, the io_context's destruction
  // only stops taking replies.
  void close();

  size_t waiting();  // calls not yet finished (tests)

private:
  void shutdown() override;
  void on_reply(caf::mailbox_element_ptr ptr);
  // Empties the bridge: its reply actor and the calls still waiting.
  std::pair<caf::strong_actor_ptr, std::unordered_map<uint64_t, std::shared_ptr<call>>> detach();

  std::mutex mx_;
  std::unordered_map<uint64_t, std::shared_ptr<call>> calls_;
  uint64_t last_id_ = 0;
  caf::strong_actor_ptr companion_;
};

// Closes the bridge of `ioc`, if it has one (see caf_bridge::close).
void close_caf_bridge(boost::asio::io_context& ioc);

// A CAF actor_companion: an actor that is never scheduled, whose mailbox is
// `on_message`, run on the sending thread (it must take its own lock if
// senders may overlap). Hidden: the system's shutdown does not wait for
// it; end_companion ends it.
caf::strong_actor_ptr spawn_companion(caf::actor_system& sys,
                                      std::function<void(caf::mailbox_element_ptr)> on_message);
caf::actor_companion* as_companion(const caf::strong_actor_ptr& companion);
// Takes no more messages (waiting for one being handled); touches no
// actor system.
void mute_companion(const caf::strong_actor_ptr& companion);
// Mutes it, then terminates it (its monitors get their down messages).
// Only while its actor system runs.
void end_companion(const caf::strong_actor_ptr& companion);

namespace detail {

// The reply as the call's result: R, the error the receiver answered with,
// or `unexpected_response`.
template <class R>
caf::expected<R> reply_as(caf::message& reply) {
  if (reply.match_elements<R>())
    return std::move(reply.get_mutable_as<R>(0));
  if (reply.match_elements<caf::error>())
    return std::move(reply.get_mutable_as<caf::error>(0));
  return caf::make_error(caf::sec::unexpected_response);
}

template <class R, class Handler>
struct typed_call final : caf_bridge::call {
  typed_call(Handler h, boost::asio::any_io_executor ex)
      : call(std::move(ex)), handler(std::move(h)) {}
  void finish(caf::message reply) override {
    timer.cancel();
    handler(reply_as<R>(reply));
  }
  Handler handler;
};

}  // namespace detail

template <class R, class Handle, class... Ts>
boost::asio::awaitable<caf::expected<R>> async_request(caf::actor_system& sys, Handle dest,
                                                       caf::timespan timeout, Ts... xs) {
  namespace net = boost::asio;
  static_assert(!std::is_same_v<R, caf::message>, "name the reply's type");
  using request_types = caf::detail::type_list<
      typename caf::detail::implicit_conversions<std::decay_t<Ts>>::type...>;
  using response = caf::response_type_unbox<caf::signatures_of_t<Handle>, request_types>;
  static_assert(response::valid, "receiver does not accept given message");
  static_assert(std::is_same_v<typename response::type, caf::message>
                    || std::is_same_v<typename response::type, caf::detail::type_list<R>>,
                "R is not the receiver's reply to this message");
  auto ex = co_await net::this_coro::executor;
  auto initiate = [&sys, &dest, timeout, &ex, &xs...](auto handler) {
    using call_t = detail::typed_call<R, decltype(handler)>;
    auto c = std::make_shared<call_t>(std::move(handler), ex);
    if (!dest) {
      net::post(ex, [c] { c->finish(caf::make_message(caf::make_error(caf::sec::invalid_argument))); });
      return;
    }
    auto& bridge = net::use_service<caf_bridge>(net::query(ex, net::execution::context));
    auto [mid, reply_to] = bridge.add(sys, c);
    c->timer.expires_after(timeout);
    c->timer.async_wait([c, &bridge, id = mid.request_id().integer_value()](
                            const boost::system::error_code& ec) {
      if (!ec && bridge.take(id))
        c->finish(caf::make_message(caf::make_error(caf::sec::request_timeout)));
    });
    caf::actor_cast<caf::abstract_actor*>(dest)->enqueue(
        caf::make_mailbox_element(std::move(reply_to), mid, {}, std::move(xs)...), nullptr);
  };
  co_return co_await net::async_initiate<decltype(net::use_awaitable), void(caf::expected<R>)>(
      std::move(initiate), net::use_awaitable);
}

}  // namespace ragtor::http
