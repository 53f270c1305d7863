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
#include <caf/typed_event_based_actor.hpp>

#include "actors/agents/agent_pool.hpp"
#include "actors/llm/extractive_llm.hpp"
#include "actors/router/router.hpp"
#include "actors/session/session.hpp"
#include "actors/store/store_actor.hpp"
#include "persistence/store_backend.hpp"
#include "protocol/errc.hpp"
#include "protocol/type_ids.hpp"
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
    sessions =
        spawn_session_manager(sys, session_deps{router, pool, llm, store, summarizer_actor{}}, {});
    actors = {caf::actor_cast<caf::actor>(router), caf::actor_cast<caf::actor>(pool),
              caf::actor_cast<caf::actor>(llm), caf::actor_cast<caf::actor>(sessions),
              caf::actor_cast<caf::actor>(store)};
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

  std::shared_ptr<collected> subscribe(const turn_ticket& t) {
    auto out = std::make_shared<collected>();
    auto sink = spawn_collector(sys, out);
    caf::anon_send(t.stream, atom::subscribe_v, sink, uint64_t{0});
    caf::anon_send(t.stream, atom::demand_v, sink, int32_t{1000});
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
