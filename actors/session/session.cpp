#include "actors/request_timeout.hpp"
#include "actors/session/session.hpp"
#include "protocol/log.hpp"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/admin/measured.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {
const log::component lg{"session"};
}  // namespace

namespace {

// -- session ----------------------------------------------------------------------

struct queued_turn {
  chat_request req;
  caf::typed_response_promise<turn_ticket> promise;
};

struct running_turn {
  std::string request_id;
  stream_actor stream;
  turn_ticket ticket;  // handed to a client retrying this request_id
};

struct session_state {
  static inline const char* name = "session";
  session_deps deps;
  session_settings settings;
  std::string user_id;
  std::string session_id;
  std::deque<queued_turn> queue;
  std::optional<running_turn> running;
  // Turns that ended but whose stream is still alive (kept for a client to
  // re-attach during server.detach_grace_ms): request_id -> stream.
  std::map<std::string, stream_actor> lingering;
  bool starting = false;    // begin_turn in flight
  std::string starting_id;  // its request_id
  bool stopping = false;    // shutdown requested
  // Clears waiting for the running turn to be stored; one store clear
  // answers them all.
  std::vector<caf::typed_response_promise<int64_t>> clears;
  bool clearing = false;  // the store clear is in flight
  uint64_t turns = 0;
  std::string conversation_id;  // known once a turn was opened
  int64_t last_seq = 0;         // the seq of the last user message stored
  // An early-started stream (start_next) that guessed wrong is quitting;
  // once it is down its turn starts again from the store's answer.
  struct restart {
    caf::actor_addr stream;
    queued_turn turn;
    turn_opened opened;
  };
  // Rare (a conversation deleted under an early-started turn): held by
  // pointer, so an idle session does not carry a turn's worth of fields.
  std::unique_ptr<restart> restarting;
  uint64_t epoch = 0;  // bumped on every activity; see the idle timer
  // The idle timer (arm_idle_timer): one pending at a time.
  bool idle_timer_armed = false;
  caf::actor_clock::time_point idle_since{};  // when the session last fell idle
};

using session_ptr = measured_pointer<session_actor, session_state>;

void start_next(session_ptr self);

void turn_ended(session_ptr self, const std::string& request_id) {
  auto& st = self->state;
  if (!st.running || st.running->request_id != request_id)
    return;
  // Still alive: it may be kept for a re-attach; forgotten at its down.
  st.lingering.emplace(request_id, st.running->stream);
  st.running.reset();
  start_next(self);
}

// Quits, ending the streams kept for re-attaching first (a finished turn
// answers a cancel by quitting), so none outlives its session by the rest
// of its grace period. (The streams do not monitor their session: a monitor
// of a long-lived actor by a short-lived one stays attached to the former,
// keeping every finished stream's memory until the session ends.)
void quit_session(session_ptr self) {
  for (auto& [id, stream] : self->state.lingering)
    self->send(stream, atom::cancel_v);
  self->state.lingering.clear();
  self->quit();
}

// Runs the pending clear once no turn runs: no assistant message of a
// turn that started before the clear can land after it.
void clear_now(session_ptr self) {
  auto& st = self->state;
  st.clearing = true;
  tidy_request(self, st.deps.store, st.settings.stream.step_timeout, atom::clear_v, st.user_id,
                st.session_id)
      .then(
          [=](int64_t n) {
            auto& st = self->state;
            st.conversation_id.clear();  // the next turn opens it again
            for (auto& rp : st.clears)
              rp.deliver(n);
            st.clears.clear();
            st.clearing = false;
            start_next(self);
          },
          [=](caf::error& err) {
            auto& st = self->state;
            for (auto& rp : st.clears)
              rp.deliver(err);
            st.clears.clear();
            st.clearing = false;
            start_next(self);
          });
}

stream_deps deps_of(session_ptr self) {
  auto& st = self->state;
  return stream_deps{st.deps.router,     st.deps.pool,
                     st.deps.llm,        st.deps.store,
                     st.deps.summarizer, caf::actor_cast<session_actor>(self),
                     st.deps.planners,   st.deps.tools_http};
}

// The user message of `turn` is stored (`opened`): its stream (`stream`,
// or a new one when it did not start early) runs it and the client gets
// the ticket.
void run_opened(session_ptr self, queued_turn turn, const turn_opened& opened,
                stream_actor stream) {
  auto& st = self->state;
  st.starting = false;
  ++st.turns;
  st.conversation_id = opened.conversation_id;
  st.last_seq = opened.seq;
  auto request_id = turn.req.request_id;
  if (!stream) {
    stream = spawn_stream(self->system(), std::move(turn.req), opened, deps_of(self),
                          st.settings.stream);
    self->monitor(stream);
  }
  turn_ticket ticket{stream, opened.conversation_id, request_id, opened.message_id};
  st.running = running_turn{std::move(request_id), stream, ticket};
  turn.promise.deliver(ticket);
  if (st.stopping || !st.clears.empty())
    self->send(stream, atom::cancel_v);
}

// The idle timer: one pending at a time. Every idle spell restarts the
// count (idle_since); the tick checks it and, when the session was busy
// meanwhile, waits again for what is left. A timer per idle spell, as
// before, left one entry in the actor clock for each turn, each living
// server.idle_timeout: tens of thousands per session under load.
void arm_idle_timer(session_ptr self) {
  auto& st = self->state;
  st.idle_since = self->clock().now();
  if (st.idle_timer_armed)
    return;
  st.idle_timer_armed = true;
  self->delayed_send(self, st.settings.idle_timeout, atom::tick_v, st.epoch);
}

void on_idle_tick(session_ptr self) {
  auto& st = self->state;
  st.idle_timer_armed = false;
  // Busy: every activity (a turn, a clear) ends in start_next, which arms
  // it again and restarts the count.
  if (st.running || st.starting || st.clearing || !st.queue.empty())
    return;
  auto idle_for = self->clock().now() - st.idle_since;
  if (idle_for >= st.settings.idle_timeout)
    return quit_session(self);
  st.idle_timer_armed = true;
  self->delayed_send(self, st.settings.idle_timeout - idle_for, atom::tick_v, st.epoch);
}

void start_next(session_ptr self) {
  auto& st = self->state;
  if (st.running || st.starting || st.clearing)
    return;
  if (!st.clears.empty())
    return clear_now(self);
  if (st.queue.empty()) {
    if (st.stopping)
      quit_session(self);
    else
      arm_idle_timer(self);
    return;
  }
  // Shared by the two handlers below, which would each copy a whole
  // request otherwise.
  auto turn = std::make_shared<queued_turn>(std::move(st.queue.front()));
  st.queue.pop_front();
  st.starting = true;
  st.starting_id = turn->req.request_id;
  // The commit beside the turn: the turn starts now (route, context,
  // search, model) while the store commits its user message; the stream
  // publishes `start` and stores the answer only after that commit. Only
  // for a server-generated request_id, which no stored turn can have (a
  // client's may be a retry of a stored turn). On the session's first turn
  // the conversation is not known yet: the stream starts with none (an
  // empty context, which is a new conversation's) and plans nothing, so
  // asks no model, until the store opened it; it is kept if the store
  // opened a new conversation (the user message is its first), else rerun.
  stream_actor early;
  auto guess = st.conversation_id;
  if (st.settings.early_start && turn->req.fresh_request_id && !turn->req.stateless) {
    turn_opened g;
    g.conversation_id = guess;
    // At most the real seq: recall skips no more than the window.
    g.seq = guess.empty() ? 1 : st.last_seq + 1;
    early = spawn_stream(self->system(), turn->req, g, deps_of(self), st.settings.stream, false);
    self->monitor(early);
  }
  tidy_request(self, st.deps.store, st.settings.stream.step_timeout, atom::begin_turn_v,
               turn->req.user_id, turn->req.session_id, turn->req.message, turn->req.request_id)
      .then(
          [=](turn_opened& opened) {
            if (!early)
              return run_opened(self, std::move(*turn), opened, stream_actor{});
            bool as_guessed = guess.empty() ? opened.seq == 1 : opened.conversation_id == guess;
            if (as_guessed && !opened.existing) {
              self->send(early, atom::opened_v, opened, true);
              return run_opened(self, std::move(*turn), opened, early);
            }
            // The conversation changed meanwhile (deleted, cleared), or the
            // session's first turn is not its conversation's first: the
            // early stream read the wrong context. It quits; the turn runs
            // again once it is gone (so its model call is cancelled first).
            lg->debug("session: {} opened in conversation {}, not {}: starting it again",
                      turn->req.request_id, opened.conversation_id, guess);
            self->send(early, atom::opened_v, turn_opened{}, false);
            self->state.restarting = std::make_unique<session_state::restart>(
                session_state::restart{early.address(), std::move(*turn), std::move(opened)});
          },
          [=](caf::error& err) {
            lg->warn("session: storing the user message of {} failed: {}", turn->req.request_id,
                     self->system().render(err));
            if (early)
              self->send(early, atom::opened_v, turn_opened{}, false);
            self->state.starting = false;
            turn->promise.deliver(std::move(err));
            start_next(self);
          });
}

session_actor spawn_session(caf::actor_system& sys, std::string user_id, std::string session_id,
                            session_deps deps, session_settings settings) {
  return sys.spawn([=](session_ptr self) -> session_actor::behavior_type {
    auto& st = self->state;
    st.deps = deps;
    st.settings = settings;
    st.user_id = user_id;
    st.session_id = session_id;
    self->track("session", user_id + "/" + session_id);
    self->set_down_handler([=](caf::down_msg& msg) {
      auto& st = self->state;
      std::erase_if(st.lingering, [&](const auto& kv) { return kv.second.address() == msg.source; });
      if (st.restarting && st.restarting->stream == msg.source) {
        auto r = std::move(*st.restarting);
        st.restarting.reset();
        return run_opened(self, std::move(r.turn), r.opened, stream_actor{});
      }
      if (st.running && st.running->stream.address() == msg.source) {
        auto id = st.running->request_id;
        turn_ended(self, id);
        st.lingering.erase(id);  // it is gone, not lingering
      }
    });
    return {
        [=](atom::open_turn, chat_request& req) -> caf::result<turn_ticket> {
          auto& st = self->state;
          if (st.stopping)
            return make_error(errc::unavailable, "the server is shutting down");
          if (st.queue.size() >= st.settings.max_queued_turns)
            return make_error(errc::overloaded,
                              "too many queued turns in this conversation; retry later");
          if (!req.request_id.empty()) {
            // A retry of the running turn joins its stream (replayed so far).
            if (st.running && st.running->request_id == req.request_id)
              return st.running->ticket;
            bool busy = st.starting && st.starting_id == req.request_id;
            for (auto& t : st.queue)
              busy = busy || t.req.request_id == req.request_id;
            if (busy)
              return make_error(errc::conflict,
                                "a turn with request_id \"" + req.request_id + "\" is in progress");
          }
          ++st.epoch;
          auto rp = self->make_response_promise<turn_ticket>();
          st.queue.push_back(queued_turn{std::move(req), rp});
          start_next(self);
          return rp;
        },
        [=](atom::stop, const std::string& request_id) -> bool {
          auto& st = self->state;
          if (st.running && st.running->request_id == request_id) {
            self->send(st.running->stream, atom::cancel_v);
            return true;
          }
          for (auto i = st.queue.begin(); i != st.queue.end(); ++i) {
            if (i->req.request_id == request_id) {
              i->promise.deliver(make_error(errc::cancelled, "the turn was stopped"));
              st.queue.erase(i);
              return true;
            }
          }
          return false;
        },
        [=](atom::attach, const std::string& request_id) -> caf::result<stream_actor> {
          auto& st = self->state;
          if (st.running && st.running->request_id == request_id)
            return st.running->stream;
          if (auto i = st.lingering.find(request_id); i != st.lingering.end())
            return i->second;
          return make_error(errc::not_found, "no running turn \"" + request_id + "\"");
        },
        [=](atom::clear) -> caf::result<int64_t> {
          auto& st = self->state;
          ++st.epoch;
          auto rp = self->make_response_promise<int64_t>();
          st.clears.push_back(rp);
          // Turns that were waiting belong to the conversation being
          // cleared: they end, and so does the running one (stored first).
          for (auto& t : st.queue)
            t.promise.deliver(make_error(errc::cancelled, "the conversation was cleared"));
          st.queue.clear();
          if (st.running)
            self->send(st.running->stream, atom::cancel_v);
          start_next(self);
          return rp;
        },
        [=](atom::turn_done, const std::string& request_id) { turn_ended(self, request_id); },
        [=](atom::tick, uint64_t) { on_idle_tick(self); },
        [=](atom::shutdown) {
          auto& st = self->state;
          st.stopping = true;
          for (auto& t : st.queue)
            t.promise.deliver(make_error(errc::unavailable, "the server is shutting down"));
          st.queue.clear();
          if (st.running)
            self->send(st.running->stream, atom::cancel_v);
          else if (!st.starting)
            quit_session(self);
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w.field("user_id", st.user_id)
              .field("session_id", st.session_id)
              .field("conversation_id", st.conversation_id)
              .field("turns", st.turns)
              .field("queued", static_cast<uint64_t>(st.queue.size()))
              .field("running", st.running ? st.running->request_id : std::string{})
              .end_object();
          return w.take();
        },
    };
  });
}

// -- session_manager ------------------------------------------------------------------

struct manager_state {
  static inline const char* name = "session_manager";
  session_deps deps;
  session_settings settings;
  // (user_id, session_id) -> session, and back: a session that stops is
  // found by its address without a walk over every session (there is one
  // per user and chat, thousands on a busy node).
  std::map<std::pair<std::string, std::string>, session_actor> sessions;
  std::unordered_map<caf::actor_addr, std::pair<std::string, std::string>> session_keys;
  // Stateless turns (no conversation, nothing stored) run without a
  // session; kept here so shutdown can stop them.
  std::unordered_map<caf::actor_addr, stream_actor> stateless;
  std::optional<caf::typed_response_promise<bool>> shutdown_promise;
  uint64_t opened = 0;
  // The other frontends that are up (docs/cluster.md), by node name.
  std::map<std::string, session_manager_actor> frontends;
  uint64_t forwarded = 0;
  // Turns handed to their owner and not yet answered, by forward id: when
  // the owner goes down they fail at once instead of at their timeout.
  struct pending_forward {
    std::string node;
    caf::typed_response_promise<turn_ticket> rp;
  };
  std::map<uint64_t, pending_forward> forwards;
  uint64_t next_forward = 0;

