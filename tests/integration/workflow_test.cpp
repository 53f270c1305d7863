// The guided workflow (seed 003) on a KB with answer_mode "workflow": the
// fake model is scripted per node by its system prompt (intent, slots,
// evaluate, verify), so each test decides what the model says and checks
// what the turn did — the answer, done's need_human_help, and the debug
// execution log of the workflow's nodes.
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "tests/support/fake_openai.hpp"
#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* intent_sys = "classify the user's latest message";
constexpr const char* slots_sys = "extract information";
constexpr const char* evaluate_sys = "judge whether search results";
constexpr const char* verify_sys = "check the quality of evidence";

std::string rule(const std::string& system, const std::string& match, const std::string& reply) {
  auto esc = [](const std::string& s) {
    std::string out;
    for (char c : s)
      out += c == '"' || c == '\\' ? std::string{"\\"} + c : std::string{c};
    return out;
  };
  std::string r = R"({"system":")" + esc(system) + "\"";
  if (!match.empty())
    r += R"(,"match":")" + esc(match) + "\"";
  return r + R"(,"reply":")" + esc(reply) + "\"}";
}

// Intent: "battery" questions are the battery intent, "hello" is chit-chat.
// Slots: a message naming a K-model states the model. Evaluation: results
// that mention "fourteen months" suffice. Verify: yes. Generation: the
// default reply.
std::string base_rules(const std::string& verify_reply = R"({"answers": true, "reason": "ok"})") {
  return rule(intent_sys, "Latest message: .*hello", R"({"intent": "chitchat", "confidence": 0.9})")
         + "," + rule(intent_sys, "", R"({"intent": "battery", "confidence": 0.9})") + ","
         + rule(slots_sys, "K7", R"({"slots": {"model": "Lumenlatch K7"}})") + ","
         + rule(slots_sys, "", R"({"slots": {"model": null}})") + ","
         + rule(evaluate_sys, "fourteen months",
                R"({"is_sufficient": true, "suggestion": "pass"})")
         + ","
         + rule(evaluate_sys, "",
                R"({"is_sufficient": false, "suggestion": "switch_source", "rewritten_query": ""})")
         + "," + rule(verify_sys, "", verify_reply);
}

std::string script(const std::string& rules) {
  return R"({"default":{"reply":"The batteries last about fourteen months [1]."},"rules":[)" + rules
         + "]}";
}

class workflow_test : public ragtor_server_test {
protected:
  fake_openai fake_{script(base_rules())};
  env_vars server_env() const override {
    auto env = model_env(fake_);
    env["RAGTOR_LLM__MAX_RETRIES"] = "0";
    return env;
  }

  json call(std::string_view method, const std::string& path, const std::string& body,
            int expected) {
    auto res = request(port(), method, path, body);
    EXPECT_EQ(res.status, expected) << method << " " << path << ": " << res.body;
    return json::parse(res.body.empty() ? "{}" : res.body);
  }

  // KB "lock" (answer_mode workflow) searching `sources` first for the
  // battery intent; KB "notes" has nothing about batteries.
  // The fake's script for an order A-77 question on make_orders_kb's KB:
  // the tool knows the order, the model answers `reply` by default, and
  // the intent and slot rules come first, then `more_rules`.
  void script_orders(const std::string& reply, const std::string& more_rules = "") {
    auto rules = rule(intent_sys, "", R"({"intent": "order_status"})") + ","
                 + rule(slots_sys, "A-77", R"({"slots": {"order_id": "A-77"}})")
                 + (more_rules.empty() ? "" : "," + more_rules);
    fake_.set_script(
        R"({"tool_reply":{"results":[{"id":"A-77","title":"Order A-77","text":"Order A-77 left the depot on Monday."}]},)"
        R"("default":{"reply":)" + json_quote(reply) + R"(},"rules":[)" + rules + "]}");
  }

  // KB "shop": an order_status intent (slot order_id) answered by the
  // HTTP JSON tool "orders" at `tool_path` on the fake.
  void make_orders_kb(const std::string& tool_path) {
    auto url = "http://127.0.0.1:" + std::to_string(fake_.port()) + tool_path;
    call("POST", "/api/v1/kbs",
         R"({"name":"shop","answer_mode":"workflow","workflow":{"model_retries":0,)"
         R"("tools":[{"name":"orders","url":")" + url + R"("}],)"
         R"("intents":[{"l2":"order_status","description":"where is my order",)"
         R"("slots":[{"name":"order_id","description":"order number"}],)"
         R"("sources":["tool:orders"]}]}})",
         201);
  }

