// Deterministic actor tests with CAF's test coordinator (no threads, manual
// clock): turns of one conversation run one at a time in arrival order, and
// a cancelled turn ends with error + done and is stored as partial. Real
// actors throughout: session manager, sessions, streams, router, agent
// pool, the paced extractive generator and the SQLite store (run inline so
// every step is visible to the coordinator).
#include <filesystem>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/admin/measured.hpp"
#include "actors/agents/agent_pool.hpp"
#include "actors/llm/extractive_llm.hpp"
#include "actors/router/router.hpp"
#include "actors/session/session.hpp"
#include "actors/store/store_actor.hpp"
#include "persistence/store_backend.hpp"
#include "protocol/errc.hpp"
#include "protocol/event_feed.hpp"
#include "protocol/type_ids.hpp"
#include "tests/support/json.hpp"
#include "tests/support/test_coordinator.hpp"
#include "retrieval/kb_catalog.hpp"

using namespace ragtor;
using ragtor::test::testing_config;
using namespace std::chrono_literals;

namespace {

// Collects what a stream publishes.
struct collected {
  std::vector<stream_event> events;
  bool done() const { return !events.empty() && events.back().kind == event_kind::done; }
  std::string tokens() const {
    std::string out;
    for (auto& e : events)
      if (e.kind == event_kind::token)
        out += e.data;
    return out;
  }
};

event_sink_actor spawn_collector(caf::actor_system& sys, std::shared_ptr<collected> out) {
  return sys.spawn([out](event_sink_actor::pointer) -> event_sink_actor::behavior_type {
    return {[out](atom::events, std::vector<stream_event>& batch) {
      for (auto& e : batch)
        out->events.push_back(std::move(e));
    }};
  });
}

// Stands between the sessions and the store: passes every message
// through, except that while `hold` is set it keeps the begin_turn requests
// (the commit of a user message) until it is told {atom::opened, ok}: then
// they reach the store (ok) or fail as a full disk would (!ok).
struct commit_gate {
  bool hold = false;
  std::vector<std::pair<caf::response_promise, caf::message>> held;
};

caf::actor spawn_gate(caf::actor_system& sys, store_actor store,
                      std::shared_ptr<commit_gate> g) {
  auto dest = caf::actor_cast<caf::actor>(store);
  return sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(
        [=](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
          auto msg = x.move_content_to_message();
          auto rp = s->make_response_promise();
          if (g->hold && msg.match_element<atom::begin_turn>(0))
            g->held.emplace_back(rp, std::move(msg));
          else
            rp.delegate(dest, std::move(msg));
          return caf::delegated<caf::message>{};
        });
    return {[=](atom::opened, bool ok) {
      g->hold = false;
      for (auto& [rp, msg] : g->held)
        if (ok)
          rp.delegate(dest, std::move(msg));
        else
          rp.deliver(make_error(errc::unavailable, "disk full"));
      g->held.clear();
    }};
  });
}

