// The SSE writer over a real loopback socket: whatever is queued is written
// together (header, `retry:`, several batches, the end of the body), and
// what the client reads is always a valid chunked HTTP response carrying
// every event in order (Beast's parser reads it back).
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/sse_writer.hpp"
#include "protocol/metrics.hpp"
#include "protocol/stream_events.hpp"

namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using ragtor::http::event_batch;
using ragtor::stream_event;

stream_event numbered(stream_event ev, uint64_t seq) {
  ev.seq = seq;
  return ev;
}

struct exchange_result {
  bool writer_result = false;
  int batches_written = 0;  // batch_written calls
  http::response<http::string_body> response;
  bool parsed = false;
};

// Both ends of one loopback TCP connection, on one io_context.
struct loopback {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint{net::ip::make_address("127.0.0.1"), 0}};
  tcp::socket server{ioc}, client{ioc};
  loopback() {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
};

// Runs write_sse on one end of a loopback connection and parses what the
// other end reads. `before` is queued before the writer starts; `later`
// is sent one batch per batch_written call (the turn's credit).
exchange_result run_exchange(std::vector<event_batch> before, std::vector<event_batch> later) {
  loopback link;
  auto& ioc = link.ioc;
  auto& server = link.server;
  auto& client = link.client;
  ragtor::http::event_pipe pipe{ioc.get_executor(), 64};
  auto& ch = pipe.channel();
  for (auto& b : before)
    EXPECT_TRUE(ch.try_send(boost::system::error_code{}, std::move(b)));
  exchange_result out;
  size_t next_later = 0;
  ragtor::http::sse_timing timing{std::chrono::seconds{30}, std::chrono::seconds{30}};
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        out.writer_result = co_await ragtor::http::write_sse(server, pipe, timing, "req_1", [&] {
          ++out.batches_written;
          if (next_later < later.size())
            ch.try_send(boost::system::error_code{}, std::move(later[next_later++]));
        });
        server.shutdown(tcp::socket::shutdown_send);
      },
      net::detached);
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        boost::beast::flat_buffer buf;
        boost::system::error_code ec;
        co_await http::async_read(client, buf, out.response,
                                  net::redirect_error(net::use_awaitable, ec));
        out.parsed = !ec;
      },
      net::detached);
  ioc.run();
  return out;
}

// The `id:` lines of the body's events, in order.
std::vector<std::string> ids_of(const std::string& body) {
  std::vector<std::string> ids;
  for (size_t at = 0; (at = body.find("id: ", at)) != std::string::npos; at += 4)
    ids.push_back(body.substr(at + 4, body.find('\n', at) - at - 4));
  return ids;
}

TEST(sse_writer, queued_batches_make_one_valid_response_with_every_event_in_order) {
  ragtor::done_content done;
  done.answer = "hello";
  auto r = run_exchange({{numbered(ragtor::make_start_event(), 1)},
                         {numbered(ragtor::make_token_event("hel"), 2)},
                         {numbered(ragtor::make_token_event("lo"), 3),
                          numbered(ragtor::make_done_event(done), 4)}},
                        {});
  ASSERT_TRUE(r.parsed);
  EXPECT_TRUE(r.writer_result);
  EXPECT_EQ(r.response.result_int(), 200);
  EXPECT_EQ(r.response[http::field::content_type], "text/event-stream");
  auto& body = r.response.body();
  EXPECT_EQ(body.rfind("retry: ", 0), 0u) << body;
  EXPECT_EQ(ids_of(body), (std::vector<std::string>{"req_1:1", "req_1:2", "req_1:3", "req_1:4"}));
  EXPECT_NE(body.find("\"hel\""), std::string::npos);
  EXPECT_LT(body.find("\"hel\""), body.find("\"lo\""));
  // All three went out in the write that ended the body: no credit was
  // granted back in between (one write per batch would have granted 2).
  EXPECT_EQ(r.batches_written, 0);
}