  void make_kbs(const std::string& sources) {
    call("POST", "/api/v1/kbs", R"({"name":"notes"})", 201);
    call("POST", "/api/v1/kbs/notes/documents",
         R"({"documents":[{"id":"n1","text":"The office kettle is descaled every Friday."}]})",
         200);
    call("POST", "/api/v1/kbs",
         R"({"name":"lock","answer_mode":"workflow","workflow":{"business":"Lumenlatch door locks",)"
         R"("model_retries":0,"intents":[)"
         R"({"l1":"support","l2":"battery","description":"battery life and replacement",)"
         R"("slots":[{"name":"model","description":"lock model","question":"Which lock model do you have?"}],)"
         R"("sources":)" + sources + "}]}}",
         201);
    call("POST", "/api/v1/kbs/lock/documents",
         R"({"documents":[{"id":"b1","text":"The Lumenlatch K7 runs on four AA batteries that last about fourteen months."},)"
         R"({"id":"b2","text":"The Lumenlatch K5 uses a rechargeable pack charged over USB."}]})",
         200);
  }

  stream_result turn(const std::string& session, const std::string& message) {
    auto r = chat_stream(port(),
                         chat_body("wanda", session, message, "lock", {{"debug", "true", true}}));
    EXPECT_TRUE(well_formed_stream(r));
    return r;
  }

  static bool needs_human(const stream_result& r) {
    return r.done && r.done->has("/content/need_human_help")
           && r.done->boolean("/content/need_human_help");
  }
};

TEST_F(workflow_test, asks_for_a_missing_slot_and_merges_it_a_turn_later) {
  make_kbs(R"(["kb"])");
  auto first = turn("s1", "How long do the batteries last?");
  EXPECT_NE(first.answer().find("Which lock model do you have?"), std::string::npos)
      << first.answer();
  EXPECT_FALSE(needs_human(first));
  ASSERT_EQ(first.execution_logs("ask").size(), 1u);
  EXPECT_EQ(first.execution_logs("ask")[0].integer("/output/round"), 1);
  EXPECT_EQ(first.execution_logs("intent")[0].str("/output/intent"), "battery");
  EXPECT_TRUE(first.execution_logs("retrieval").empty()) << "no search before the slots are known";

  auto second = turn("s1", "It is the K7.");
  EXPECT_EQ(second.answer(), "The batteries last about fourteen months [1].");
  EXPECT_FALSE(needs_human(second));
  EXPECT_EQ(second.execution_logs("intent")[0].str("/output/outcome"), "pending intent kept");
  auto slots = second.execution_logs("slots");
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].str("/output/slots/model"), "Lumenlatch K7");
  auto retrieval = second.execution_logs("retrieval");
  ASSERT_EQ(retrieval.size(), 1u);
  // The search is for the question that raised the intent, with the slot.
  EXPECT_NE(retrieval[0].str("/output/query").find("How long do the batteries last?"),
            std::string::npos);
  EXPECT_NE(retrieval[0].str("/output/query").find("Lumenlatch K7"), std::string::npos);
  EXPECT_TRUE(retrieval[0].boolean("/output/is_sufficient"));
  ASSERT_EQ(second.execution_logs("verify").size(), 1u);
  for (auto* node : {"intent", "slots", "retrieval", "verify"})
    EXPECT_TRUE(second.execution_logs(node)[0].has("/duration_ms")) << node;
  // The generator was asked the full question with the evidence.
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_NE(sent.dump().find("model: Lumenlatch K7"), std::string::npos);
  EXPECT_NE(sent.dump().find("fourteen months"), std::string::npos);

  // The flow is over: the next battery question starts afresh and asks again.
  auto third = turn("s1", "And how long do the batteries last in winter?");
  EXPECT_EQ(third.execution_logs("intent")[0].str("/output/outcome"), "detected");
  ASSERT_EQ(third.execution_logs("ask").size(), 1u);
  EXPECT_EQ(third.execution_logs("ask")[0].integer("/output/round"), 1);
}

