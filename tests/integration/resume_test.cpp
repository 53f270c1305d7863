// Generations that survive the client (issue 19): every SSE event has the
// id `<request_id>:<seq>`; a client that goes away leaves its turn running,
// detached, for server.detach_grace_ms; GET /api/v1/chat/stream/{id} with
// Last-Event-ID re-attaches (the events after that seq, then live ones), or
// replays a finished turn from the store. And the OpenAI-compatible façade,
// driven by the official `openai` npm client.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/support/server_fixture.hpp"

namespace ragtor::test {
namespace {

constexpr const char* festival_question =
    "What do the people of Port Quellin do during the lantern festival at the harbour?";

// The seq of an SSE id "<request_id>:<seq>" (0 when malformed).
uint64_t seq_of(const std::string& id, const std::string& request_id) {
  auto prefix = request_id + ":";
  if (!id.starts_with(prefix))
    return 0;
  return std::strtoull(id.c_str() + prefix.size(), nullptr, 10);
}

// Events read so far from one connection.
struct partial_read {
  std::vector<sse_event> events;
  std::string tokens;
  std::string last_id;
  bool saw_done = false;
};

// Reads data events until `tokens` tokens arrived (or done).
partial_read read_tokens(sse_stream& s, size_t tokens) {
  partial_read out;
  size_t n = 0;
  while (n < tokens) {
    auto ev = s.next_event(30s);
    if (!ev)
      break;
    if (ev->is_comment)
      continue;
    out.events.push_back(*ev);
    out.last_id = ev->id;
    auto j = json::parse(ev->data);
    if (j.str("/status") == "token") {
      out.tokens += j.str("/content");
      ++n;
    }
    if (j.str("/status") == "done") {
      out.saw_done = true;
      break;
    }
  }
  return out;
}

std::string resume_path(const std::string& request_id, const std::string& user) {
  return "/api/v1/chat/stream/" + request_id + "?user_id=" + user;
}

// Paced tokens (30 ms apart) so a stream lasts long enough to cut; a grace
// period long enough for a re-attach.
class resume_test : public ragtor_server_test {
protected:
  env_vars server_env() const override {
    return {{"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "30"},
            {"RAGTOR_SERVER__DETACH_GRACE_MS", "20000"}};
  }
};

TEST_F(resume_test, event_ids_carry_the_request_id_and_an_increasing_seq_and_retry_is_sent) {
  auto r = chat_stream(port(), chat_body("ann", "ids", "hello", "test", {{"request_id", "rq-ids"}}));
  ASSERT_TRUE(well_formed_stream(r));
  uint64_t last = 0;
  for (auto& ev : r.raw) {
    if (ev.is_comment)
      continue;
    auto seq = seq_of(ev.id, "rq-ids");
    EXPECT_GT(seq, last) << "id \"" << ev.id << "\" does not increase";
    last = seq;
  }
  // retry: is not an event; check the raw bytes of a fresh stream.
  auto raw = request(port(), "POST", chat_stream_path,
                     chat_body("ann", "ids", "hello again", "test", {{"request_id", "rq-ids2"}}));
  EXPECT_NE(raw.body.find("retry: "), std::string::npos) << raw.body.substr(0, 200);
  EXPECT_LT(raw.body.find("retry: "), raw.body.find("data: ")) << "retry comes first";
}

TEST_F(resume_test, reattaching_with_last_event_id_loses_and_duplicates_nothing) {
  auto first = open_sse(port(), chat_stream_path,
                        chat_body("ann", "s1", festival_question, "test", {{"request_id", "rq-1"}}));
  ASSERT_EQ(first.status(), 200);
  auto head = read_tokens(first, 3);
  ASSERT_FALSE(head.saw_done) << "the answer finished before it could be cut";
  ASSERT_GT(seq_of(head.last_id, "rq-1"), 0u) << head.last_id;
  first.close();

  auto again = open_sse_get(port(), resume_path("rq-1", "ann"), {{"Last-Event-ID", head.last_id}});
  ASSERT_EQ(again.status(), 200);
  auto rest = read_stream(again);
  ASSERT_TRUE(rest.done) << rest.statuses();
  EXPECT_TRUE(rest.errors.empty()) << rest.errors[0].dump();
  EXPECT_FALSE(rest.done->boolean("/content/partial"));
  // Every replayed event comes after the last one seen.
  uint64_t last = seq_of(head.last_id, "rq-1");
  for (auto& ev : rest.raw) {
    if (ev.is_comment)
      continue;
    auto seq = seq_of(ev.id, "rq-1");
    EXPECT_GT(seq, last) << ev.id << " after " << head.last_id;
    last = seq;
  }
  auto answer = rest.done->str("/content/answer");
  EXPECT_EQ(head.tokens + rest.tokens, answer) << "tokens lost or duplicated across the re-attach";
  auto rows = db().messages("ann", "s1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].completed, 1) << "the detached turn ran to completion";
  EXPECT_EQ(rows[1].content, answer);
}

TEST_F(resume_test, after_as_a_query_parameter_works_like_last_event_id) {
  auto first = open_sse(port(), chat_stream_path,
                        chat_body("ann", "s2", festival_question, "test", {{"request_id", "rq-2"}}));
  auto head = read_tokens(first, 2);
  ASSERT_FALSE(head.saw_done);
  first.reset();
  auto after = std::to_string(seq_of(head.last_id, "rq-2"));
  auto again = open_sse_get(port(), resume_path("rq-2", "ann") + "&after=" + after);
  auto rest = read_stream(again);
  ASSERT_TRUE(rest.done);
  EXPECT_EQ(head.tokens + rest.tokens, rest.done->str("/content/answer"));
}

TEST_F(resume_test, two_clients_attached_at_once_both_receive_everything) {
  auto a = open_sse(port(), chat_stream_path,
                    chat_body("ann", "s3", festival_question, "test", {{"request_id", "rq-3"}}));
  auto head = read_tokens(a, 1);
  ASSERT_FALSE(head.saw_done);
  // A second tab: no Last-Event-ID, so it is replayed the turn from start.
  auto b = open_sse_get(port(), resume_path("rq-3", "ann"));
  auto rb = read_stream(b);
  auto ra = read_stream(a);
  ASSERT_TRUE(ra.done && rb.done);
  auto answer = rb.done->str("/content/answer");
  EXPECT_EQ(head.tokens + ra.tokens, answer);
  EXPECT_EQ(rb.tokens, answer);
  EXPECT_EQ(rb.raw.front().id, "rq-3:1") << "the second client starts at the turn's start";
}

TEST_F(resume_test, reattaching_after_done_replays_the_stored_answer) {
  auto r = chat_stream(port(), chat_body("ann", "s4", festival_question, "test",
                                         {{"request_id", "rq-4"}}));
  ASSERT_TRUE(well_formed_stream(r));
  auto again = open_sse_get(port(), resume_path("rq-4", "ann"));
  auto rest = read_stream(again);
  ASSERT_TRUE(well_formed_stream(rest));
  EXPECT_EQ(rest.tokens, r.answer());
  EXPECT_EQ(rest.done->str("/content/answer"), r.answer());
  EXPECT_EQ(rest.done->str("/content/message_id"), r.done->str("/content/message_id"));
  EXPECT_EQ(rest.done->items("/content/citations").size(),
            r.done->items("/content/citations").size());
  // A client that saw part of it gets `done` alone (it carries the answer).
  auto tail = open_sse_get(port(), resume_path("rq-4", "ann"), {{"Last-Event-ID", "rq-4:5"}});
  auto rt = read_stream(tail);
  ASSERT_TRUE(rt.done);
  EXPECT_EQ(rt.tokens, "");
  EXPECT_EQ(rt.done->str("/content/answer"), r.answer());
}

TEST_F(resume_test, another_user_or_an_unknown_request_id_is_404) {
  auto a = open_sse(port(), chat_stream_path,
                    chat_body("ann", "s5", festival_question, "test", {{"request_id", "rq-5"}}));
  ASSERT_FALSE(read_tokens(a, 1).saw_done);
  EXPECT_EQ(request(port(), "GET", resume_path("rq-5", "mallory")).status, 404)
      << "a running turn of someone else";
  EXPECT_EQ(request(port(), "GET", resume_path("rq-none", "ann")).status, 404);
  EXPECT_EQ(request(port(), "GET", "/api/v1/chat/stream/rq-5").status, 400) << "no user_id";
  auto ra = read_stream(a);
  ASSERT_TRUE(ra.done);
  EXPECT_EQ(request(port(), "GET", resume_path("rq-5", "mallory")).status, 404)
      << "a stored turn of someone else";
}

TEST_F(resume_test, stop_still_stops_a_detached_turn_at_once) {
  auto a = open_sse(port(), chat_stream_path,
                    chat_body("ann", "s6", festival_question, "test", {{"request_id", "rq-6"}}));
  ASSERT_FALSE(read_tokens(a, 1).saw_done);
  a.close();
  auto stop = request(port(), "POST", "/api/v1/chat/stop",
                      R"({"request_id":"rq-6","user_id":"ann"})");
  ASSERT_EQ(stop.status, 200) << stop.body;
  // The next turn of the conversation runs once the stopped one is stored.
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("ann", "s6", "hello"))));
  auto rows = db().messages("ann", "s6");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].completed, 0);
  auto again = open_sse_get(port(), resume_path("rq-6", "ann"));
  auto rest = read_stream(again);
  ASSERT_TRUE(rest.done);
  EXPECT_TRUE(rest.done->boolean("/content/partial"));
  EXPECT_EQ(rest.done->str("/content/answer"), rows[1].content);
}