TEST(sse_writer, batches_that_arrive_one_at_a_time_are_framed_the_same) {
  ragtor::done_content done;
  done.answer = "ab";
  // Only `start` is queued; each later batch is sent when the writer
  // grants credit back, so every write carries exactly one batch.
  auto r = run_exchange({{numbered(ragtor::make_start_event(), 1)}},
                        {{numbered(ragtor::make_token_event("a"), 2)},
                         {numbered(ragtor::make_token_event("b"), 3)},
                         {numbered(ragtor::make_done_event(done), 4)}});
  ASSERT_TRUE(r.parsed);
  EXPECT_TRUE(r.writer_result);
  EXPECT_EQ(ids_of(r.response.body()),
            (std::vector<std::string>{"req_1:1", "req_1:2", "req_1:3", "req_1:4"}));
  EXPECT_EQ(r.batches_written, 3);
}

TEST(sse_writer, a_closed_channel_ends_the_writer_with_false) {
  loopback link;
  auto& ioc = link.ioc;
  auto& server = link.server;
  auto& client = link.client;
  ragtor::http::event_pipe pipe{ioc.get_executor(), 4};
  auto& ch = pipe.channel();
  ch.try_send(boost::system::error_code{}, event_batch{numbered(ragtor::make_start_event(), 1)});
  std::optional<bool> result;
  ragtor::http::sse_timing timing{std::chrono::seconds{30}, std::chrono::seconds{30}};
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        result = co_await ragtor::http::write_sse(server, pipe, timing, "req_1", [&] {
          ch.cancel();  // the client went away (as watch_disconnect does)
          ch.close();
        });
      },
      net::detached);
  ioc.run();
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(*result);
}

// The writer on its own thread, the turn's side (deliver) on the test's.
struct threaded_writer {
  loopback link;
  ragtor::http::event_pipe pipe;
  std::atomic<int> written{0};
  std::optional<bool> result;
  std::thread thread;

  // `direct_after` 0: any batch for a waiting writer goes straight out.
  explicit threaded_writer(event_batch first,
                           std::chrono::nanoseconds direct_after = std::chrono::nanoseconds{0})
      : pipe{link.ioc.get_executor(), 64, direct_after} {
    pipe.channel().try_send(boost::system::error_code{}, std::move(first));
    ragtor::http::sse_timing timing{std::chrono::seconds{30}, std::chrono::seconds{30}};
    net::co_spawn(
        link.ioc,
        [this, timing]() -> net::awaitable<void> {
          result = co_await ragtor::http::write_sse(link.server, pipe, timing, "req_1",
                                                    [this] { ++written; });
          link.server.shutdown(tcp::socket::shutdown_send);
        },
        net::detached);
    thread = std::thread{[this] { link.ioc.run(); }};
  }
  ~threaded_writer() {
    if (thread.joinable())
      thread.join();
  }
  // Batches written by the delivering thread since the writer began
  // (ragtor_sse_direct_writes_total).
  uint64_t direct_writes() const {
    return ragtor::metrics::global().sse_direct_writes.value() - direct_before;
  }
  uint64_t direct_before = ragtor::metrics::global().sse_direct_writes.value();
  // Until the writer waits for a batch with nothing left to write.
  void until_waiting() {
    while (!pipe.writer_waiting())
      std::this_thread::yield();
  }
  // Delivers `done` as event `seq`, reads the whole response and waits
  // for the writer to return.
  http::response<http::string_body> end_with_done(uint64_t seq) {
    ragtor::done_content done;
    EXPECT_TRUE(pipe.deliver({numbered(ragtor::make_done_event(done), seq)}));
    auto res = read_all();
    thread.join();
    return res;
  }
  // The whole response, read by the client once the writer is done.
  http::response<http::string_body> read_all() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);  // the large-token test's body is 24 MiB
    boost::beast::flat_buffer buf;
    boost::system::error_code ec;
    http::read(link.client, buf, parser, ec);
    EXPECT_FALSE(ec) << ec.message();
    return parser.release();
  }
};