class session_actors : public testing::Test {
protected:
  session_actors()
      : dir(std::filesystem::temp_directory_path() / ("ragtor-actors-" + new_id())),
        sys(testing_config(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
        self(sys) {
    store_options so;
    so.sqlite_path = dir / "t.db";
    so.run_inline = true;
    store = *spawn_store(sys, so);
    auto router = spawn_router(sys, router_settings{});
    auto pool = spawn_agent_pool(sys, std::make_shared<kb_catalog>());
    extractive_llm_settings ls;
    ls.pace = 10ms;  // tokens arrive on the manual clock
    auto llm = spawn_extractive_llm(sys, ls);
    gate = spawn_gate(sys, store, gated);
    sessions = spawn_session_manager(
        sys, session_deps{router, pool, llm, caf::actor_cast<store_actor>(gate), summarizer_actor{}},
        {});
    actors = {caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(pool),
              caf::actor_cast<caf::actor>(llm), caf::actor_cast<caf::actor>(sessions),
              caf::actor_cast<caf::actor>(store), gate};
    sched.run();
  }

  ~session_actors() override {
    // Unobserved streams give up after the subscriber timeout; let them.
    for (int i = 0; i < 10; ++i) {
      sched.advance_time(10s);
      sched.run();
    }
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
    std::filesystem::remove_all(dir);
  }

  chat_request turn(std::string request_id) {
    chat_request r;
    r.user_id = "alice";
    r.session_id = "s1";
    r.message = "hello " + request_id;
    r.request_id = std::move(request_id);
    return r;
  }

  // The ticket waiting in the test's mailbox, if any.
  std::optional<turn_ticket> take_ticket() {
    std::optional<turn_ticket> out;
    self->receive([&](turn_ticket& t) { out = std::move(t); },
                  [&](caf::error& err) { ADD_FAILURE() << sys.render(err); },
                  caf::after(0s) >> [] {});
    return out;
  }

  // Holds the store's commits and opens `r` with `manager`: the turn's
  // stream if it started before its commit.
  stream_actor open_held(const session_manager_actor& manager, chat_request r) {
    gated->hold = true;
    auto id = r.request_id;
    self->send(manager, atom::open_turn_v, std::move(r));
    sched.run();
    return stream_of(id);
  }

  // What `stream` publishes from its first event, collected.
  std::shared_ptr<collected> watch(const stream_actor& stream) {
    auto out = std::make_shared<collected>();
    auto sink = spawn_collector(sys, out);
    caf::anon_send(stream, atom::subscribe_v, sink, uint64_t{0});
    caf::anon_send(stream, atom::demand_v, sink, int32_t{1000});
    return out;
  }

  std::shared_ptr<collected> subscribe(const turn_ticket& t) {
    auto out = watch(t.stream);
    sched.run();
    return out;
  }

  // Advances the manual clock one token interval at a time until `pred`.
  template <class Pred>
  bool run_until(Pred pred, int max_steps = 10000) {
    for (int i = 0; i < max_steps && !pred(); ++i) {
      sched.advance_time(10ms);
      sched.run();
    }
    return pred();
  }

  // A turn whose request_id the server generated (the HTTP layer sets
  // fresh_request_id): the session may start it before its commit.
  chat_request fresh_turn(std::string request_id) {
    auto r = turn(std::move(request_id));
    r.fresh_request_id = true;
    return r;
  }

  // Runs a turn to its end; its ticket.
  turn_ticket complete(chat_request r) {
    self->send(sessions, atom::open_turn_v, std::move(r));
    sched.run();
    auto t = take_ticket();
    EXPECT_TRUE(t);
    if (!t)
      return {};
    auto events = subscribe(*t);
    EXPECT_TRUE(run_until([&] { return events->done(); }));
    sched.run();
    return *t;
  }

  // The live stream actor of `request_id` (the console's directory).
  stream_actor stream_of(const std::string& request_id) {
    auto e = actor_directory::instance().find_named(sys, "stream", request_id);
    return e ? caf::actor_cast<stream_actor>(e->addr) : stream_actor{};
  }

  ragtor::test::json status_of(const stream_actor& s) {
    std::string out;
    self->send(s, atom::status_v);
    sched.run();
    self->receive([&](std::string& j) { out = std::move(j); },
                  caf::after(0s) >> [] { ADD_FAILURE() << "no status reply"; });
    return ragtor::test::json::parse(out);
  }

  std::vector<stored_message> history(const std::string& conversation_id) {
    std::vector<stored_message> out;
    self->send(store, atom::history_v, conversation_id, int32_t{100});
    sched.run();
    self->receive([&](std::vector<stored_message>& h) { out = std::move(h); },
                  [&](caf::error& err) { ADD_FAILURE() << sys.render(err); },
                  caf::after(0s) >> [] { ADD_FAILURE() << "no history reply"; });
    return out;
  }

  std::filesystem::path dir;
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  caf::scoped_actor self;
  store_actor store;
  std::shared_ptr<commit_gate> gated = std::make_shared<commit_gate>();
  caf::actor gate;
  session_manager_actor sessions;
  std::vector<caf::actor> actors;
};

}  // namespace

TEST_F(session_actors, turns_of_one_conversation_run_one_at_a_time_in_order) {
  self->send(sessions, atom::open_turn_v, turn("r1"));
  self->send(sessions, atom::open_turn_v, turn("r2"));
  sched.run();
  auto first = take_ticket();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->request_id, "r1");
  // The second turn waits: its user message is not even stored yet.
  EXPECT_FALSE(take_ticket());
  auto events = subscribe(*first);
  ASSERT_TRUE(run_until([&] { return events->done(); }));
  EXPECT_EQ(events->events.front().kind, event_kind::start);
  sched.run();
  auto second = take_ticket();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->request_id, "r2");
  auto events2 = subscribe(*second);
  ASSERT_TRUE(run_until([&] { return events2->done(); }));
  auto h = history(first->conversation_id);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].request_id, "r1");
  EXPECT_EQ(h[0].role, "user");
  EXPECT_EQ(h[1].request_id, "r1");
  EXPECT_EQ(h[1].role, "assistant");
  EXPECT_EQ(h[1].content, events->tokens());
  EXPECT_TRUE(h[1].completed);
  EXPECT_EQ(h[2].request_id, "r2");
  EXPECT_EQ(h[3].request_id, "r2");
  for (size_t i = 0; i < h.size(); ++i)
    EXPECT_EQ(h[i].seq, static_cast<int64_t>(i + 1));
}