TEST_F(resume_test, after_a_restart_the_stored_partial_is_replayed) {
  auto a = open_sse(port(), chat_stream_path,
                    chat_body("ann", "s7", festival_question, "test", {{"request_id", "rq-7"}}));
  auto head = read_tokens(a, 2);
  ASSERT_FALSE(head.saw_done);
  a.close();  // detached
  // Shutdown cancels the detached turn and stores what it generated.
  ASSERT_TRUE(stop_server().clean());
  start_server();
  auto again = open_sse_get(port(), resume_path("rq-7", "ann"), {{"Last-Event-ID", head.last_id}});
  auto rest = read_stream(again);
  ASSERT_TRUE(rest.done) << rest.statuses();
  EXPECT_TRUE(rest.done->boolean("/content/partial"));
  ASSERT_EQ(rest.errors.size(), 1u);
  EXPECT_EQ(rest.errors[0].str("/code"), "cancelled") << rest.errors[0].dump();
  auto rows = db().messages("ann", "s7");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].completed, 0);
  EXPECT_TRUE(rows[1].content.starts_with(head.tokens));
  EXPECT_EQ(rest.done->str("/content/answer"), rows[1].content);
}

// A short grace period: nobody re-attaches in time.
class short_grace_test : public ragtor_server_test {
protected:
  env_vars server_env() const override {
    return {{"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "200"},
            {"RAGTOR_SERVER__DETACH_GRACE_MS", "300"}};
  }
};

TEST_F(short_grace_test, nobody_back_within_the_grace_period_stores_the_partial) {
  auto a = open_sse(port(), chat_stream_path,
                    chat_body("bob", "g1", festival_question, "test", {{"request_id", "rq-g1"}}));
  auto head = read_tokens(a, 1);
  ASSERT_FALSE(head.saw_done);
  a.close();
  // The conversation's next turn starts once the cut turn was cancelled
  // (grace over) and stored.
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("bob", "g1", "hello"))));
  auto rows = db().messages("bob", "g1");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].completed, 0) << "cancelled after the grace period";
  EXPECT_TRUE(rows[1].content.starts_with(head.tokens));
  auto again = open_sse_get(port(), resume_path("rq-g1", "bob"), {{"Last-Event-ID", head.last_id}});
  auto rest = read_stream(again);
  ASSERT_TRUE(rest.done);
  EXPECT_TRUE(rest.done->boolean("/content/partial"));
  EXPECT_EQ(rest.done->str("/content/answer"), rows[1].content);
}