TEST_F(workflow_test, escalates_after_three_unanswered_questions) {
  make_kbs(R"(["kb"])");
  for (int round = 1; round <= 3; ++round) {
    auto r = turn("s1", round == 1 ? "How long do the batteries last?" : "I don't know.");
    ASSERT_EQ(r.execution_logs("ask").size(), 1u) << "round " << round << ": " << r.answer();
    EXPECT_EQ(r.execution_logs("ask")[0].integer("/output/round"), round);
    EXPECT_FALSE(needs_human(r));
  }
  auto last = turn("s1", "No idea, sorry.");
  EXPECT_TRUE(needs_human(last)) << (last.done ? last.done->dump() : "no done");
  EXPECT_NE(last.done->str("/content/reason").find("model"), std::string::npos);
  EXPECT_NE(last.answer().find("human"), std::string::npos);
  EXPECT_EQ(last.execution_logs("escalate").size(), 1u);
  // Escalation ends the flow: the next question is a new one.
  auto next = turn("s1", "How long do the batteries last?");
  EXPECT_EQ(next.execution_logs("ask")[0].integer("/output/round"), 1);
}

TEST_F(workflow_test, switches_source_after_a_bad_evaluation) {
  make_kbs(R"(["kb:notes","kb:ghost","kb"])");
  auto r = turn("s1", "How long do the batteries of the K7 last?");
  EXPECT_EQ(r.answer(), "The batteries last about fourteen months [1].");
  auto rounds = r.execution_logs("retrieval");
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[0].str("/output/source"), "kb:notes");
  EXPECT_FALSE(rounds[0].boolean("/output/is_sufficient"));
  EXPECT_EQ(rounds[0].str("/output/next"), "switch source to kb:ghost");
  // A source that fails (no such KB) yields no results, not a failed turn.
  EXPECT_EQ(rounds[1].str("/output/source"), "kb:ghost");
  EXPECT_EQ(rounds[1].integer("/output/results"), 0);
  EXPECT_EQ(rounds[2].str("/output/source"), "kb");
  EXPECT_TRUE(rounds[2].boolean("/output/is_sufficient"));
  EXPECT_FALSE(needs_human(r));
}

TEST_F(workflow_test, escalates_when_verification_fails) {
  make_kbs(R"(["kb"])");
  fake_.set_script(
      script(base_rules(R"({"answers": false, "reason": "the documents do not cover winter"})")));
  auto r = turn("s1", "How long do the batteries of the K7 last?");
  EXPECT_TRUE(needs_human(r));
  EXPECT_NE(r.done->str("/content/reason").find("winter"), std::string::npos);
  EXPECT_EQ(r.execution_logs("verify").size(), 1u);
  EXPECT_EQ(r.execution_logs("verify")[0].str("/output/answers"), "false");
}

TEST_F(workflow_test, chitchat_gets_a_general_reply_that_steers_back) {
  make_kbs(R"(["kb"])");
  auto r = turn("s1", "hello there!");
  EXPECT_EQ(r.execution_logs("intent")[0].str("/output/intent"), "chitchat");
  EXPECT_TRUE(r.execution_logs("slots").empty());
  EXPECT_FALSE(needs_human(r));
  auto sent = json::parse(fake_.stats().str("/last_chat_request"));
  auto system = sent.items("/messages")[0].str("/content");
  EXPECT_NE(system.find("steer the conversation back"), std::string::npos) << system;
  EXPECT_NE(system.find("battery life and replacement"), std::string::npos) << system;
  EXPECT_TRUE(r.done->items("/content/citations").empty());
}

