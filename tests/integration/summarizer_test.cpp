// The summarizer actor with real parts: the SQLite store actor, the
// OpenAI-compatible gateway talking to the fake model server over HTTP,
// and real CAF actors on a threaded actor system. Each summarize request
// answers with its outcome, so the tests need no waiting: thresholds and
// window boundaries, merges, the periodic full regeneration, failures that
// keep the old summary, single-flight on one node and optimistic versioning
// across two (two summarizers sharing one database).
#include <functional>
#include <future>
#include <utility>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/llm/openai_llm.hpp"
#include "actors/memory/summarizer.hpp"
#include "actors/store/store_actor.hpp"
#include "memory/summary.hpp"
#include "llm/openai_client.hpp"
#include "protocol/errc.hpp"
#include "protocol/type_ids.hpp"
#include "tests/support/fake_openai.hpp"

namespace ragtor::test {
namespace {

using namespace std::chrono_literals;

std::string script(int delay_ms = 0, std::string fault = "") {
  auto extra = std::string{",\"first_token_delay_ms\":"} + std::to_string(delay_ms);
  if (!fault.empty())
    extra += ",\"fault\":\"" + fault + "\"";
  return R"({"rules":[)"
         R"({"match":"^Conversation to summarise","reply":"FULL-SUMMARY")"
         + extra + R"(},{"match":"^Previous summary","reply":"MERGED-SUMMARY")" + extra + "}]}";
}

caf::actor_system_config& configured(caf::actor_system_config& cfg) {
  register_types(cfg);
  return cfg;
}

class summarizer_test : public testing::Test {
protected:
  summarizer_test() : sys(configured(cfg)), self(sys) {
    store_options so;
    so.sqlite_path = dir.path() / "t.db";
    store = *spawn_store(sys, so);
    llm::endpoint_config ec;
    ec.base_url = fake.base_url();
    ec.model = "fake-model";
    ec.max_retries = 0;
    llm = spawn_openai_llm(sys, std::make_shared<llm::openai_client>(ec), {});
  }

