// CAF 0.17.6 keeps every request's timeout in the actor clock until the
// timeout passes, even after the response arrived (the clock has
// `cancel_request_timeout`, but nothing calls it; the entries go only when
// the requesting actor terminates). A long-lived actor that makes many
// requests with a long timeout therefore holds an entry (and later a
// stray timeout message) per request for the whole timeout: the agent's
// 10-minute worker timeout grew a server by ~190 bytes per search.
//
// Long-lived actors (agents, pools, the router, the summarizer, kb_admin,
// sessions, the cluster, admin) therefore ask with `tidy_request`, which
// is `self->request(...)` whose response and error handlers first cancel
// the clock entry:
//
//   tidy_request(self, store, 30s, atom::summary_v, conv).then(
//       [=](summary_row& s) { ... }, [=](caf::error& e) { ... });
//
// Short-lived actors (a turn's stream, a planner) need not: their entries
// go when they terminate.
#pragma once

#include <utility>

#include <caf/detail/type_list.hpp>
#include <caf/detail/type_traits.hpp>
#include <caf/local_actor.hpp>
#include <caf/message_id.hpp>

namespace ragtor {

inline void forget_request_timeout(caf::local_actor* self, caf::message_id response_id) {
  self->clock().cancel_request_timeout(self, response_id);
}

namespace detail {

// A handler with exactly F's parameter list (CAF reads a handler's
// signature from its call operator, so a generic lambda would not do) that
// cancels the request's clock entry and then runs F.
template <class F, class Args = typename caf::detail::get_callable_trait<F>::arg_types>
struct forgetting;

template <class F, class... Ts>
struct forgetting<F, caf::detail::type_list<Ts...>> {
  caf::local_actor* self;
  caf::message_id mid;
  F f;
  void operator()(Ts... xs) {
    forget_request_timeout(self, mid);
    f(std::forward<Ts>(xs)...);
  }
};

template <class Handle>
struct tidy_call {
  caf::local_actor* self;
  Handle handle;
  template <class F, class OnError>
  void then(F f, OnError g) {
    auto mid = handle.id();
    handle.then(forgetting<F>{self, mid, std::move(f)}, forgetting<OnError>{self, mid, std::move(g)});
  }
};

}  // namespace detail

template <class Self, class Dest, class Timeout, class... Ts>
auto tidy_request(Self* self, const Dest& dest, const Timeout& timeout, Ts&&... xs) {
  auto handle = self->request(dest, timeout, std::forward<Ts>(xs)...);
  return detail::tidy_call<decltype(handle)>{self, std::move(handle)};
}

}  // namespace ragtor