// A feed that keeps what it is handed, as the HTTP connection's channel
// would; `open` false: the reader has gone.
struct collecting_feed final : event_feed {
  bool deliver(std::vector<stream_event>&& batch) override {
    ++batches;
    for (auto& e : batch)
      got.events.push_back(std::move(e));
    return open;
  }
  collected got;
  int batches = 0;
  bool open = true;
};

TEST_F(session_actors, a_subscriber_in_this_process_is_handed_its_batches_directly) {
  self->send(sessions, atom::open_turn_v, turn("r1"));
  sched.run();
  auto ticket = take_ticket();
  ASSERT_TRUE(ticket);
  auto via_messages = std::make_shared<collected>();
  auto sink = spawn_collector(sys, via_messages);
  auto feed = std::make_shared<collecting_feed>();
  auto* block = caf::actor_cast<caf::actor_control_block*>(sink);
  register_local_feed(block, feed);
  EXPECT_EQ(find_local_feed(block), feed);
  caf::anon_send(ticket->stream, atom::subscribe_v, sink, uint64_t{0});
  caf::anon_send(ticket->stream, atom::demand_v, sink, int32_t{1000});
  ASSERT_TRUE(run_until([&] { return feed->got.done(); }));
  unregister_local_feed(block);
  EXPECT_FALSE(find_local_feed(block));
  EXPECT_TRUE(via_messages->events.empty()) << "a batch went to the sink as a message";
  EXPECT_TRUE(feed->got_done) << "done delivered without telling the sink";
  auto& evs = feed->got.events;
  ASSERT_GE(evs.size(), 3u);
  EXPECT_EQ(evs.front().kind, event_kind::start);
  for (size_t i = 0; i < evs.size(); ++i)
    EXPECT_EQ(evs[i].seq, i + 1);
  EXPECT_GT(feed->batches, 1);
  auto h = history(ticket->conversation_id);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].content, feed->got.tokens());
  EXPECT_TRUE(h[1].completed);
  // Without a feed the next turn's subscriber gets messages, as a sink on
  // another node does.
  self->send(sessions, atom::open_turn_v, turn("r2"));
  sched.run();
  auto next = take_ticket();
  ASSERT_TRUE(next);
  auto events = subscribe(*next);
  ASSERT_TRUE(run_until([&] { return events->done(); }));
  EXPECT_EQ(events->events.front().kind, event_kind::start);
}