  // Sessions stop with the manager, however it ends (a live actor blocks
  // the actor system's shutdown). They are not linked to it: a link is an
  // entry in the manager's own list of attachables, and CAF removes a
  // session's entry by walking that list, once per session that stops.
  ~manager_state() {
    for (auto& [key, s] : sessions)
      caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  }
};

using manager_ptr = measured_pointer<session_manager_actor, manager_state>;

void check_shutdown_done(manager_ptr self) {
  auto& st = self->state;
  if (st.shutdown_promise && st.sessions.empty() && st.stateless.empty()) {
    st.shutdown_promise->deliver(true);
    st.shutdown_promise.reset();
  }
}

session_actor session_for(manager_ptr self, const chat_request& req) {
  auto& st = self->state;
  auto key = std::make_pair(req.user_id, req.session_id);
  auto i = st.sessions.find(key);
  if (i != st.sessions.end())
    return i->second;
  auto s = spawn_session(self->system(), req.user_id, req.session_id, st.deps, st.settings);
  self->monitor(s);
  st.session_keys.emplace(s.address(), key);
  st.sessions.emplace(std::move(key), s);
  return s;
}

// Forgets the session at `addr` (it stopped); false when it is not one.
bool drop_session(manager_ptr self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto k = st.session_keys.find(addr);
  if (k == st.session_keys.end())
    return false;
  st.sessions.erase(k->second);
  st.session_keys.erase(k);
  return true;
}

// A session may stop itself (idle) just as a turn for it arrives: then the
// request fails with a dead receiver and is retried once on a new session.
void open_in_session(manager_ptr self, chat_request req,
                     caf::typed_response_promise<turn_ticket> rp, bool may_retry) {
  auto session = session_for(self, req);
  auto& st = self->state;
  // Queued turns wait for the ones ahead of them: allow for all of them.
  auto timeout = st.settings.stream.turn_timeout * (st.settings.max_queued_turns + 1);
  // The request is kept for a retry (a session that stopped meanwhile)
  // once, shared by the handlers, and moved into the message otherwise.
  auto kept = may_retry ? std::make_shared<chat_request>(req) : nullptr;
  tidy_request(self, session, timeout, atom::open_turn_v, std::move(req))
      .then([=](turn_ticket& t) mutable { rp.deliver(std::move(t)); },
            [=](caf::error& err) mutable {
              if (kept && err == caf::sec::request_receiver_down) {
                drop_session(self, session.address());
                open_in_session(self, std::move(*kept), rp, false);
                return;
              }
              rp.deliver(std::move(err));
            });
}

// Asks every session of `user_id` the same question (stop, attach) and,
// unless `local_only`, the session managers of the other frontends; answers
// with the first hit, or `none` when nobody has one.
template <class T, class Atom>
caf::result<T> ask_user_sessions(manager_ptr self, Atom what, const std::string& request_id,
                                 const std::string& user_id, bool local_only, T none,
                                 std::function<bool(const T&)> hit) {
  auto& st = self->state;
  std::vector<session_actor> candidates;
  for (auto i = st.sessions.lower_bound(std::make_pair(user_id, std::string{}));
       i != st.sessions.end() && i->first.first == user_id; ++i)
    candidates.push_back(i->second);
  size_t peers = local_only ? 0 : st.frontends.size();
  if (candidates.empty() && peers == 0)
    return none;
  auto rp = self->make_response_promise<T>();
  auto pending = std::make_shared<size_t>(candidates.size() + peers);
  auto answered = std::make_shared<bool>(false);
  auto one_done = [=](std::optional<T> value) mutable {
    if (value && !*answered) {
      *answered = true;
      rp.deliver(std::move(*value));
    }
    if (--*pending == 0 && !*answered)
      rp.deliver(none);
  };
  auto on_value = [=](T& value) mutable {
    one_done(hit(value) ? std::optional<T>{std::move(value)} : std::nullopt);
  };
  auto on_error = [=](caf::error&) mutable { one_done(std::nullopt); };
  for (auto& s : candidates)
    tidy_request(self, s, std::chrono::seconds(5), what, request_id).then(on_value, on_error);
  if (!local_only)
    for (auto& [node, peer] : st.frontends)
      tidy_request(self, peer, std::chrono::seconds(5), what, request_id, user_id, true)
          .then(on_value, on_error);
  return rp;
}

// The frontend owning conversation (user_id, session_id): rendezvous
// hashing over this node and the other frontends that are up, so every
// frontend with the same view picks the same owner, and a frontend that
// goes down only moves its own conversations (docs/cluster.md).
std::string owner_of(manager_ptr self, const chat_request& req) {
  auto score = [&](const std::string& node) {
    // FNV-1a: the same on every node and build.
    uint64_t h = 1469598103934665603ull;
    for (auto part : {std::string_view{req.user_id}, std::string_view{"\x1f"},
                      std::string_view{req.session_id}, std::string_view{"\x1f"},
                      std::string_view{node}})
      for (unsigned char c : part)
        h = (h ^ c) * 1099511628211ull;
    return h;
  };
  auto& st = self->state;
  std::string best = st.settings.node;
  auto best_score = score(best);
  for (auto& [node, peer] : st.frontends) {
    auto s = score(node);
    if (s > best_score || (s == best_score && node < best)) {
      best = node;
      best_score = s;
    }
  }
  return best;
}

// A stateless turn (the OpenAI façade without a session id): nothing to
// order or store, so its stream runs without a session.
turn_ticket open_stateless(manager_ptr self, chat_request req) {
  auto& st = self->state;
  stream_deps deps{st.deps.router,     st.deps.pool, st.deps.llm, st.deps.store,
                   st.deps.summarizer, session_actor{}, st.deps.planners, st.deps.tools_http};
  auto stream = spawn_stream(self->system(), req, turn_opened{}, deps, st.settings.stream);
  self->monitor(stream);
  st.stateless.emplace(stream.address(), stream);
  return turn_ticket{stream, "", req.request_id, ""};
}

}  // namespace

