// The OpenAI-compatible client against the fake server over real sockets:
// streaming, non-streaming, embeddings, keep-alive reuse, every fault class,
// timeouts, retries only before the first token, and cancel closing the
// upstream connection (observed by the server).
#include <gtest/gtest.h>

#include <future>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <mutex>

#include <fcntl.h>
#include <sys/resource.h>

#include "llm/openai_client.hpp"
#include "protocol/metrics.hpp"
#include "tests/support/fake_openai.hpp"
#include "tests/support/json.hpp"

namespace ragtor::test {
namespace {

using namespace std::chrono_literals;
using llm::failure;

struct stream_outcome {
  std::vector<std::string> deltas;
  std::optional<llm::completion> done;
  std::optional<llm::llm_error> error;
  std::string text() const {
    std::string s;
    for (auto& d : deltas)
      s += d;
    return s;
  }
};

// Collects one streamed call; wait() blocks (with a deadline) for its end.
struct collector {
  std::mutex mx;
  stream_outcome out;
  std::promise<void> finished;
  std::promise<void> first_delta;
  bool saw_first = false;

  llm::stream_callbacks callbacks() {
    return {[this](std::string_view d) {
              std::lock_guard lock{mx};
              out.deltas.emplace_back(d);
              if (!saw_first) {
                saw_first = true;
                first_delta.set_value();
              }
            },
            [this](llm::completion c) {
              {
                std::lock_guard lock{mx};
                out.done = std::move(c);
              }
              finished.set_value();
            },
            [this](llm::llm_error e) {
              {
                std::lock_guard lock{mx};
                out.error = std::move(e);
              }
              finished.set_value();
            }};
  }