TEST(sse_writer, a_batch_for_a_waiting_writer_is_written_by_the_turns_thread) {
  threaded_writer w{{numbered(ragtor::make_start_event(), 1)}};
  std::vector<std::string> expected{"req_1:1"};
  for (uint64_t seq = 2; seq <= 21; ++seq) {
    w.until_waiting();
    EXPECT_TRUE(w.pipe.deliver({numbered(ragtor::make_token_event("t" + std::to_string(seq)), seq)}));
    expected.push_back("req_1:" + std::to_string(seq));
  }
  // Every token went out from this thread, each granting its credit once
  // (and `start`, written by the writer, once).
  EXPECT_EQ(w.direct_writes(), 20u);
  EXPECT_EQ(w.written.load(), 21);
  w.until_waiting();
  auto res = w.end_with_done(22);
  expected.push_back("req_1:22");
  EXPECT_EQ(w.direct_writes(), 20u) << "done goes through the writer, which ends the body";
  ASSERT_TRUE(w.result.has_value());
  EXPECT_TRUE(*w.result);
  EXPECT_EQ(ids_of(res.body()), expected);
  EXPECT_LT(res.body().find("\"t2\""), res.body().find("\"t21\""));
}

TEST(sse_writer, batches_close_after_a_write_go_through_the_writer) {
  // However long the writer has waited, a batch within `direct_after` of
  // the last write is the writer's to write (with what else came).
  threaded_writer w{{numbered(ragtor::make_start_event(), 1)}, std::chrono::hours{1}};
  std::vector<std::string> expected{"req_1:1"};
  for (uint64_t seq = 2; seq <= 6; ++seq) {
    w.until_waiting();
    EXPECT_TRUE(w.pipe.deliver({numbered(ragtor::make_token_event("t" + std::to_string(seq)), seq)}));
    expected.push_back("req_1:" + std::to_string(seq));
  }
  auto res = w.end_with_done(7);
  expected.push_back("req_1:7");
  EXPECT_EQ(w.direct_writes(), 0u);
  EXPECT_EQ(ids_of(res.body()), expected);
}

TEST(sse_writer, what_the_socket_does_not_take_the_writer_writes_first_in_order) {
  threaded_writer w{{numbered(ragtor::make_start_event(), 1)}};
  // Tokens far larger than the socket's buffer, while the client does not
  // read: the first direct write leaves most of its chunk to the writer,
  // and the next batches queue behind it in the channel.
  const size_t big = 8u << 20;
  w.until_waiting();
  std::vector<std::string> expected{"req_1:1"};
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    EXPECT_TRUE(w.pipe.deliver(
        {numbered(ragtor::make_token_event(std::string(big, static_cast<char>('a' + seq))), seq)}));
    expected.push_back("req_1:" + std::to_string(seq));
  }
  auto res = w.end_with_done(5);
  expected.push_back("req_1:5");
  ASSERT_TRUE(w.result.has_value());
  EXPECT_TRUE(*w.result);
  EXPECT_EQ(w.direct_writes(), 0u);
  // Credit goes back once per batch written before the write that ends the
  // body (as for any batch): start's, the token the direct write began,
  // and those of the other two the writer wrote before `done` came, which
  // depends on when it looked.
  EXPECT_GE(w.written.load(), 2);
  EXPECT_LE(w.written.load(), 4);
  auto& body = res.body();
  EXPECT_EQ(ids_of(body), expected);
  for (char c : {'c', 'd', 'e'}) {
    auto at = body.find(std::string(1, '"') + std::string(64, c));
    ASSERT_NE(at, std::string::npos) << c;
    EXPECT_EQ(body.find_first_not_of(c, at + 1) - at - 1, big) << c << ": the token whole";
  }
}

}  // namespace