TEST_F(session_actors, a_cancelled_turn_ends_with_error_then_done_and_is_stored_partial) {
  self->send(sessions, atom::open_turn_v, turn("r1"));
  sched.run();
  auto ticket = take_ticket();
  ASSERT_TRUE(ticket);
  auto events = subscribe(*ticket);
  // Let a few tokens through, then cancel mid-answer.
  ASSERT_TRUE(run_until([&] { return events->tokens().size() > 10; }));
  caf::anon_send(ticket->stream, atom::cancel_v);
  ASSERT_TRUE(run_until([&] { return events->done(); }));
  auto& evs = events->events;
  ASSERT_GE(evs.size(), 3u);
  EXPECT_EQ(evs[evs.size() - 2].kind, event_kind::error);
  EXPECT_NE(evs[evs.size() - 2].data.find("cancelled"), std::string::npos);
  EXPECT_NE(evs.back().data.find("\"partial\":true"), std::string::npos);
  auto h = history(ticket->conversation_id);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_FALSE(h[1].completed);
  EXPECT_EQ(h[1].content, events->tokens());
  // The next turn of the conversation runs normally afterwards.
  self->send(sessions, atom::open_turn_v, turn("r2"));
  sched.run();
  auto next = take_ticket();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->request_id, "r2");
  auto events2 = subscribe(*next);
  ASSERT_TRUE(run_until([&] { return events2->done(); }));
  EXPECT_EQ(events2->events.back().data.find("\"partial\":true"), std::string::npos);
}

TEST_F(session_actors, a_retry_of_the_running_turn_joins_its_stream) {
  self->send(sessions, atom::open_turn_v, turn("r1"));
  sched.run();
  auto first = take_ticket();
  ASSERT_TRUE(first);
  auto events = subscribe(*first);
  ASSERT_TRUE(run_until([&] { return events->tokens().size() > 10; }));
  // The client retries while the answer is still being written.
  self->send(sessions, atom::open_turn_v, turn("r1"));
  sched.run();
  auto again = take_ticket();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->stream, first->stream);
  auto replayed = subscribe(*again);
  ASSERT_TRUE(run_until([&] { return events->done() && replayed->done(); }));
  EXPECT_EQ(replayed->events.front().kind, event_kind::start);
  EXPECT_EQ(replayed->tokens(), events->tokens());
  EXPECT_EQ(replayed->events.back().data, events->events.back().data);
  auto h = history(first->conversation_id);
  ASSERT_EQ(h.size(), 2u);  // one user message, one answer
  EXPECT_EQ(h[1].content, events->tokens());
}

TEST_F(session_actors, a_busy_request_id_is_refused) {
  self->send(sessions, atom::open_turn_v, turn("r1"));
  self->send(sessions, atom::open_turn_v, turn("r1"));
  sched.run();
  int tickets = 0, conflicts = 0;
  for (int i = 0; i < 2; ++i)
    self->receive([&](turn_ticket&) { ++tickets; },
                  [&](caf::error& err) { conflicts += code_of(err) == errc::conflict; },
                  caf::after(0s) >> [] {});
  EXPECT_EQ(tickets, 1);
  EXPECT_EQ(conflicts, 1);
}