  stream_outcome wait(std::chrono::milliseconds timeout = 20s) {
    auto f = finished.get_future();
    if (f.wait_for(timeout) != std::future_status::ready)
      throw std::runtime_error("the call did not finish in time");
    std::lock_guard lock{mx};
    return out;
  }
};

llm::endpoint_config config_for(const fake_openai& fake) {
  llm::endpoint_config c;
  c.base_url = fake.base_url();
  c.model = "fake-model";
  c.backoff_base = 5ms;
  c.backoff_max = 50ms;
  c.first_token_timeout = 5s;
  c.idle_timeout = 5s;
  return c;
}

llm::chat_params ask(std::string question) {
  llm::chat_params p;
  p.messages = {{"system", "be brief"}, {"user", std::move(question)}};
  return p;
}

// One streamed call of `question`, waited for (collector::wait).
stream_outcome streamed(llm::openai_client& client, std::string question) {
  collector c;
  client.stream_chat(ask(std::move(question)), c.callbacks());
  return c.wait();
}

// config_for with these timeouts and no retries (a timeout is the answer).
llm::endpoint_config timeouts_for(const fake_openai& fake, std::chrono::milliseconds first_token,
                                  std::chrono::milliseconds idle) {
  auto c = config_for(fake);
  c.first_token_timeout = first_token;
  c.idle_timeout = idle;
  c.max_retries = 0;
  return c;
}

// "stall please" against a rule that stalls after one token ("a "): the
// idle timeout ends it after that token.
stream_outcome stalled_after_a_token(llm::openai_client& client) {
  auto r = streamed(client, "stall please");
  EXPECT_TRUE(r.error);
  if (r.error) {
    EXPECT_EQ(r.error->kind, failure::timeout_idle) << r.error->message;
  }
  EXPECT_EQ(r.text(), "a ");
  return r;
}

TEST(openai_client, streams_a_completion_with_usage_and_reuses_the_connection) {
  // 5 ms between tokens: they come in more than one read (an instant
  // answer may come in one, and then as one delta: the test below).
  fake_openai fake{
      R"({"default":{"reply":"Tea is brewed with salt in Quellin.","token_delay_ms":5}})"};
  llm::openai_client client{config_for(fake)};
  for (int i = 0; i < 3; ++i) {
    auto r = streamed(client, "How is tea brewed?");
    ASSERT_FALSE(r.error) << r.error->message;
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.text(), "Tea is brewed with salt in Quellin.");
    EXPECT_EQ(r.done->text, r.text());
    EXPECT_EQ(r.done->finish_reason, "stop");
    EXPECT_GT(r.deltas.size(), 1u) << "streamed in pieces";
    EXPECT_EQ(r.done->tokens.completion_tokens, 7) << "the usage the model reported";
    EXPECT_EQ(r.done->tokens.prompt_tokens, 6) << "fake counts words of all messages";
  }
  EXPECT_EQ(fake.stat("connections_accepted"), 1) << "keep-alive: one connection for 3 calls";
  // The fake counts a stream once its last bytes are written: the client
  // can read them first.
  EXPECT_TRUE(fake.wait_for_stat("streams_completed", 3, 5s));
  EXPECT_EQ(fake.stat("streams_completed"), 3);
  // The wire format is OpenAI's: model, messages, stream and usage request.
  auto body = json::parse(fake.stats().str("/last_chat_request"));
  EXPECT_EQ(body.str("/model"), "fake-model");
  EXPECT_TRUE(body.boolean("/stream"));
  EXPECT_TRUE(body.boolean("/stream_options/include_usage"));
  EXPECT_EQ(body.items("/messages").size(), 2u);
}

// On a pooled connection the caller's thread writes the request itself
// (send_early); the I/O thread writes what the socket did not take. A
// request larger than the socket takes at once arrives whole, and one the
// server answers by closing the connection goes again on a fresh one, for
// free (no retry is allowed here).

// An instant answer of 200 tokens is written in one write: its events reach
// the caller a read at a time, as one delta each (a read may hold dozens),
// not one delta per event — one message to the stream and one SSE event per
// read instead of per token.
TEST(openai_client, the_events_of_one_read_are_one_delta) {
  std::string reply;
  for (int i = 0; i < 200; ++i)
    reply += "w" + std::to_string(i) + " ";
  fake_openai fake{R"({"default":{"reply":")" + reply + R"("}})"};
  llm::openai_client client{config_for(fake)};
  auto r = streamed(client, "a long answer");
  ASSERT_FALSE(r.error) << r.error->message;
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.text(), reply);
  EXPECT_EQ(r.done->tokens.completion_tokens, 200);
  EXPECT_GE(r.deltas.size(), 1u);
  EXPECT_LE(r.deltas.size(), 50u) << "one delta per event: " << r.deltas.size();
}
TEST(openai_client, a_request_written_early_arrives_whole_or_goes_again_fresh) {
  fake_openai fake{R"({"default":{"reply":"first"}})"};
  auto cfg = config_for(fake);
  cfg.max_retries = 0;
  llm::openai_client client{cfg};
  auto first = streamed(client, "one");
  ASSERT_FALSE(first.error) << first.error->message;
  // Larger than a loopback socket's send buffer (at most 4 MiB).
  const std::string big(12 * 1024 * 1024, 'q');
  auto whole = streamed(client, big);
  ASSERT_FALSE(whole.error) << whole.error->message;
  EXPECT_EQ(whole.text(), "first");
  auto body = json::parse(fake.stats().str("/last_chat_request"));
  ASSERT_EQ(body.items("/messages").size(), 2u);
  EXPECT_EQ(body.str("/messages/1/content").size(), big.size()) << "the request arrived whole";
  EXPECT_EQ(fake.stat("connections_accepted"), 1);
  fake.set_script(R"({"default":{"reply":"second","fault":"close_before_headers","fault_times":1}})");
  auto again = streamed(client, "two");
  ASSERT_FALSE(again.error) << again.error->message;
  EXPECT_EQ(again.text(), "second");
  EXPECT_EQ(fake.stat("connections_accepted"), 2) << "sent again on a fresh connection";
}

TEST(openai_client, non_streaming_chat_and_embeddings) {
  fake_openai fake{R"({"rules":[{"match":"route","reply":"{\"kb_prefix\": \"tea\"}"}],)"
                   R"("embedding_dims":16})"};
  llm::openai_client client{config_for(fake)};
  std::promise<llm::chat_result> p;
  client.chat(ask("please route this"), [&](llm::chat_result r) { p.set_value(std::move(r)); });
  auto r = p.get_future().get();
  ASSERT_TRUE(std::holds_alternative<llm::completion>(r)) << std::get<llm::llm_error>(r).message;
  EXPECT_EQ(std::get<llm::completion>(r).text, "{\"kb_prefix\": \"tea\"}");

  auto e = client.embed_sync({"green tea", "green tea", "harbour ships"});
  ASSERT_TRUE(std::holds_alternative<std::vector<std::vector<float>>>(e));
  auto& v = std::get<std::vector<std::vector<float>>>(e);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].size(), 16u);
  EXPECT_EQ(v[0], v[1]);
  EXPECT_NE(v[0], v[2]);
}

