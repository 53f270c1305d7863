// Deterministic tests of the planner driver (actors/pipeline/planner_driver)
// with CAF's test coordinator: no threads and a manual clock, so retries,
// backoff and timeouts happen on virtual time. The planner is real (the
// guided workflow and the tool agent over pipeline/); the model gateway,
// the agent pool and the flow-state store are small scripted actors that
// answer at once, fail, or hold their reply forever (a stalled model).
#include <deque>
#include <functional>
#include <map>
#include <optional>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/pipeline/planner.hpp"
#include "protocol/errc.hpp"
#include "protocol/type_ids.hpp"
#include "tests/support/test_coordinator.hpp"

using namespace ragtor;
using ragtor::test::testing_config;
using namespace std::chrono_literals;

namespace {

// What a scripted actor does with one request.
struct answer {
  enum { reply, fail, hang } what = reply;
  std::string text;
  std::vector<tool_call> calls;
  errc code = errc::llm_failed;
};

answer says(std::string text) {
  return {answer::reply, std::move(text), {}, {}};
}
answer fails(errc code) {
  return {answer::fail, {}, {}, code};
}
answer hangs() {
  return {answer::hang, {}, {}, {}};
}
answer calls_tool(std::string name, std::string args) {
  tool_call c;
  c.id = "call_1";
  c.name = std::move(name);
  c.arguments = std::move(args);
  return {answer::reply, {}, {c}, {}};
}

// The script and what the fakes saw; shared by the test and the actors
// (the coordinator runs everything on the test's thread).
struct world {
  std::map<std::string, std::deque<answer>> model;  // by purpose; empty = "{}"
  std::deque<answer> searches;                      // empty = one document
  std::string flow_state;
  bool store_hangs = false;
  std::vector<std::string> model_calls;  // purposes, in order
  std::vector<std::string> cancels;      // request ids cancelled at the gateway
  int held = 0;                          // replies held forever
  int searches_made = 0;
  std::vector<std::string> saved_states;
};

answer next_of(std::deque<answer>& q, answer fallback) {
  if (q.empty())
    return fallback;
  auto a = std::move(q.front());
  q.pop_front();
  return a;
}

llm_actor spawn_model(caf::actor_system& sys, std::shared_ptr<world> w) {
  return sys.spawn([w](llm_actor::pointer self) -> llm_actor::behavior_type {
    return {
        [](atom::generate, generation_request&, token_sink_actor) -> generation_result {
          return {};
        },
        [w](atom::cancel, const std::string& id) { w->cancels.push_back(id); },
        [self, w](atom::complete, completion_request& req) -> caf::result<completion_result> {
          w->model_calls.push_back(req.purpose);
          auto a = next_of(w->model[req.purpose], says("{}"));
          if (a.what == answer::fail)
            return make_error(a.code, "scripted failure");
          if (a.what == answer::hang) {
            ++w->held;
            return self->make_response_promise<completion_result>();  // never delivered
          }
          completion_result r;
          r.text = a.text;
          r.tool_calls = a.calls;
          return r;
        },
        [](atom::tick, const std::string&) {},
        [](atom::upstream, const std::string&, upstream_event&) {},
        [](atom::status) { return std::string{"{}"}; },
    };
  });
}

retrieval_agent_actor spawn_agent(caf::actor_system& sys, std::shared_ptr<world> w) {
  return sys.spawn(
      [w](retrieval_agent_actor::pointer self) -> retrieval_agent_actor::behavior_type {
        return {
            [self, w](atom::retrieve, const std::string& query, const std::string&,
                      retrieve_options) -> caf::result<retrieval_result> {
              ++w->searches_made;
              retrieval_item doc;
              doc.result_id = "c1";
              doc.doc_id = "d1";
              doc.evidence = "The K7 batteries last fourteen months.";
              auto a = next_of(w->searches, says(""));
              if (a.what == answer::fail)
                return make_error(a.code, "scripted search failure");
              if (a.what == answer::hang) {
                ++w->held;
                return self->make_response_promise<retrieval_result>();
              }
              retrieval_result r;
              r.retrieval_results.push_back(doc);
              return r;
            },
            [](atom::status) { return std::string{"{}"}; },
        };
      });
}

agent_pool_actor spawn_pool(caf::actor_system& sys, retrieval_agent_actor agent) {
  return sys.spawn([agent](agent_pool_actor::pointer self) -> agent_pool_actor::behavior_type {
    return {
        [agent](atom::resolve, const std::string&) { return agent; },
        [self, agent](atom::retrieve, const std::string&, std::string& query, std::string& thread,
                      retrieve_options& opts) {
          return self->delegate(agent, atom::retrieve_v, std::move(query), std::move(thread),
                                std::move(opts));
        },
        [](atom::peer_up, const std::string&, caf::actor&, const std::string&) {},
        [](atom::peer_down, const std::string&) {},
        [](atom::tick, uint64_t) {},
        [](atom::status) { return std::string{"{}"}; },
    };
  });
}

flow_store_actor spawn_flow_store(caf::actor_system& sys, std::shared_ptr<world> w) {
  return sys.spawn([w](flow_store_actor::pointer self) -> flow_store_actor::behavior_type {
    return {
        [self, w](atom::flow_state, const std::string&) -> caf::result<std::string> {
          if (w->store_hangs) {
            ++w->held;
            return self->make_response_promise<std::string>();
          }
          return w->flow_state;
        },
        [w](atom::flow_state, const std::string&, std::string& json) {
          w->saved_states.push_back(json);
          w->flow_state = json;
          return true;
        },
    };
  });
}

// One intent with one slot, searched in this KB.
constexpr const char* workflow_json =
    R"({"business":"locks","model_timeout_ms":1000,"model_retries":2,)"
    R"("intents":[{"l1":"support","l2":"battery","description":"battery life",)"
    R"("slots":[{"name":"model","description":"the lock model"}]},)"
    R"({"l2":"info","description":"product information"}]})";

constexpr const char* intent_reply = R"({"intent":"battery","confidence":0.9})";
constexpr const char* slots_reply = R"({"slots":{"model":"K7"}})";
constexpr const char* sufficient = R"({"is_sufficient":true,"suggestion":"pass"})";
constexpr const char* verified = R"({"answers":true,"reason":"ok"})";

class planner_driver : public testing::Test {
protected:
  planner_driver()
      : sys(testing_config(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
        self(sys),
        w(std::make_shared<world>()),
        gate(std::make_shared<planner_gate>(4)) {
    auto agent = spawn_agent(sys, w);
    deps = planner_deps{spawn_model(sys, w), spawn_pool(sys, agent), spawn_flow_store(sys, w),
                        nullptr};
    actors = {caf::actor_cast<caf::actor>(deps.llm), caf::actor_cast<caf::actor>(deps.pool),
              caf::actor_cast<caf::actor>(deps.store), caf::actor_cast<caf::actor>(agent)};
    sched.run();
  }

  ~planner_driver() override {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  plan_input input(std::string mode) {
    plan_input in;
    in.request_id = "req_1";
    in.conversation_id = "conv_1";
    in.user_id = "u";
    in.question = "How long do the K7 batteries last?";
    in.kb = "locks";
    in.agent_type = "hybrid_agent";
    in.settings.name = "locks";
    in.settings.answer_mode = mode;
    in.settings.max_tool_calls = 3;
    if (mode == "workflow")
      in.settings.workflow_json = workflow_json;
    return in;
  }

  // Spawns a planner and sends it `plan`; run() then steps the world.
  void start(std::string mode) {
    auto p = spawn_planner(sys, mode, deps, *gate);
    ASSERT_TRUE(p);
    planner = *p;
    self->send(planner, atom::plan_v, input(mode));
  }

  // Runs every message that is due (not the timers).
  void run() { sched.run(); }
  bool answered() const { return outcome.has_value() || failure.has_value(); }
  // Takes the planner's answer if it is in the test's mailbox.
  void collect() {
    if (answered())
      return;
    self->receive([this](plan_outcome& out) { outcome = std::move(out); },
                  [this](caf::error& err) { failure = err; },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  }
  void run_and_collect() {
    run();
    collect();
  }

  std::vector<std::string> nodes() const {
    std::vector<std::string> out;
    for (auto& l : outcome->logs)
      out.push_back(l.node);
    return out;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  caf::scoped_actor self;
  std::shared_ptr<world> w;
  std::shared_ptr<planner_gate> gate;
  planner_deps deps;
  std::vector<caf::actor> actors;
  planner_actor planner;
  std::optional<plan_outcome> outcome;
  std::optional<caf::error> failure;
};

void script_happy_workflow(world& w) {
  w.model["workflow_intent"] = {says(intent_reply)};
  w.model["workflow_slots"] = {says(slots_reply)};
  w.model["workflow_evaluate"] = {says(sufficient)};
  w.model["workflow_verify"] = {says(verified)};
}

TEST_F(planner_driver, workflow_runs_every_node_and_answers_generate) {
  script_happy_workflow(*w);
  start("workflow");
  run_and_collect();
  ASSERT_TRUE(outcome) << (failure ? sys.render(*failure) : "no answer");
  EXPECT_EQ(outcome->action, "generate");
  ASSERT_EQ(outcome->evidence.retrieval_results.size(), 1u);
  EXPECT_EQ(outcome->question, "How long do the K7 batteries last? (model: K7)");
  EXPECT_EQ(nodes(), (std::vector<std::string>{"intent", "slots", "retrieval", "verify"}));
  EXPECT_EQ(w->model_calls, (std::vector<std::string>{"workflow_intent", "workflow_slots",
                                                      "workflow_evaluate", "workflow_verify"}));
  EXPECT_EQ(w->searches_made, 1);
  ASSERT_EQ(w->saved_states, (std::vector<std::string>{""})) << "the finished flow is cleared";
  EXPECT_EQ(gate->running(), 0) << "the place is given back";
}

TEST_F(planner_driver, a_missing_slot_asks_and_keeps_the_state) {
  w->model["workflow_intent"] = {says(intent_reply)};
  w->model["workflow_slots"] = {says(R"({"slots":{"model":null}})")};
  start("workflow");
  run_and_collect();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, "reply");
  EXPECT_NE(outcome->reply.find("model"), std::string::npos) << outcome->reply;
  ASSERT_EQ(w->saved_states.size(), 1u);
  EXPECT_NE(w->saved_states[0].find("\"ask_rounds\":1"), std::string::npos) << w->saved_states[0];
  EXPECT_EQ(w->searches_made, 0);
}

TEST_F(planner_driver, a_failed_intent_call_serves_the_plain_pipeline) {
  w->model["workflow_intent"] = {fails(errc::unavailable)};  // final: not retried
  start("workflow");
  run_and_collect();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, "pipeline");
  EXPECT_EQ(w->model_calls.size(), 1u);
}

TEST_F(planner_driver, failed_searches_retry_then_escalate) {
  w->model["workflow_intent"] = {says(intent_reply)};
  w->model["workflow_slots"] = {says(slots_reply)};
  w->searches = {fails(errc::retrieval_failed), fails(errc::retrieval_failed),
                 fails(errc::retrieval_failed)};
  start("workflow");
  run_and_collect();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, "escalate");
  EXPECT_TRUE(outcome->need_human_help);
  EXPECT_EQ(w->searches_made, 3) << "max_retrieval_rounds searches";
  EXPECT_EQ(nodes().back(), "escalate");
}

TEST_F(planner_driver, a_failed_model_call_is_retried_after_its_backoff_on_virtual_time) {
  script_happy_workflow(*w);
  w->model["workflow_intent"] = {fails(errc::llm_failed), fails(errc::llm_failed),
                                 says(intent_reply)};
  start("workflow");
  run();
  EXPECT_EQ(w->model_calls.size(), 1u) << "the second attempt waits for its backoff";
  sched.advance_time(199ms);
  run();
  EXPECT_EQ(w->model_calls.size(), 1u);
  sched.advance_time(1ms);  // 200 ms: the first backoff
  run();
  EXPECT_EQ(w->model_calls.size(), 2u);
  sched.advance_time(399ms);  // doubled
  run();
  EXPECT_EQ(w->model_calls.size(), 2u);
  sched.advance_time(1ms);
  run_and_collect();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, "generate");
  EXPECT_EQ(outcome->logs.front().output_json.find("\"attempts\":\"3\"") != std::string::npos,
            true)
      << outcome->logs.front().output_json;
}

TEST_F(planner_driver, a_model_call_that_times_out_is_closed_and_retried) {
  script_happy_workflow(*w);
  w->model["workflow_intent"] = {hangs(), says(intent_reply)};
  start("workflow");
  run();
  EXPECT_EQ(w->held, 1);
  EXPECT_FALSE(answered());
  sched.advance_time(1000ms);  // model_timeout_ms
  run();
  EXPECT_EQ(w->cancels, (std::vector<std::string>{"req_1"}))
      << "the gateway is told to close the stalled call";
  sched.advance_time(200ms);  // backoff
  run_and_collect();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, "generate");
  EXPECT_EQ(w->model_calls.front(), "workflow_intent");
  EXPECT_EQ(w->model_calls[1], "workflow_intent");
}

TEST_F(planner_driver, retries_end_and_the_node_decides) {
  w->model["workflow_intent"] = {fails(errc::timeout), fails(errc::timeout), fails(errc::timeout)};
  start("workflow");
  for (int i = 0; i < 3 && !answered(); ++i) {
    run();
    sched.advance_time(1s);
  }
  run_and_collect();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->action, "pipeline") << "model_retries = 2: three attempts, then the fallback";
  EXPECT_EQ(w->model_calls.size(), 3u);
}