TEST_F(workflow_test, malformed_model_json_never_breaks_a_turn) {
  make_kbs(R"(["kb"])");
  // Unreadable intent (the KB has one intent, so it is taken) and slots
  // (nothing merged, so the user is asked).
  fake_.set_script(script(rule(intent_sys, "", R"({"intent": "batt)") + ","
                          + rule(slots_sys, "", "{{{")));
  auto r = turn("s1", "How long do the batteries of the K7 last?");
  EXPECT_EQ(r.execution_logs("intent")[0].str("/output/outcome"), "unusable reply; the only intent");
  EXPECT_TRUE(r.execution_logs("slots")[0].items("/output/set").empty());
  EXPECT_NE(r.answer().find("Which lock model do you have?"), std::string::npos) << r.answer();

  // Unreadable evaluations: every round is insufficient, then escalation.
  fake_.set_script(script(rule(slots_sys, "K7", R"({"slots": {"model": "K7"}})") + ","
                          + rule(evaluate_sys, "", "[1,2")));
  r = turn("s1", "The K7.");
  EXPECT_EQ(r.execution_logs("retrieval").size(), 3u);
  EXPECT_TRUE(needs_human(r));
  EXPECT_NE(r.done->str("/content/reason").find("not contain enough"), std::string::npos);

  // An unreadable verdict: not verified, escalation.
  fake_.set_script(script(base_rules("yes!")));
  r = turn("s2", "How long do the batteries of the K7 last?");
  EXPECT_TRUE(needs_human(r));
  EXPECT_NE(r.done->str("/content/reason").find("could not be verified"), std::string::npos);
}

// A KB on disk whose tool URL names a host that [security]
// allowed_outbound_hosts no longer allows keeps the server from starting,
// with the KB and the field named (not silently calling the host).
TEST_F(workflow_test, a_kb_on_disk_with_a_disallowed_tool_host_stops_the_start) {
  auto url = "http://127.0.0.1:" + std::to_string(fake_.port()) + "/_fake/tool";
  call("POST", "/api/v1/kbs",
       R"({"name":"shop","answer_mode":"workflow","workflow":{)"
       R"("tools":[{"name":"orders","url":")" + url + R"("}],)"
       R"("intents":[{"l2":"order_status","description":"where is my order",)"
       R"("sources":["tool:orders"]}]}})",
       201);
  ASSERT_TRUE(stop_server().clean());
  auto refused = run_ragtor({"serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir().string()},
                            {{"RAGTOR_SECURITY__ALLOWED_OUTBOUND_HOSTS", "localhost"}}, 30s);
  EXPECT_TRUE(refused.status.exited && refused.status.code != 0) << refused.output;
  EXPECT_NE(refused.output.find("knowledge base \"shop\""), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("workflow.tools[0].url"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("allowed_outbound_hosts"), std::string::npos) << refused.output;
}

TEST_F(workflow_test, http_json_tools_are_a_source) {
  // An "orders" intent answered by an HTTP JSON tool (the fake's /_fake/tool).
  make_orders_kb("/_fake/tool");
  call("POST", "/api/v1/kbs/shop/documents",
       R"({"documents":[{"id":"p1","text":"Parcels are shipped within two days."}]})", 200);
  script_orders("It left the depot on Monday.",
                rule(evaluate_sys, "left the depot",
                     R"({"is_sufficient": true, "suggestion": "pass"})")
                    + "," + rule(verify_sys, "", R"({"answers": true, "reason": "ok"})"));
  auto r = chat_stream(port(), chat_body("wanda", "s1", "Where is my order A-77?", "shop",
                                         {{"debug", "true", true}}));
  ASSERT_TRUE(well_formed_stream(r));
  EXPECT_EQ(r.answer(), "It left the depot on Monday.");
  EXPECT_FALSE(needs_human(r));
  auto rounds = r.execution_logs("retrieval");
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].str("/output/source"), "tool:orders");
  EXPECT_EQ(rounds[0].integer("/output/results"), 1);
  EXPECT_EQ(fake_.stat("tool_requests"), 1);
  auto sent = json::parse(fake_.stats().str("/last_tool_request"));
  EXPECT_EQ(sent.str("/intent"), "order_status");
  EXPECT_EQ(sent.str("/slots/order_id"), "A-77");
  EXPECT_NE(sent.str("/query").find("Where is my order A-77?"), std::string::npos);
  auto gen = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_NE(gen.dump().find("left the depot on Monday"), std::string::npos);
}

TEST_F(workflow_test, a_redirect_from_a_tool_is_not_followed) {
  // The tool's host is allowed, but it answers 307 to another path: the
  // tool call fails (no results) and the redirect target is never asked.
  make_orders_kb("/_fake/tool_redirect");
  script_orders("I could not find that order.");
  auto r = chat_stream(port(), chat_body("wanda", "s1", "Where is my order A-77?", "shop",
                                         {{"debug", "true", true}}));
  ASSERT_TRUE(well_formed_stream(r));
  auto rounds = r.execution_logs("retrieval");
  ASSERT_FALSE(rounds.empty());
  EXPECT_EQ(rounds[0].str("/output/source"), "tool:orders");
  EXPECT_EQ(rounds[0].integer("/output/results"), 0);
  EXPECT_GE(fake_.stat("tool_redirects"), 1);
  EXPECT_EQ(fake_.stat("tool_requests"), 0) << "the redirect was followed";
  auto gen = json::parse(fake_.stats().str("/last_chat_request"));
  EXPECT_EQ(gen.dump().find("left the depot"), std::string::npos);
}