TEST(openai_client, rerank_over_the_wire) {
  fake_openai fake{R"({"rerank_boost":"pier"})"};
  auto cfg = config_for(fake);
  cfg.model = "fake-reranker";
  llm::openai_client client{cfg};
  auto rerank = [&](std::vector<std::string> docs) {
    std::promise<llm::rerank_result> p;
    client.rerank("north gulls", std::move(docs),
                  [&](llm::rerank_result r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  };
  auto r = rerank({"Bells ring at noon.", "Gulls nest on the north pier.", "North winds."});
  ASSERT_TRUE(std::holds_alternative<std::vector<llm::rerank_hit>>(r))
      << std::get<llm::llm_error>(r).message;
  auto& hits = std::get<std::vector<llm::rerank_hit>>(r);
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].index, 1u) << "both words and the boost";
  EXPECT_DOUBLE_EQ(hits[0].score, 2.0);
  EXPECT_EQ(hits[1].index, 2u);
  EXPECT_EQ(hits[2].index, 0u);
  auto body = json::parse(fake.stats().str("/last_rerank_request"));
  EXPECT_EQ(body.str("/model"), "fake-reranker");
  EXPECT_EQ(body.str("/query"), "north gulls");
  EXPECT_EQ(body.items("/documents").size(), 3u);
  EXPECT_EQ(body.integer("/top_n"), 3);
  // A failing endpoint is an http_status failure, retried like any call.
  fake.set_script(R"({"rerank_status":503})");
  auto failed = rerank({"a", "b"});
  ASSERT_TRUE(std::holds_alternative<llm::llm_error>(failed));
  EXPECT_EQ(std::get<llm::llm_error>(failed).kind, failure::http_status);
  EXPECT_EQ(std::get<llm::llm_error>(failed).http_status, 503);
  EXPECT_EQ(fake.stat("rerank_requests"), 1 + 1 + cfg.max_retries);
}