session_manager_actor spawn_session_manager(caf::actor_system& sys, session_deps deps,
                                            session_settings settings) {
  return sys.spawn([=](manager_ptr self) -> session_manager_actor::behavior_type {
    self->state.deps = deps;
    self->state.settings = settings;
    self->track("session_manager", "session_manager");
    self->set_down_handler([=](caf::down_msg& msg) {
      if (self->state.stateless.erase(msg.source) == 0)
        drop_session(self, msg.source);
      check_shutdown_done(self);
    });
    return {
        [=](atom::open_turn, chat_request& req) -> caf::result<turn_ticket> {
          auto& st = self->state;
          if (st.shutdown_promise)
            return make_error(errc::unavailable, "the server is shutting down");
          ++st.opened;
          if (req.stateless)
            return open_stateless(self, std::move(req));
          if (!req.forwarded && !st.frontends.empty()) {
            auto owner = owner_of(self, req);
            if (owner != st.settings.node) {
              // The owner commits the user message and runs the turn; its
              // answer (the ticket with its stream) goes straight back to
              // our requester, who follows the stream over BASP.
              ++st.forwarded;
              req.forwarded = true;
              auto id = ++st.next_forward;
              auto rp = self->make_response_promise<turn_ticket>();
              st.forwards.emplace(id, manager_state::pending_forward{owner, rp});
              auto settle = [=](auto&& answer) {
                auto i = self->state.forwards.find(id);
                if (i == self->state.forwards.end())
                  return;  // failed already: the owner went down
                auto promise = i->second.rp;
                self->state.forwards.erase(i);
                promise.deliver(std::forward<decltype(answer)>(answer));
              };
              tidy_request(self, st.frontends.at(owner), std::chrono::seconds(60), atom::open_turn_v,
                            std::move(req))
                  .then([=](turn_ticket& t) { settle(std::move(t)); },
                        [=](caf::error& err) { settle(std::move(err)); });
              return rp;
            }
          }
          auto rp = self->make_response_promise<turn_ticket>();
          open_in_session(self, std::move(req), rp, true);
          return rp;
        },
        [=](atom::stop, const std::string& request_id,
            const std::string& user_id) -> caf::result<bool> {
          return ask_user_sessions<bool>(self, atom::stop_v, request_id, user_id, false, false,
                                         [](const bool& hit) { return hit; });
        },
        [=](atom::attach, const std::string& request_id,
            const std::string& user_id) -> caf::result<stream_actor> {
          // A stream that is not found answers as a null handle here; the
          // caller then looks for the stored turn.
          return ask_user_sessions<stream_actor>(self, atom::attach_v, request_id, user_id, false,
                                                 stream_actor{},
                                                 [](const stream_actor& s) { return bool{s}; });
        },
        [=](atom::stop, const std::string& request_id, const std::string& user_id,
            bool local_only) -> caf::result<bool> {
          return ask_user_sessions<bool>(self, atom::stop_v, request_id, user_id, local_only,
                                         false, [](const bool& hit) { return hit; });
        },
        [=](atom::attach, const std::string& request_id, const std::string& user_id,
            bool local_only) -> caf::result<stream_actor> {
          return ask_user_sessions<stream_actor>(self, atom::attach_v, request_id, user_id,
                                                 local_only, stream_actor{},
                                                 [](const stream_actor& s) { return bool{s}; });
        },
        [=](atom::peer_up, const std::string& node, caf::actor& sessions) {
          self->state.frontends[node] = caf::actor_cast<session_manager_actor>(sessions);
        },
        [=](atom::peer_down, const std::string& node) {
          auto& st = self->state;
          st.frontends.erase(node);
          for (auto i = st.forwards.begin(); i != st.forwards.end();) {
            if (i->second.node != node) {
              ++i;
              continue;
            }
            i->second.rp.deliver(make_error(
                errc::unavailable, "the frontend owning this conversation (" + node
                                       + ") went down; the turn may not have been stored, retry"));
            i = st.forwards.erase(i);
          }
        },
        [=](atom::clear, const std::string& user_id,
            const std::string& session_id) -> caf::result<int64_t> {
          auto& st = self->state;
          auto i = st.sessions.find(std::make_pair(user_id, session_id));
          if (i == st.sessions.end())
            return self->delegate(st.deps.store, atom::clear_v, user_id, session_id);
          return self->delegate(i->second, atom::clear_v);
        },
        [=](atom::shutdown) -> caf::result<bool> {
          auto& st = self->state;
          auto rp = self->make_response_promise<bool>();
          st.shutdown_promise = rp;
          for (auto& [key, s] : st.sessions)
            self->send(s, atom::shutdown_v);
          for (auto& [addr, s] : st.stateless)
            self->send(s, atom::cancel_v);
          check_shutdown_done(self);
          return rp;
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w.field("sessions", static_cast<uint64_t>(st.sessions.size()))
              .field("opened_turns", st.opened)
              .field("forwarded_turns", st.forwarded)
              .field("frontends", static_cast<uint64_t>(st.frontends.size() + 1))
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