  ~summarizer_test() override {
    for (auto& s : summarizers)
      caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(llm, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  }

  summarizer_actor summarizer(bool use_model = true, size_t max_input_tokens = 6000) {
    summarizer_settings s;
    s.use_model = use_model;
    s.max_input_tokens = max_input_tokens;
    s.timeout = 20s;
    summarizers.push_back(spawn_summarizer(sys, store, llm, s));
    return summarizers.back();
  }

  // Appends one message (user, then assistant, alternating by seq).
  void add_message() {
    ++count;
    if (count % 2) {
      self->request(store, 10s, atom::begin_turn_v, std::string{"ann"}, std::string{"s1"},
                    "question " + std::to_string(count), "r" + std::to_string(count))
          .receive([&](turn_opened& t) { conv = t.conversation_id; },
                   [&](caf::error& e) { FAIL() << sys.render(e); });
    } else {
      stored_message m;
      m.conversation_id = conv;
      m.role = "assistant";
      m.content = "answer " + std::to_string(count);
      self->request(store, 10s, atom::finish_turn_v, m)
          .receive([](std::string&) {}, [&](caf::error& e) { FAIL() << sys.render(e); });
    }
  }

  void grow_to(int n) {
    while (count < n)
      add_message();
  }

  std::string summarize(const summarizer_actor& s) {
    std::string out;
    self->request(s, 30s, atom::summarize_v, conv)
        .receive([&](std::string& r) { out = r; },
                 [&](caf::error& e) { out = "error: " + sys.render(e); });
    return out;
  }

  summary_record stored() {
    summary_record r;
    self->request(store, 10s, atom::summary_v, conv, std::string{})
        .receive([&](summary_record& x) { r = x; },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return r;
  }

  // The answers to `n` summarize requests sent with send(), sorted.
  std::vector<std::string> outcomes(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i)
      self->receive([&](std::string& r) { out.push_back(r); },
                    [&](caf::error& e) { out.push_back(sys.render(e)); });
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string status(const summarizer_actor& s) {
    std::string out;
    self->request(s, 10s, atom::status_v)
        .receive([&](std::string& x) { out = x; }, [](caf::error&) {});
    return out;
  }

  // The summarizer's paging: "page_enough page_rereads full_page".
  std::string paging(const summarizer_actor& s) {
    auto st = json::parse(status(s));
    return std::to_string(st.integer("/page_enough")) + " " + std::to_string(st.integer("/page_rereads"))
           + " " + std::to_string(st.integer("/full_page"));
  }

  // The user message of the model's last request.
  std::string last_prompt() {
    auto sent = json::parse(fake.stats().str("/last_chat_request"));
    auto msgs = sent.items("/messages");
    return msgs.empty() ? "" : msgs.back().str("/content");
  }

  temp_dir dir{"summarizer"};
  fake_openai fake{script()};
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  store_actor store;
  llm_actor llm;
  std::vector<summarizer_actor> summarizers;
  std::string conv;
  int count = 0;
};

TEST_F(summarizer_test, summarises_at_ten_messages_what_is_older_than_the_window) {
  auto s = summarizer();
  grow_to(8);
  EXPECT_EQ(summarize(s), "none");
  grow_to(9);
  EXPECT_EQ(summarize(s), "none") << "9 messages: not yet";
  EXPECT_EQ(fake.stat("chat_requests"), 0);
  grow_to(10);
  EXPECT_EQ(summarize(s), "written");
  auto rec = stored();
  EXPECT_EQ(rec.summary, "FULL-SUMMARY");
  EXPECT_EQ(rec.version, 1);
  EXPECT_EQ(rec.covered_seq, 4) << "10 messages minus the window of 6";
  auto prompt = last_prompt();
  EXPECT_TRUE(prompt.starts_with("Conversation to summarise:"));
  EXPECT_NE(prompt.find("User: question 1\n"), std::string::npos);
  EXPECT_NE(prompt.find("Assistant: answer 4\n"), std::string::npos);
  EXPECT_EQ(prompt.find("question 5"), std::string::npos) << "the window is never summarised";
  EXPECT_EQ(summarize(s), "none") << "up to date";
}

TEST_F(summarizer_test, refreshes_after_five_more_messages_left_the_window_by_merging) {
  auto s = summarizer();
  grow_to(10);
  ASSERT_EQ(summarize(s), "written");
  grow_to(14);
  EXPECT_EQ(summarize(s), "none") << "only 4 more left the window";
  grow_to(15);
  EXPECT_EQ(summarize(s), "written");
  auto rec = stored();
  EXPECT_EQ(rec.summary, "MERGED-SUMMARY");
  EXPECT_EQ(rec.covered_seq, 9);
  EXPECT_EQ(rec.incremental_updates, 1);
  auto prompt = last_prompt();
  EXPECT_TRUE(prompt.starts_with("Previous summary:\nFULL-SUMMARY\n\nNew messages:\n"));
  EXPECT_NE(prompt.find("User: question 5\n"), std::string::npos);
  EXPECT_NE(prompt.find("User: question 9\n"), std::string::npos);
  EXPECT_EQ(prompt.find("question 3\n"), std::string::npos) << "already summarised";
  EXPECT_EQ(prompt.find("question 11"), std::string::npos) << "still in the window";
}

TEST_F(summarizer_test, the_tenth_refresh_regenerates_from_the_whole_history) {
  auto s = summarizer();
  grow_to(10);
  ASSERT_EQ(summarize(s), "written");
  for (int refresh = 1; refresh <= 10; ++refresh) {
    grow_to(count + 5);
    ASSERT_EQ(summarize(s), "written") << "refresh " << refresh;
    auto rec = stored();
    if (refresh < 10) {
      EXPECT_EQ(rec.incremental_updates, refresh);
      EXPECT_EQ(rec.summary, "MERGED-SUMMARY");
    } else {
      EXPECT_EQ(rec.incremental_updates, 0);
      EXPECT_EQ(rec.summary, "FULL-SUMMARY");
      auto prompt = last_prompt();
      EXPECT_TRUE(prompt.starts_with("Conversation to summarise:"));
      EXPECT_NE(prompt.find("User: question 1\n"), std::string::npos) << "from the start";
    }
  }
  EXPECT_EQ(stored().version, 11);
}

// The prompt a full summary of this conversation shows when every message
// older than the window is read (what add_message stored).
std::string full_prompt(int messages, size_t max_input_tokens) {
  std::vector<stored_message> older;
  for (int seq = 1; seq <= messages - summary_policy{}.window; ++seq) {
    stored_message m;
    m.seq = seq;
    m.role = seq % 2 ? "user" : "assistant";
    m.content = (seq % 2 ? "question " : "answer ") + std::to_string(seq);
    older.push_back(m);
  }
  return summary_request(summary_action::full, "", older, max_input_tokens, 400)
      .messages.back()
      .content;
}

TEST_F(summarizer_test, a_full_summary_reads_a_page_when_the_page_fills_the_transcript) {
  // 200 tokens hold about 35 of these lines. The read limit assumes lines
  // of two tokens (108 messages); the first page (the window and 64 older
  // messages) is enough, and nothing is read again.
  auto s = summarizer(true, 200);
  grow_to(200);
  ASSERT_EQ(summarize(s), "written");
  EXPECT_EQ(last_prompt(), full_prompt(200, 200));
  EXPECT_NE(last_prompt().find("question 193"), std::string::npos) << last_prompt();
  EXPECT_EQ(last_prompt().find("question 1\n"), std::string::npos) << "older ones left out";
  EXPECT_EQ(paging(s), "1 0 64") << "one page was enough";
}

TEST_F(summarizer_test, a_page_that_does_not_fill_the_transcript_is_read_again_whole) {
  // 6,000 tokens hold all 194 short messages older than the window: the
  // page of 64 does not fill the transcript, so the summarizer reads the
  // limit, shows the whole history, and reads a larger page next time.
  auto s = summarizer(true, 6000);
  grow_to(200);
  ASSERT_EQ(summarize(s), "written");
  EXPECT_EQ(last_prompt(), full_prompt(200, 6000));
  EXPECT_NE(last_prompt().find("User: question 1\n"), std::string::npos) << "from the start";
  EXPECT_EQ(paging(s), "0 1 128") << "read again whole; the next page doubles";
}

TEST_F(summarizer_test, a_failing_model_keeps_the_old_summary_and_is_counted) {
  auto s = summarizer();
  grow_to(10);
  ASSERT_EQ(summarize(s), "written");
  fake.set_script(script(0, "http_500"));
  grow_to(15);
  EXPECT_EQ(summarize(s), "failed");
  auto rec = stored();
  EXPECT_EQ(rec.summary, "FULL-SUMMARY");
  EXPECT_EQ(rec.version, 1);
  EXPECT_NE(status(s).find("\"failed\":1"), std::string::npos) << status(s);
  fake.set_script(script());
  EXPECT_EQ(summarize(s), "written") << "the next turn tries again";
  EXPECT_EQ(stored().summary, "MERGED-SUMMARY");
}

TEST_F(summarizer_test, two_nodes_summarising_at_once_do_not_overwrite_each_other) {
  fake.set_script(script(300));
  auto a = summarizer();
  auto b = summarizer();
  grow_to(10);
  // Both start from version 0 while the slow model works on both; each
  // answers its trigger with the outcome.
  self->send(a, atom::summarize_v, conv);
  self->send(b, atom::summarize_v, conv);
  EXPECT_EQ(outcomes(2), (std::vector<std::string>{"conflict", "written"}));
  EXPECT_EQ(fake.stat("chat_requests"), 2) << "both really ran";
  EXPECT_EQ(stored().version, 1) << "exactly one write";
}

// The conversation's next turn stores its question after the summarizer
// loaded the summary state and before it read the messages (here made
// certain by a store in between that stores it first when the read
// comes). A merge's read of the newest messages, counted at the load,
// then starts one message too late: it is read again, deeper, and the
// message that left the window is in the summary's input.
TEST_F(summarizer_test, a_message_stored_between_the_load_and_the_read_does_not_shift_a_merge) {
  grow_to(10);
  ASSERT_EQ(summarize(summarizer()), "written");
  grow_to(16);
  auto real = caf::actor_cast<caf::actor>(store);
  auto once = std::make_shared<bool>(false);
  auto between = sys.spawn([=](caf::event_based_actor* proxy) -> caf::behavior {
    proxy->set_default_handler(
        [=](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
          s->delegate(real, x.move_content_to_message());
          return caf::delegated<caf::message>{};
        });
    return {
        [=](atom::history, std::string& conv, int32_t limit) {
          auto rp = proxy->make_response_promise();
          if (std::exchange(*once, true)) {
            rp.delegate(real, atom::history_v, std::move(conv), limit);
            return;
          }
          proxy
              ->request(real, 10s, atom::begin_turn_v, std::string{"ann"}, std::string{"s1"},
                        std::string{"question 17"}, std::string{"r17"})
              .then([=](turn_opened&) mutable { rp.delegate(real, atom::history_v, conv, limit); },
                    [=](caf::error& e) mutable { rp.deliver(e); });
        },
    };
  });
  summarizer_settings settings;
  settings.use_model = true;
  settings.timeout = 20s;
  auto s = spawn_summarizer(sys, caf::actor_cast<store_actor>(between), llm, settings);
  summarizers.push_back(s);
  ASSERT_EQ(summarize(s), "written");
  auto prompt = last_prompt();
  EXPECT_TRUE(prompt.starts_with("Previous summary:")) << prompt;
  EXPECT_NE(prompt.find("User: question 5\n"), std::string::npos)
      << "the oldest message that left the window since the summary: " << prompt;
  EXPECT_NE(prompt.find("Assistant: answer 10\n"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("User: question 11\n"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.find("question 13\n"), std::string::npos) << "in the window: " << prompt;
  EXPECT_EQ(stored().covered_seq, 11) << "17 messages now, less the window of 6";
  EXPECT_EQ(json::parse(status(s)).integer("/reads_deeper"), 1);
  caf::anon_send_exit(between, caf::exit_reason::user_shutdown);
}

TEST_F(summarizer_test, one_node_runs_one_summary_per_conversation_at_a_time) {
  fake.set_script(script(300));
  auto s = summarizer();
  grow_to(10);
  self->send(s, atom::summarize_v, conv);
  self->send(s, atom::summarize_v, conv);
  EXPECT_EQ(outcomes(2), (std::vector<std::string>{"none", "written"}))
      << "the second trigger waited for the first run, then found nothing due";
  EXPECT_EQ(fake.stat("chat_requests"), 1);
  EXPECT_EQ(stored().version, 1);
  EXPECT_NE(status(s).find("\"busy\":1"), std::string::npos) << status(s);
}

// The model gateway's order between answers and summaries. Each test runs
// a gateway of its own; the fake model answers "hold on" after 20 s,
// summaries after `summary_ms` and "quick" at once.
class gateway_order_test : public summarizer_test {
protected:
  using note_fn = std::function<void(std::string)>;

  ~gateway_order_test() override {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  llm_actor gateway(size_t slots, size_t queue, int summary_ms = 0) {
    fake.set_script(
        R"({"rules":[{"match":"hold on","reply":"late","first_token_delay_ms":20000},)"
        R"({"match":"^Conversation to summarise","reply":"SUMMARY","first_token_delay_ms":)"
        + std::to_string(summary_ms) + R"(},{"match":"quick","reply":"ANSWER"}]})");
    llm::endpoint_config ec;
    ec.base_url = fake.base_url();
    ec.model = "fake-model";
    ec.max_retries = 0;
    openai_llm_settings limits;
    limits.max_concurrency = slots;
    limits.max_queue = queue;
    auto g = spawn_openai_llm(sys, std::make_shared<llm::openai_client>(ec), limits);
    actors.push_back(caf::actor_cast<caf::actor>(g));
    sink = sys.spawn([](token_sink_actor::pointer) -> token_sink_actor::behavior_type {
      return {[](atom::token, const std::string&, const std::string&) {}};
    });
    actors.push_back(caf::actor_cast<caf::actor>(sink));
    return g;
  }

  // What the summarizer asks for twelve older messages.
  static completion_request summary() {
    std::vector<stored_message> old(12);
    for (size_t i = 0; i < old.size(); ++i) {
      old[i].role = i % 2 ? "assistant" : "user";
      old[i].content = "message " + std::to_string(i);
    }
    auto r = summary_request(summary_action::full, "", old, 4000, 200);
    EXPECT_EQ(r.messages.back().content.rfind("Conversation to summarise", 0), 0u);
    return r;
  }

  static generation_request question(std::string id, std::string text) {
    generation_request r;
    r.request_id = std::move(id);
    r.question = std::move(text);
    r.general = true;
    return r;
  }

  // Sends from one actor (the gateway sees the messages in the order
  // sent); the first `n` outcomes noted, in the order they came.
  std::vector<std::string> outcomes_in_order(
      size_t n, std::function<void(caf::event_based_actor*, note_fn)> send) {
    auto finished = std::make_shared<std::promise<std::vector<std::string>>>();
    actors.push_back(sys.spawn([=](caf::event_based_actor* w) {
      auto order = std::make_shared<std::vector<std::string>>();
      send(w, [=](std::string what) {
        order->push_back(std::move(what));
        if (order->size() == n)
          finished->set_value(*order);
      });
    }));
    auto got = finished->get_future();
    if (got.wait_for(60s) != std::future_status::ready) {
      ADD_FAILURE() << "the calls did not end in time";
      return {};
    }
    return got.get();
  }

  static std::string failure(const char* what, const caf::error& e) {
    return std::string{what}
           + (code_of(e) == errc::overloaded ? " refused" : " failed: " + to_string(e));
  }

  // Asks for the summary, noting "summary:TEXT" or its failure.
  static void ask_summary(caf::event_based_actor* w, const llm_actor& g, note_fn note) {
    w->request(g, 30s, atom::complete_v, summary())
        .then([=](completion_result& r) { note("summary:" + r.text); },
              [=](caf::error& e) { note(failure("summary", e)); });
  }

  // Asks the question, noting "answer:TEXT" or its failure.
  void ask(caf::event_based_actor* w, const llm_actor& g, generation_request q, note_fn note) {
    w->request(g, 30s, atom::generate_v, std::move(q), sink)
        .then([=](generation_result& r) { note("answer:" + r.answer); },
              [=](caf::error& e) { note(failure("answer", e)); });
  }

  // Holds a slot with an answer the model delays (until cancelled).
  void hold(caf::event_based_actor* w, const llm_actor& g) {
    w->request(g, 60s, atom::generate_v, question("held", "hold on"), sink)
        .then([](generation_result&) {}, [](caf::error&) {});
  }

  // Holds the only slot, asks a summary and then an answer (then, with
  // `more`, whatever it asks), then frees the slot.
  void behind_a_held_slot(caf::event_based_actor* w, const llm_actor& g, note_fn note,
                          const std::function<void()>& more = {}) {
    hold(w, g);
    ask_summary(w, g, note);
    ask(w, g, question("next", "a quick one"), note);
    if (more)
      more();
    w->send(g, atom::cancel_v, std::string{"held"});
  }

  token_sink_actor sink;
  std::vector<caf::actor> actors;
};

// A request that brings its prompt, or its whole body (a turn's stream
// builds it: the gateway is one actor), reaches the model as it is: the
// gateway builds nothing from the request's context, and the model answers
// the prompt's question, not the request's.
TEST_F(gateway_order_test, a_request_with_its_prompt_or_body_reaches_the_model_as_it_is) {
  auto g = gateway(2, 4);
  for (bool whole_body : {false, true}) {
    auto q = question(whole_body ? "body" : "prompt", "the request's own question");
    q.history = {stored_message{}};
    q.summary = "a summary the prompt left out";
    q.prompt = {llm::chat_message{"system", "PREBUILT-SYSTEM", "", {}},
                llm::chat_message{"user", "a quick one", "", {}}};
    q.prompt_tokens = 7;
    if (whole_body) {
      llm::chat_params params;
      params.messages = q.prompt;
      params.temperature = 0.5;
      q.body = llm::build_chat_body("fake-model", params, true);
      q.prompt = {};
    }
    auto got = outcomes_in_order(
        1, [&](caf::event_based_actor* w, note_fn note) { ask(w, g, q, note); });
    EXPECT_EQ(got, (std::vector<std::string>{"answer:ANSWER"})) << whole_body;
    auto sent = json::parse(fake.stats().str("/last_chat_request"));
    auto msgs = sent.items("/messages");
    ASSERT_EQ(msgs.size(), 2u);
    EXPECT_EQ(msgs[0].str("/content"), "PREBUILT-SYSTEM");
    EXPECT_EQ(msgs[1].str("/role"), "user");
    EXPECT_EQ(msgs[1].str("/content"), "a quick one");
  }
}

// A summary is background work: with the model's slots full, an answer
// queued after it gets the next free slot. One slot; a stalled answer
// holds it while a summary and then another answer queue; cancelling the
// stalled one frees the slot.
TEST_F(gateway_order_test, a_queued_answer_goes_before_a_queued_summary) {
  auto g = gateway(1, 4);
  auto got = outcomes_in_order(2, [&, g](caf::event_based_actor* w, note_fn note) {
    behind_a_held_slot(w, g, note);
  });
  EXPECT_EQ(got, (std::vector<std::string>{"answer:ANSWER", "summary:SUMMARY"}));
}

// Summaries already running never hold every slot: of two, one stays free
// for answers. Two slow summaries and then an answer: the first summary
// runs, the second waits for it, and the answer takes the free slot at
// once (it used to wait behind both summaries).
TEST_F(gateway_order_test, running_summaries_leave_a_slot_for_answers) {
  auto g = gateway(2, 4, 1500);
  auto got = outcomes_in_order(3, [&, g](caf::event_based_actor* w, note_fn note) {
    ask_summary(w, g, note);
    ask_summary(w, g, note);
    ask(w, g, question("quick", "a quick one"), note);
  });
  EXPECT_EQ(got, (std::vector<std::string>{"answer:ANSWER", "summary:SUMMARY", "summary:SUMMARY"}));
  EXPECT_EQ(fake.stat("chat_requests"), 3);
}

// A full queue takes an answer in place of a queued summary, which is
// refused (it used to refuse the answer). One slot held, room for one:
// a summary queues, then an answer comes.
TEST_F(gateway_order_test, a_full_queue_refuses_a_summary_rather_than_an_answer) {
  auto g = gateway(1, 1);
  auto got = outcomes_in_order(3, [&, g](caf::event_based_actor* w, note_fn note) {
    // With the queue full of an answer, a second summary is refused.
    behind_a_held_slot(w, g, note, [&] { ask_summary(w, g, note); });
  });
  EXPECT_EQ(got, (std::vector<std::string>{"summary refused", "summary refused", "answer:ANSWER"}));
}

TEST_F(summarizer_test, without_a_model_the_summary_is_extractive) {
  auto s = summarizer(false);
  grow_to(8);
  self->request(store, 10s, atom::begin_turn_v, std::string{"ann"}, std::string{"s1"},
                std::string{"I really love green tea. Which tea suits a cold evening?"},
                std::string{"r-pref"})
      .receive([](turn_opened&) {}, [&](caf::error& e) { FAIL() << sys.render(e); });
  stored_message answer;
  answer.conversation_id = conv;
  answer.role = "assistant";
  answer.content = "A roasted hojicha suits a cold evening.";
  self->request(store, 10s, atom::finish_turn_v, answer)
      .receive([](std::string&) {}, [&](caf::error& e) { FAIL() << sys.render(e); });
  count = 10;
  grow_to(16);
  EXPECT_EQ(summarize(s), "written");
  auto rec = stored();
  EXPECT_NE(rec.summary.find("User stated: I really love green tea"), std::string::npos)
      << rec.summary;
  EXPECT_EQ(fake.stat("chat_requests"), 0) << "no model was asked";
  EXPECT_NE(status(s).find("\"extractive\":1"), std::string::npos) << status(s);
}

}  // namespace
}  // namespace ragtor::test