TEST(openai_client, tool_calls_round_trip_over_the_wire) {
  fake_openai fake{R"({"rules":[)"
                   R"({"system":"agent","tool_results":1,"reply":"READY"},)"
                   R"({"system":"agent","when_tools":true,"tool_calls":[)"
                   R"({"name":"vector_retrieve","arguments":{"query":"K7"}},)"
                   R"({"name":"grade","arguments_raw":"{broken","id":"c9"}]}]})"};
  llm::openai_client client{config_for(fake)};
  auto call = [&](llm::chat_params p) {
    std::promise<llm::chat_result> pr;
    client.chat(std::move(p), [&](llm::chat_result r) { pr.set_value(std::move(r)); });
    auto r = pr.get_future().get();
    EXPECT_TRUE(std::holds_alternative<llm::completion>(r)) << std::get<llm::llm_error>(r).message;
    return std::get<llm::completion>(r);
  };
  llm::chat_params p;
  p.messages = {{"system", "you are an agent"}, {"user", "battery?"}};
  p.tools_json = R"([{"type":"function","function":{"name":"vector_retrieve","parameters":{}}}])";
  p.tool_choice = "auto";
  auto first = call(p);
  EXPECT_EQ(first.finish_reason, "tool_calls");
  ASSERT_EQ(first.tool_calls.size(), 2u);
  EXPECT_EQ(first.tool_calls[0].name, "vector_retrieve");
  EXPECT_EQ(first.tool_calls[0].arguments, R"({"query":"K7"})");
  EXPECT_EQ(first.tool_calls[0].id, "call_1");
  EXPECT_EQ(first.tool_calls[1].arguments, "{broken") << "malformed arguments pass through as text";
  EXPECT_EQ(first.tool_calls[1].id, "c9");
  auto sent = json::parse(fake.stats().str("/last_chat_request"));
  EXPECT_EQ(sent.str("/tools/0/function/name"), "vector_retrieve");
  EXPECT_EQ(sent.str("/tool_choice"), "auto");
  EXPECT_EQ(fake.stat("chat_with_tools"), 1);

  // The calls and their results go back; the tool_results rule answers.
  llm::chat_message assistant{"assistant", ""};
  assistant.tool_calls = first.tool_calls;
  p.messages.push_back(assistant);
  llm::chat_message result{"tool", "2 new results"};
  result.tool_call_id = "call_1";
  p.messages.push_back(result);
  auto second = call(p);
  EXPECT_EQ(second.text, "READY");
  EXPECT_TRUE(second.tool_calls.empty());
  sent = json::parse(fake.stats().str("/last_chat_request"));
  auto msgs = sent.items("/messages");
  ASSERT_EQ(msgs.size(), 4u);
  EXPECT_TRUE(msgs[2].is_null("/content"));
  EXPECT_EQ(msgs[2].str("/tool_calls/1/function/arguments"), "{broken");
  EXPECT_EQ(msgs[2].str("/tool_calls/0/type"), "function");
  EXPECT_EQ(msgs[3].str("/role"), "tool");
  EXPECT_EQ(msgs[3].str("/tool_call_id"), "call_1");

  // Without tools the when_tools rule does not apply.
  llm::chat_params no_tools;
  no_tools.messages = {{"system", "you are an agent"}, {"user", "battery?"}};
  auto plain = call(no_tools);
  EXPECT_TRUE(plain.tool_calls.empty());
  EXPECT_EQ(fake.stat("chat_with_tools"), 2);
}

TEST(openai_client, retries_429_and_500_only_before_the_first_token) {
  fake_openai fake{R"({"default":{"reply":"fine now","fault":"http_429","fault_times":1}})"};
  llm::openai_client client{config_for(fake)};
  auto r = streamed(client, "q");
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.text(), "fine now");
  EXPECT_EQ(fake.stat("chat_requests"), 2) << "one 429, one success";

  fake.set_script(R"({"default":{"fault":"http_500"}})");
  fake.reset_stats();
  auto r2 = streamed(client, "q");
  ASSERT_TRUE(r2.error);
  EXPECT_EQ(r2.error->kind, failure::http_status);
  EXPECT_EQ(r2.error->http_status, 500);
  EXPECT_EQ(r2.error->attempts, 3) << "max_retries = 2";
  EXPECT_FALSE(r2.error->after_first_token);
  EXPECT_EQ(fake.stat("chat_requests"), 3);
  EXPECT_NE(r2.error->message.find("internal error"), std::string::npos) << r2.error->message;
}

TEST(openai_client, failures_after_the_first_token_are_never_retried) {
  for (auto fault : {"reset_mid_stream", "malformed_chunk"}) {
    fake_openai fake{std::string{R"({"default":{"reply":"one two three four five six",)"}
                     + R"("fault":")" + fault + R"(","fault_after_tokens":2}})"};
    llm::openai_client client{config_for(fake)};
    auto r = streamed(client, "q");
    ASSERT_TRUE(r.error) << fault;
    EXPECT_EQ(r.error->kind, failure::protocol) << fault;
    EXPECT_TRUE(r.error->after_first_token) << fault;
    EXPECT_EQ(r.text(), "one two ") << fault;
    EXPECT_EQ(fake.stat("chat_requests"), 1) << fault << ": no retry after a token";
  }
}

TEST(openai_client, missing_done_after_finish_reason_is_complete_but_a_cut_stream_is_not) {
  fake_openai fake{R"({"default":{"reply":"all of it","fault":"no_done"}})"};
  llm::openai_client client{config_for(fake)};
  auto r = streamed(client, "q");
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.done->text, "all of it");

  fake.set_script(R"({"default":{"fault":"close_before_headers"}})");
  auto r2 = streamed(client, "q");
  ASSERT_TRUE(r2.error);
  EXPECT_EQ(r2.error->kind, failure::connect);
  EXPECT_EQ(r2.error->attempts, 3);
}

TEST(openai_client, timeouts_first_token_and_idle) {
  fake_openai fake{
      R"({"rules":[{"match":"slow","first_token_delay_ms":3000},)"
      R"({"match":"stall","reply":"a b c d","fault":"stall","fault_after_tokens":1}]})"};
  llm::openai_client client{timeouts_for(fake, 300ms, 300ms)};
  auto r = streamed(client, "slow please");
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->kind, failure::timeout_first_token) << r.error->message;

  auto r2 = stalled_after_a_token(client);
  ASSERT_TRUE(r2.error);
  EXPECT_TRUE(r2.error->after_first_token);
  EXPECT_TRUE(fake.wait_for_stat("streams_aborted", 1)) << "the stalled connection was closed";
}