// The commit beside the turn (issue 20): once the conversation is known,
// a turn routes, reads its context and asks the model while its user
// message commits; `start` is published only after the commit, the answer
// stored only after it, and the client's ticket waits for it.
TEST_F(session_actors, an_early_turn_publishes_start_only_after_its_user_message_is_stored) {
  auto first = complete(fresh_turn("e1"));  // the conversation becomes known
  auto early = open_held(sessions, fresh_turn("e2"));
  ASSERT_TRUE(early) << "the turn did not start before its commit";
  auto watched = watch(early);
  // Routing, context, search and generation went ahead: the model has
  // written tokens while the commit is still held.
  ASSERT_TRUE(run_until([&] { return status_of(early).integer("/tokens") > 3; }, 200));
  EXPECT_EQ(gated->held.size(), 1u);
  EXPECT_TRUE(watched->events.empty()) << "published before the user message was stored";
  EXPECT_FALSE(take_ticket());
  EXPECT_EQ(history(first.conversation_id).size(), 2u);
  // The commit lands: start first, then everything held, then the rest.
  caf::anon_send(gate, atom::opened_v, true);
  sched.run();
  auto ticket = take_ticket();
  ASSERT_TRUE(ticket);
  EXPECT_EQ(ticket->stream, early);
  EXPECT_EQ(ticket->conversation_id, first.conversation_id);
  ASSERT_TRUE(run_until([&] { return watched->done(); }));
  ASSERT_FALSE(watched->events.empty());
  EXPECT_EQ(watched->events.front().kind, event_kind::start);
  for (size_t i = 0; i < watched->events.size(); ++i)
    EXPECT_EQ(watched->events[i].seq, i + 1);
  EXPECT_EQ(watched->events.back().data.find("\"partial\":true"), std::string::npos);
  auto h = history(first.conversation_id);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[2].request_id, "e2");
  EXPECT_EQ(h[2].role, "user");
  EXPECT_EQ(h[3].role, "assistant");
  EXPECT_EQ(h[3].content, watched->tokens());
  EXPECT_TRUE(h[3].completed);
}

// A session's first turn: the conversation is not known until the store
// opens it, so the stream routes, reads its (empty) context and searches
// while the user message commits, and asks the model only once the store
// opened a new conversation for it; `start` still comes first.
TEST_F(session_actors, a_sessions_first_turn_starts_before_its_commit_and_asks_the_model_after_it) {
  auto early = open_held(sessions, fresh_turn("e1"));
  ASSERT_TRUE(early) << "the first turn did not start before its commit";
  auto watched = watch(early);
  ASSERT_TRUE(run_until([&] { return status_of(early).boolean("/waits_for_commit"); }, 200));
  for (int i = 0; i < 20; ++i) {
    sched.advance_time(10ms);
    sched.run();
  }
  EXPECT_EQ(status_of(early).integer("/tokens"), 0) << "asked the model before the commit";
  EXPECT_EQ(gated->held.size(), 1u);
  EXPECT_TRUE(watched->events.empty()) << "published before the user message was stored";
  EXPECT_FALSE(take_ticket());
  caf::anon_send(gate, atom::opened_v, true);
  sched.run();
  auto ticket = take_ticket();
  ASSERT_TRUE(ticket);
  EXPECT_EQ(ticket->stream, early) << "a new conversation's turn need not run again";
  ASSERT_TRUE(run_until([&] { return watched->done(); }));
  ASSERT_FALSE(watched->events.empty());
  EXPECT_EQ(watched->events.front().kind, event_kind::start);
  for (size_t i = 0; i < watched->events.size(); ++i)
    EXPECT_EQ(watched->events[i].seq, i + 1);
  auto h = history(ticket->conversation_id);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].request_id, "e1");
  EXPECT_EQ(h[1].role, "assistant");
  EXPECT_EQ(h[1].content, watched->tokens());
  EXPECT_TRUE(h[1].completed);
}