TEST_F(workflow_test, model_calls_are_retried_with_backoff) {
  // The intent call fails once (HTTP 500); model_retries 1 retries it.
  call("POST", "/api/v1/kbs",
       R"({"name":"lock","answer_mode":"workflow","workflow":{"model_retries":1,)"
       R"("intents":[{"l2":"battery","description":"battery life"},{"l2":"pairing","description":"pairing"}]}})",
       201);
  call("POST", "/api/v1/kbs/lock/documents",
       R"({"documents":[{"id":"b1","text":"The Lumenlatch K7 runs on four AA batteries that last about fourteen months."}]})",
       200);
  fake_.set_script(script(
      R"({"system":"classify the user's latest message","fault":"http_500","fault_times":1,)"
      R"("reply":"{\"intent\": \"battery\"}"},)"
      + base_rules()));
  auto r = turn("s1", "How long do the batteries of the K7 last?");
  auto intent = r.execution_logs("intent");
  ASSERT_EQ(intent.size(), 1u);
  EXPECT_EQ(intent[0].str("/output/intent"), "battery");
  EXPECT_EQ(intent[0].str("/output/attempts"), "2");
  EXPECT_EQ(r.answer(), "The batteries last about fourteen months [1].");
}

TEST_F(workflow_test, bad_workflows_are_refused_with_the_field_named) {
  auto res = request(port(), "POST", "/api/v1/kbs",
                     R"({"name":"w","answer_mode":"workflow","workflow":{"intents":[]}})");
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_NE(res.body.find("intents"), std::string::npos) << res.body;
  res = request(port(), "POST", "/api/v1/kbs",
                R"({"name":"w","answer_mode":"workflow","workflow":{"intents":[{"l2":"a","sources":["tool:nope"]}]}})");
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_NE(res.body.find("tool:nope"), std::string::npos) << res.body;
  res = request(port(), "POST", "/api/v1/kbs", R"({"name":"w","answer_mode":"magic"})");
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_NE(res.body.find("answer_mode"), std::string::npos) << res.body;
  res = request(port(), "GET", "/api/v1/kbs/w", "");
  EXPECT_EQ(res.status, 404) << "nothing was created";
}

// Planners are actors, not threads: 200 workflow turns against a model
// that never answers its intent call. The gateway admits
// max_concurrency + max_queue of them (the rest end at once with
// `overloaded` and never reach the model), the process's thread count
// stays flat, and POST /api/v1/chat/stop ends every admitted turn with
// error + done: the model's connections are closed and the (empty)
// partial answers are stored.
class workflow_stall_test : public workflow_test {
protected:
  static constexpr int concurrency = 8, queue = 32, turns = 200;
  env_vars server_env() const override {
    auto env = workflow_test::server_env();
    env["RAGTOR_LLM__MAX_CONCURRENCY"] = std::to_string(concurrency);
    env["RAGTOR_LLM__MAX_QUEUE"] = std::to_string(queue);
    return env;
  }

  static std::string stalled_intent() {
    return script(R"({"system":")" + std::string{intent_sys}
                  + R"(","first_token_delay_ms":600000,"reply":"{\"intent\": \"battery\"}"},)"
                  + base_rules());
  }

  // Threads of the server process (/proc/<pid>/status).
  int threads() {
    std::ifstream in{"/proc/" + std::to_string(server().pid()) + "/status"};
    std::string line;
    while (std::getline(in, line))
      if (line.starts_with("Threads:"))
        return std::stoi(line.substr(8));
    return -1;
  }

  // Runs `n` stalled turns in the background; `ended` counts those whose
  // stream has ended.
  struct storm {
    std::mutex mx;
    std::condition_variable cv;
    int ended = 0;
    std::vector<std::future<stream_result>> results;

    bool wait_ended(int n) {
      std::unique_lock lock{mx};
      return cv.wait_for(lock, std::chrono::seconds(60), [&] { return ended >= n; });
    }
  };

  void start_storm(storm& s, int n) {
    for (int i = 0; i < n; ++i)
      s.results.push_back(std::async(std::launch::async, [this, &s, i] {
        auto r = chat_stream(
            port(),
            chat_body("u" + std::to_string(i), "s", "How long do the K7 batteries last?", "lock",
                      {{"request_id", "stall-" + std::to_string(i)}}),
            std::chrono::seconds(120));
        std::lock_guard lock{s.mx};
        ++s.ended;
        s.cv.notify_all();
        return r;
      }));
  }

  static std::string code_of(const stream_result& r) {
    return r.errors.empty() ? "" : r.errors[0].str("/code");
  }
};