// The fake records its own first-token time of each streamed chat (what
// bench_load subtracts): at least its configured delay, and no more than
// the client saw from its call to the first delta.
TEST(openai_client, the_fake_reports_its_own_first_token_time) {
  fake_openai fake{R"({"rules":[{"match":"wait","reply":"x y","first_token_delay_ms":40}]})"};
  llm::openai_client client{config_for(fake)};
  EXPECT_EQ(fake.first_tokens().integer("/count"), 0);
  auto before = std::chrono::steady_clock::now();
  collector c;
  client.stream_chat(ask("wait for it"), c.callbacks());
  ASSERT_EQ(c.first_delta.get_future().wait_for(20s), std::future_status::ready);
  auto seen_us = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - before)
                     .count();
  auto r = c.wait();
  ASSERT_FALSE(r.error) << r.error->message;
  auto recorded = fake.first_tokens();
  ASSERT_EQ(recorded.integer("/count"), 1);
  auto us = recorded.items("/us");
  ASSERT_EQ(us.size(), 1u);
  EXPECT_GE(us[0].integer(""), 40'000);
  EXPECT_LE(us[0].integer(""), seen_us);
  EXPECT_EQ(fake.stat("first_tokens"), 1);
  EXPECT_EQ(fake.first_tokens(1).items("/us").size(), 0u) << "from=1 lists none";
  fake.reset_stats();
  EXPECT_EQ(fake.first_tokens().integer("/count"), 0) << "a reset forgets them";
}

// A call's request id goes to the model server as its X-Request-Id header
// (the fake lists it beside its first-token time), on a fresh connection
// and on a pooled one (where the caller's thread writes the request); a
// call without one, or with one that would break the header, sends none.
TEST(openai_client, a_calls_request_id_goes_with_it) {
  fake_openai fake{R"({"rules":[{"match":"wait","reply":"x y"}]})"};
  llm::openai_client client{config_for(fake)};
  for (auto id : {"turn-1", "turn-2", "", "bad\r\nX-Injected: 1"}) {
    collector c;
    client.stream_chat(ask("wait for it"), c.callbacks(), id);
    auto r = c.wait();
    ASSERT_FALSE(r.error) << r.error->message;
  }
  auto ids = fake.first_tokens().items("/ids");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[0].str(""), "turn-1");
  EXPECT_EQ(ids[1].str(""), "turn-2");
  EXPECT_EQ(ids[2].str(""), "");
  EXPECT_EQ(ids[3].str(""), "");
  EXPECT_EQ(fake.stat("connections_accepted"), 1) << "the later calls reused the connection";
}

// ...and its own gaps between content chunks (what bench_load compares the
// client's gaps with): a scripted delay between tokens gives one gap per
// later token, each at least the delay; tokens written at once are 0 ms
// apart; a reset forgets them.
TEST(openai_client, the_fake_reports_its_own_gaps_between_tokens) {
  fake_openai fake{R"({"rules":[{"match":"slow","reply":"a b c d","token_delay_ms":30},)"
                   R"({"match":"fast","reply":"a b c"}]})"};
  llm::openai_client client{config_for(fake)};
  EXPECT_EQ(fake.token_gaps().integer("/count"), 0);
  auto run = [&](std::string q) {
    collector c;
    client.stream_chat(ask(q), c.callbacks());
    auto r = c.wait();
    ASSERT_FALSE(r.error) << r.error->message;
  };
  run("slow please");
  auto gaps = fake.token_gaps();
  EXPECT_EQ(gaps.integer("/count"), 3) << "4 tokens, 3 gaps";
  for (auto& bucket : gaps.items("/ms")) {
    EXPECT_GE(bucket.integer("/0"), 30) << "each at least the delay";
    EXPECT_LT(bucket.integer("/0"), 10'000);
  }
  fake.reset_stats();
  EXPECT_EQ(fake.token_gaps().integer("/count"), 0) << "a reset forgets them";
  run("fast please");
  gaps = fake.token_gaps();
  ASSERT_EQ(gaps.items("/ms").size(), 1u);
  EXPECT_EQ(gaps.integer("/ms/0/0"), 0) << "written at once";
  EXPECT_EQ(gaps.integer("/ms/0/1"), 2);
}

TEST(openai_client, the_idle_deadline_follows_the_tokens) {
  // The idle deadline moves as tokens come: an answer that takes 1.6 idle
  // timeouts, a token every tenth of one, completes; and an idle timeout
  // shorter than what is left of the first-token timeout cuts a stall at
  // the idle timeout, not at the first-token one (which is beyond
  // wait()'s 20 s).
  fake_openai fake{
      R"({"rules":[{"match":"steady","reply":"a b c d e f g h i j k l m n o p",)"
      R"("token_delay_ms":100},)"
      R"({"match":"stall","reply":"a b c d","fault":"stall","fault_after_tokens":1}]})"};
  llm::openai_client client{timeouts_for(fake, 60s, 1s)};
  auto r = streamed(client, "steady please");
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.text(), "a b c d e f g h i j k l m n o p");

  stalled_after_a_token(client);
}