// A session's first turn in a conversation stored before (its session
// actor stopped when idle, or the server restarted): the early stream read
// an empty context, so it quits before asking the model and the turn runs
// again in the conversation the store opened.
TEST_F(session_actors, a_sessions_first_turn_in_a_stored_conversation_runs_again) {
  auto first = complete(fresh_turn("e1"));
  auto again = spawn_session_manager(
      sys,
      session_deps{caf::actor_cast<router_actor>(actors[0]),
                   caf::actor_cast<agent_pool_actor>(actors[1]),
                   caf::actor_cast<llm_actor>(actors[2]), caf::actor_cast<store_actor>(gate),
                   summarizer_actor{}},
      {});
  actors.push_back(caf::actor_cast<caf::actor>(again));
  auto early = open_held(again, fresh_turn("e2"));
  ASSERT_TRUE(early);
  ASSERT_TRUE(run_until([&] { return status_of(early).boolean("/waits_for_commit"); }, 200));
  EXPECT_EQ(status_of(early).integer("/tokens"), 0);
  caf::anon_send(gate, atom::opened_v, true);
  sched.run();
  auto ticket = take_ticket();
  ASSERT_TRUE(ticket);
  EXPECT_NE(ticket->stream, early);
  EXPECT_EQ(ticket->conversation_id, first.conversation_id);
  auto events = subscribe(*ticket);
  ASSERT_TRUE(run_until([&] { return events->done(); }));
  EXPECT_EQ(events->events.front().kind, event_kind::start);
  auto h = history(first.conversation_id);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[2].request_id, "e2");
  EXPECT_EQ(h[2].seq, 3);
  EXPECT_EQ(h[3].content, events->tokens());
  EXPECT_TRUE(h[3].completed);
}

TEST_F(session_actors, an_early_turn_whose_commit_fails_publishes_and_stores_nothing) {
  auto first = complete(fresh_turn("e1"));
  auto early = open_held(sessions, fresh_turn("e2"));
  ASSERT_TRUE(early);
  auto watched = watch(early);
  ASSERT_TRUE(run_until([&] { return status_of(early).integer("/tokens") > 3; }, 200));
  // The model is streaming when the store fails the user message.
  caf::anon_send(gate, atom::opened_v, false);
  sched.run();
  bool refused = false;
  self->receive([&](turn_ticket&) { ADD_FAILURE() << "a ticket for an unstored turn"; },
                [&](caf::error& err) { refused = code_of(err) == errc::unavailable; },
                caf::after(0s) >> [] { ADD_FAILURE() << "no answer"; });
  EXPECT_TRUE(refused);
  for (int i = 0; i < 20; ++i) {
    sched.advance_time(10ms);
    sched.run();
  }
  EXPECT_FALSE(stream_of("e2")) << "the early stream outlived its failed commit";
  EXPECT_TRUE(watched->events.empty());
  auto h = history(first.conversation_id);
  EXPECT_EQ(h.size(), 2u);  // nothing of e2, not even half
  // The session goes on: the next turn runs and is stored.
  auto next = complete(fresh_turn("e3"));
  EXPECT_EQ(next.conversation_id, first.conversation_id);
  h = history(first.conversation_id);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[2].request_id, "e3");
  EXPECT_EQ(h[2].seq, 3);
}

TEST_F(session_actors, an_early_turn_in_a_conversation_deleted_meanwhile_starts_again) {
  auto first = complete(fresh_turn("e1"));
  // The conversation is deleted behind the session's back (the HTTP
  // DELETE goes to the store): the guess is wrong and the turn reruns.
  self->send(store, atom::delete_conv_v, first.conversation_id, std::string{"alice"});
  sched.run();
  self->receive([](bool) {}, [&](caf::error& err) { ADD_FAILURE() << sys.render(err); },
                caf::after(0s) >> [] { ADD_FAILURE() << "no delete reply"; });
  auto early = open_held(sessions, fresh_turn("e2"));
  ASSERT_TRUE(early);
  caf::anon_send(gate, atom::opened_v, true);
  sched.run();
  auto ticket = take_ticket();
  ASSERT_TRUE(ticket);
  // Its context came from the deleted conversation: that stream is gone and
  // a new one runs the turn in the conversation the store opened.
  EXPECT_NE(ticket->stream, early);
  auto events = subscribe(*ticket);
  ASSERT_TRUE(run_until([&] { return events->done(); }));
  EXPECT_EQ(events->events.front().kind, event_kind::start);
  auto second = *ticket;
  ASSERT_FALSE(second.conversation_id.empty());
  auto h = history(second.conversation_id);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].request_id, "e2");
  EXPECT_TRUE(h[1].completed);
  EXPECT_TRUE(history(first.conversation_id).empty());
}