TEST_F(workflow_stall_test, stalled_planners_hold_no_threads_and_stop_at_once) {
  make_kbs(R"(["kb"])");
  // A whole turn first, so every lazily started thread exists.
  auto warm = turn("warm", "How long do the batteries of the K7 last?");
  ASSERT_TRUE(warm.errors.empty()) << warm.statuses();
  auto before = threads();
  fake_.set_script(stalled_intent());
  fake_.reset_stats();

  storm s;
  start_storm(s, turns);
  const int admitted = concurrency + queue;
  ASSERT_TRUE(fake_.wait_for_stat("chat_requests", concurrency, std::chrono::seconds(60)));
  ASSERT_TRUE(s.wait_ended(turns - admitted)) << "the turns past every limit end at once";
  auto during = threads();
  EXPECT_LE(during, before + 2) << "planners hold no threads (a thread per planner would add "
                                << admitted << ")";
  EXPECT_EQ(fake_.stat("chat_requests"), concurrency) << "refused turns never call the model";

  for (int i = 0; i < turns; ++i) {
    auto res = request(port(), "POST", "/api/v1/chat/stop",
                       R"({"request_id":"stall-)" + std::to_string(i) + R"(","user_id":"u)"
                           + std::to_string(i) + R"("})");
    EXPECT_EQ(res.status, 200) << res.body;
  }
  int overloaded = 0, cancelled = 0;
  for (int i = 0; i < turns; ++i) {
    auto r = s.results[i].get();
    EXPECT_TRUE(well_formed_stream(r)) << i;
    ASSERT_EQ(r.errors.size(), 1u) << i << ": " << r.statuses();
    auto code = code_of(r);
    if (code == "overloaded") {
      ++overloaded;
    } else {
      EXPECT_EQ(code, "cancelled") << i;
      ++cancelled;
      EXPECT_TRUE(r.done->boolean("/content/partial")) << i;
      auto rows = db().messages("u" + std::to_string(i), "s");
      ASSERT_EQ(rows.size(), 2u) << i;
      EXPECT_EQ(rows[1].role, "assistant");
      EXPECT_EQ(rows[1].completed, 0) << "stored as partial";
    }
  }
  EXPECT_EQ(overloaded, turns - admitted);
  EXPECT_EQ(cancelled, admitted);
  // Every call the model received was closed by ragtor (the queued ones
  // that started once a slot freed included).
  auto calls = fake_.stat("chat_requests");
  EXPECT_TRUE(fake_.wait_for_stat("calls_abandoned", calls)) << fake_.stats().dump();
  EXPECT_LE(threads(), before + 2);
}

TEST_F(workflow_stall_test, sigterm_with_stalled_planners_exits_cleanly) {
  make_kbs(R"(["kb"])");
  fake_.set_script(stalled_intent());
  storm s;
  start_storm(s, 4);
  ASSERT_TRUE(fake_.wait_for_stat("chat_requests", 4, std::chrono::seconds(60)));
  auto status = stop_server();
  EXPECT_TRUE(status.clean()) << status.describe();
  for (auto& f : s.results) {
    auto r = f.get();
    EXPECT_TRUE(well_formed_stream(r));
    ASSERT_EQ(r.errors.size(), 1u) << r.statuses();
    EXPECT_TRUE(r.done->boolean("/content/partial"));
  }
  EXPECT_TRUE(fake_.wait_for_stat("calls_abandoned", 4)) << fake_.stats().dump();
}

}  // namespace
}  // namespace ragtor::test