TEST(openai_client, connection_refused_is_a_connect_failure) {
  uint16_t closed_port;
  {
    fake_openai gone;
    closed_port = gone.port();
  }
  llm::endpoint_config cfg;
  cfg.base_url = "http://127.0.0.1:" + std::to_string(closed_port) + "/v1";
  cfg.model = "m";
  cfg.max_retries = 1;
  cfg.backoff_base = 1ms;
  llm::openai_client client{cfg};
  auto r = streamed(client, "q");
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->kind, failure::connect);
  EXPECT_EQ(r.error->attempts, 2);
  llm::endpoint_config bad;
  bad.base_url = "ftp://x";
  EXPECT_THROW(llm::openai_client{bad}, std::invalid_argument);
}

TEST(openai_client, cancel_mid_stream_closes_the_upstream_connection) {
  fake_openai fake{
      R"({"default":{"reply":"a b c d e f g h i j k l m n o p","token_delay_ms":100}})"};
  llm::openai_client client{config_for(fake)};
  collector c;
  auto handle = client.stream_chat(ask("q"), c.callbacks());
  ASSERT_EQ(c.first_delta.get_future().wait_for(10s), std::future_status::ready);
  handle->cancel();
  auto r = c.wait();
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->kind, failure::cancelled);
  EXPECT_TRUE(fake.wait_for_stat("streams_aborted", 1)) << fake.stats().dump();
  EXPECT_EQ(fake.stat("streams_completed"), 0);
  handle->cancel();  // idempotent
}

TEST(openai_client, many_concurrent_streams_complete) {
  fake_openai fake{R"({"default":{"echo":true,"token_delay_ms":2}})"};
  llm::openai_client client{config_for(fake)};
  constexpr int n = 50;
  std::vector<std::unique_ptr<collector>> cs;
  for (int i = 0; i < n; ++i) {
    cs.push_back(std::make_unique<collector>());
    client.stream_chat(ask("question number " + std::to_string(i)), cs.back()->callbacks());
  }
  for (int i = 0; i < n; ++i) {
    auto r = cs[static_cast<size_t>(i)]->wait();
    ASSERT_FALSE(r.error) << i << ": " << r.error->message;
    EXPECT_EQ(r.text(), "question number " + std::to_string(i));
  }
  EXPECT_TRUE(fake.wait_for_stat("streams_completed", n, 5s));
  EXPECT_EQ(fake.stat("streams_completed"), n);
}

TEST(openai_client, https_with_peer_verification) {
  fake_openai fake{R"({"default":{"reply":"over TLS"}})", true};
  ASSERT_TRUE(fake.base_url().starts_with("https://"));
  // Trusting the server's certificate: the call succeeds over TLS.
  auto cfg = config_for(fake);
  cfg.ca_file = fake_openai_cert();
  {
    llm::openai_client client{cfg};
    auto r = streamed(client, "q");
    ASSERT_FALSE(r.error) << r.error->message;
    EXPECT_EQ(r.text(), "over TLS");
  }
  // Not trusting it (self-signed, not in the system store): refused during
  // the handshake, as a connection failure.
  auto strict = config_for(fake);
  strict.max_retries = 0;
  llm::openai_client client{strict};
  auto r = streamed(client, "q");
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->kind, failure::connect);
  EXPECT_NE(r.error->message.find("certificate"), std::string::npos) << r.error->message;
}

