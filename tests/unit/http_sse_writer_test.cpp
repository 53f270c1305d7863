// The SSE writer over a real loopback socket: whatever is queued is written
// together (header, `retry:`, several batches, the end of the body), and
// what the client reads is always a valid chunked HTTP response carrying
// every event in order (Beast's parser reads it back).
#include <gtest/gtest.h>

#include <optional>
#include <string>
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
  ragtor::http::event_channel ch{ioc.get_executor(), 64};
  for (auto& b : before)
    EXPECT_TRUE(ch.try_send(boost::system::error_code{}, std::move(b)));
  exchange_result out;
  size_t next_later = 0;
  ragtor::http::sse_timing timing{std::chrono::seconds{30}, std::chrono::seconds{30}};
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        out.writer_result = co_await ragtor::http::write_sse(server, ch, timing, "req_1", [&] {
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
  ragtor::http::event_channel ch{ioc.get_executor(), 4};
  ch.try_send(boost::system::error_code{}, event_batch{numbered(ragtor::make_start_event(), 1)});
  std::optional<bool> result;
  ragtor::http::sse_timing timing{std::chrono::seconds{30}, std::chrono::seconds{30}};
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        result = co_await ragtor::http::write_sse(server, ch, timing, "req_1", [&] {
          ch.cancel();  // the client went away (as watch_disconnect does)
          ch.close();
        });
      },
      net::detached);
  ioc.run();
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(*result);
}

}  // namespace