TEST_F(planner_driver, a_refusal_by_the_gateway_ends_the_turn_overloaded_at_once) {
  w->model["workflow_intent"] = {fails(errc::overloaded)};
  start("workflow");
  run_and_collect();
  ASSERT_TRUE(failure);
  EXPECT_EQ(code_of(*failure), errc::overloaded);
  EXPECT_EQ(w->model_calls.size(), 1u) << "not retried";
  EXPECT_EQ(gate->running(), 0);
}

// Cancel while the planner waits in each phase: it answers `cancelled` at
// once, closes a model call in flight at the gateway, and quits.
struct cancel_case {
  const char* name;
  std::function<void(world&)> stall;
  bool model_in_flight;
};

class planner_cancel : public planner_driver, public testing::WithParamInterface<cancel_case> {};

TEST_P(planner_cancel, answers_cancelled_and_closes_the_call_in_flight) {
  script_happy_workflow(*w);
  GetParam().stall(*w);
  start("workflow");
  run();
  ASSERT_FALSE(answered()) << "the planner waits in " << GetParam().name;
  auto down = std::make_shared<bool>(false);
  planner->attach_functor([down](const caf::error&) { *down = true; });
  caf::anon_send(planner, atom::cancel_v);
  run_and_collect();
  ASSERT_TRUE(failure) << GetParam().name;
  EXPECT_EQ(code_of(*failure), errc::cancelled);
  EXPECT_EQ(!w->cancels.empty(), GetParam().model_in_flight) << GetParam().name;
  EXPECT_TRUE(*down) << "the planner quit";
  EXPECT_EQ(gate->running(), 0);
  // Nothing happens later: no retry, no further call.
  auto calls = w->model_calls.size();
  sched.advance_time(10s);
  run();
  EXPECT_EQ(w->model_calls.size(), calls);
}