// -- the OpenAI-compatible façade -----------------------------------------------------

class openai_facade_test : public ragtor_server_test {
protected:
  env_vars server_env() const override { return {{"RAGTOR_GENERATOR__EXTRACTIVE_PACE_MS", "20"}}; }
};

TEST_F(openai_facade_test, the_official_openai_client_works_unchanged) {
  auto node = find_node();
  ASSERT_FALSE(node.empty()) << "node is not installed (scripts/install-deps installs it)";
  auto sdk = source_dir() / "tests" / "sdk";
  ASSERT_TRUE(std::filesystem::exists(sdk / "node_modules" / "openai"))
      << "the openai npm package is not installed: run scripts/install-deps";
  auto run = run_command({node, (sdk / "openai_sdk.mjs").string(),
                          "http://127.0.0.1:" + std::to_string(port()) + "/v1", "test",
                          festival_question},
                         {}, 120s);
  ASSERT_TRUE(run.status.clean()) << run.status.describe() << "\n" << run.output;
  // The aborted stream's turn was stopped and its partial stored; the
  // conversation's next turn runs after it.
  ASSERT_TRUE(well_formed_stream(chat_stream(port(), chat_body("sdk-user", "sdk-abort", "hello"))));
  auto rows = db().messages("sdk-user", "sdk-abort");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].content, festival_question);
  EXPECT_EQ(rows[1].completed, 0) << "the abort did not stop the turn";
}