TEST(openai_client, total_and_connect_timeouts) {
  fake_openai fake{
      R"({"default":{"reply":"a b c d e f g h i j k l m n o p","token_delay_ms":60}})"};
  auto cfg = config_for(fake);
  cfg.total_timeout = 400ms;  // the answer would take ~1 s; tokens flow, so no idle timeout
  llm::openai_client client{cfg};
  auto r = streamed(client, "q");
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->kind, failure::timeout_total) << r.error->message;
  EXPECT_TRUE(r.error->after_first_token);
  EXPECT_FALSE(r.text().empty());

  // A peer that completes TCP (the kernel's backlog) but never answers the
  // TLS handshake: the connect phase (TCP + TLS) times out.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  llm::endpoint_config silent;
  silent.base_url = "https://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/v1";
  silent.model = "m";
  silent.connect_timeout = 300ms;
  silent.max_retries = 0;
  llm::openai_client quiet{silent};
  auto r2 = streamed(quiet, "q");
  ::close(fd);
  ASSERT_TRUE(r2.error);
  EXPECT_EQ(r2.error->kind, failure::timeout_connect) << r2.error->message;
}

// Holds descriptors open until the process's open-file limit is reached
// (lowered to 1,024 meanwhile, so that filling it is cheap), so the next
// socket() fails with EMFILE; release() frees them and restores the limit.
class descriptor_hog {
public:
  descriptor_hog() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 1024);
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
      fds_.push_back(fd);
    if (errno != EMFILE)
      throw std::runtime_error("filling the descriptor table stopped early");
  }
  ~descriptor_hog() { release(); }
  void release() {
    for (int fd : fds_)
      ::close(fd);
    if (!fds_.empty())
      ::setrlimit(RLIMIT_NOFILE, &saved_);
    fds_.clear();
  }

private:
  rlimit saved_{};
  std::vector<int> fds_;
};

TEST(openai_client, a_connect_without_a_free_descriptor_names_the_cause_or_waits_for_one) {
  fake_openai fake{R"({"default":{"reply":"after the wait"}})"};
  // Every call opens a connection; one call first, so that the client's
  // resolver has its own descriptors before the table is full.
  auto config = [&](std::chrono::milliseconds total_timeout) {
    auto cfg = config_for(fake);
    cfg.total_timeout = total_timeout;
    cfg.max_retries = 0;
    cfg.max_idle_connections = 0;
    return cfg;
  };
  // No descriptor is freed before the call's total deadline: it fails and
  // says why (asio's range connect used to report "Operation canceled").
  {
    llm::openai_client client{config(300ms)};
    ASSERT_FALSE(streamed(client, "q").error);
    descriptor_hog hog;
    auto r = streamed(client, "q");
    hog.release();
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->kind, failure::connect) << r.error->message;
    EXPECT_NE(r.error->message.find("Too many open files"), std::string::npos)
        << r.error->message;
  }
  // A descriptor freed while the call waits for one (the wait is not bound
  // by the connect timeout, which is the model server's): it connects and
  // the answer streams, without a retry.
  // The client reports each wait; the descriptors are freed once the call
  // has waited longer than its connect timeout.
  auto slow = config(20s);
  slow.connect_timeout = 100ms;
  auto past_connect_timeout = std::make_shared<std::promise<void>>();
  auto told = std::make_shared<std::atomic<bool>>(false);
  slow.on_descriptor_wait = [=](std::chrono::milliseconds waited) {
    if (waited > 150ms && !told->exchange(true))
      past_connect_timeout->set_value();
  };
  llm::openai_client client{slow};
  ASSERT_FALSE(streamed(client, "q").error);
  auto& waits = metrics::global().llm_descriptor_waits;
  auto before = waits.value();
  descriptor_hog hog;
  collector c;
  client.stream_chat(ask("q"), c.callbacks());
  ASSERT_EQ(past_connect_timeout->get_future().wait_for(10s), std::future_status::ready)
      << "the call never waited for a descriptor past its connect timeout";
  ASSERT_EQ(waits.value(), before + 1) << "the call never found the descriptors exhausted";
  hog.release();
  auto r = c.wait();
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.text(), "after the wait");
}

}  // namespace
}  // namespace ragtor::test