INSTANTIATE_TEST_SUITE_P(
    phases, planner_cancel,
    testing::Values(
        cancel_case{"load_state", [](world& w) { w.store_hangs = true; }, false},
        cancel_case{"intent", [](world& w) { w.model["workflow_intent"] = {hangs()}; }, true},
        cancel_case{"slots",
                    [](world& w) { w.model["workflow_slots"] = {hangs()}; }, true},
        cancel_case{"retrieval_search", [](world& w) { w.searches = {hangs()}; }, false},
        cancel_case{"retrieval_evaluate",
                    [](world& w) { w.model["workflow_evaluate"] = {hangs()}; }, true},
        cancel_case{"verify", [](world& w) { w.model["workflow_verify"] = {hangs()}; }, true},
        cancel_case{"backoff",
                    [](world& w) { w.model["workflow_intent"] = {fails(errc::llm_failed)}; },
                    false}),
    [](const testing::TestParamInfo<cancel_case>& info) { return std::string{info.param.name}; });

TEST_F(planner_driver, the_tool_agent_searches_then_answers_from_the_evidence) {
  w->model["tool_agent"] = {calls_tool("vector_retrieve", R"({"query":"K7 battery life"})"),
                            says("READY")};
  start("tool_agent");
  run_and_collect();
  ASSERT_TRUE(outcome) << (failure ? sys.render(*failure) : "no answer");
  EXPECT_EQ(outcome->action, "generate");
  EXPECT_FALSE(outcome->general);
  EXPECT_EQ(outcome->evidence.retrieval_results.size(), 1u);
  EXPECT_EQ(w->searches_made, 1);
  EXPECT_EQ(nodes(), (std::vector<std::string>{"agent", "tool", "agent"}));
}

TEST_F(planner_driver, the_tool_agent_is_cancelled_during_a_tool_call) {
  w->model["tool_agent"] = {calls_tool("vector_retrieve", R"({"query":"K7"})")};
  w->searches = {hangs()};
  start("tool_agent");
  run();
  ASSERT_FALSE(answered());
  EXPECT_EQ(w->searches_made, 1);
  caf::anon_send(planner, atom::cancel_v);
  run_and_collect();
  ASSERT_TRUE(failure);
  EXPECT_EQ(code_of(*failure), errc::cancelled);
}

TEST_F(planner_driver, the_gate_refuses_a_planner_past_its_count) {
  planner_gate one{1};
  auto first = spawn_planner(sys, "workflow", deps, one);
  ASSERT_TRUE(first);
  auto second = spawn_planner(sys, "workflow", deps, one);
  ASSERT_FALSE(second);
  EXPECT_EQ(code_of(second.error()), errc::overloaded);
  caf::anon_send_exit(*first, caf::exit_reason::user_shutdown);
  run();
  EXPECT_EQ(one.running(), 0) << "a planner that quits gives its place back";
  EXPECT_TRUE(spawn_planner(sys, "workflow", deps, one));
  run();
}

}  // namespace