TEST_F(openai_facade_test, a_stream_ends_with_usage_then_done_marker) {
  auto s = open_sse(port(), "/v1/chat/completions",
                    R"({"model":"kb:test","stream":true,"stream_options":{"include_usage":true},)"
                    R"("messages":[{"role":"user","content":"How long do the batteries of the Lumenlatch K7 last?"}]})");
  ASSERT_EQ(s.status(), 200);
  std::vector<std::string> data;
  for (;;) {
    auto ev = s.next_event(30s);
    if (!ev)
      break;
    if (!ev->is_comment)
      data.push_back(ev->data);
  }
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  auto usage = json::parse(data[data.size() - 2]);
  EXPECT_TRUE(usage.items("/choices").empty());
  EXPECT_GT(usage.integer("/usage/total_tokens"), 0);
  auto last = json::parse(data[data.size() - 3]);
  EXPECT_EQ(last.str("/choices/0/finish_reason"), "stop");
  EXPECT_TRUE(last.has("/citations"));
  auto first = json::parse(data.front());
  EXPECT_EQ(first.str("/choices/0/delta/role"), "assistant");
  // Nothing of a stateless request is stored.
  EXPECT_EQ(db().messages("openai", "").size(), 0u);
}

TEST_F(openai_facade_test, bad_requests_get_the_openai_error_shape) {
  auto bad = request(port(), "POST", "/v1/chat/completions", R"({"model":"kb:test"})");
  EXPECT_EQ(bad.status, 400);
  auto j = json::parse(bad.body);
  EXPECT_EQ(j.str("/error/type"), "invalid_request_error");
  EXPECT_EQ(j.str("/error/param"), "messages");
  EXPECT_TRUE(j.has("/error/code"));
  auto last_not_user = request(port(), "POST", "/v1/chat/completions",
                               R"({"model":"auto","messages":[{"role":"assistant","content":"x"}]})");
  EXPECT_EQ(last_not_user.status, 400);
  auto no_user = request(port(), "POST", "/v1/chat/completions",
                         R"({"model":"auto","messages":[{"role":"user","content":"x"}]})",
                         {{"X-Session-Id", "s1"}});
  EXPECT_EQ(no_user.status, 400) << no_user.body;
  EXPECT_EQ(json::parse(no_user.body).str("/error/param"), "user");
}

}  // namespace
}  // namespace ragtor::test