// Sessions are not linked to their manager (a link per session made every
// session's stop walk the manager's attachables), yet they still stop
// with it: a session left running would block the actor system's shutdown.
TEST_F(session_actors, sessions_stop_with_their_manager) {
  complete(turn("r1"));
  auto other = turn("r2");
  other.user_id = "bob";
  complete(std::move(other));
  auto live = actor_directory::instance().list(sys, "session");
  ASSERT_EQ(live.size(), 2u);
  std::vector<caf::actor> watched;
  for (auto& e : live)
    watched.push_back(caf::actor_cast<caf::actor>(e.addr));
  // One session stopping on its own is forgotten by the manager, which
  // keeps serving the other.
  caf::anon_send_exit(watched[0], caf::exit_reason::user_shutdown);
  sched.run();
  EXPECT_EQ(actor_directory::instance().list(sys, "session").size(), 1u);
  // The counts kept by kind follow the entries.
  auto counted = [&] {
    auto& dir = actor_directory::instance();
    auto kinds = dir.kinds(sys);
    size_t all = 0;
    for (auto& [kind, n] : kinds) {
      EXPECT_EQ(n, dir.list(sys, kind).size()) << kind;
      EXPECT_EQ(dir.count(sys, kind), n) << kind;
      all += n;
    }
    EXPECT_EQ(all, dir.list(sys, "").size());
    return kinds.contains("session") ? kinds.at("session") : 0;
  };
  EXPECT_EQ(counted(), 1u);
  caf::anon_send_exit(sessions, caf::exit_reason::user_shutdown);
  sched.run();
  EXPECT_TRUE(actor_directory::instance().list(sys, "session").empty());
  EXPECT_TRUE(actor_directory::instance().list(sys, "session_manager").empty());
  EXPECT_EQ(counted(), 0u);
  EXPECT_EQ(actor_directory::instance().count(sys, "session_manager"), 0u);
}

// The idle timer: one pending per session, however many turns it ran (a
// timer per idle spell left one entry in the actor clock per turn, each
// for server.idle_timeout), and the session still stops once idle that
// long after its last turn.
TEST_F(session_actors, an_idle_session_keeps_one_timer_and_stops_once_idle_long_enough) {
  using clock_type = caf::detail::simple_actor_clock;
  auto session_ticks = [&] {
    size_t n = 0;
    for (auto& [due, ev] : sched.clock().schedule()) {
      if (ev->subtype != clock_type::actor_msg_type)
        continue;
      auto& m = static_cast<const clock_type::actor_msg&>(*ev);
      if (m.content && m.content->content().match_elements<atom::tick, uint64_t>())
        ++n;
    }
    return n;
  };
  auto sessions_alive = [&] { return actor_directory::instance().list(sys, "session").size(); };
  for (int i = 0; i < 5; ++i)
    complete(turn("r" + std::to_string(i)));
  EXPECT_EQ(session_ticks(), 1u) << "one idle timer, not one per turn";
  // The first idle spell's timer comes due before the session has been
  // idle for the whole timeout since its last turn: it waits again.
  sched.advance_time(599s);
  sched.run();
  EXPECT_EQ(sessions_alive(), 1u);
  EXPECT_EQ(session_ticks(), 1u);
  sched.advance_time(2s);
  sched.run();
  EXPECT_EQ(sessions_alive(), 0u) << "idle for the timeout after its last turn";
  EXPECT_EQ(session_ticks(), 0u);
}
