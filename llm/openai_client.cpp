#include "llm/openai_client.hpp"

#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "llm/base_url.hpp"
#include "protocol/metrics.hpp"

namespace ragtor::llm {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string_view to_string(failure f) {
  switch (f) {
    case failure::connect:
      return "connect";
    case failure::timeout_connect:
      return "timeout_connect";
    case failure::timeout_first_token:
      return "timeout_first_token";
    case failure::timeout_idle:
      return "timeout_idle";
    case failure::timeout_total:
      return "timeout_total";
    case failure::http_status:
      return "http_status";
    case failure::protocol:
      return "protocol";
    case failure::cancelled:
      return "cancelled";
    case failure::overloaded:
      return "overloaded";
  }
  return "unknown";
}

namespace {

constexpr auto tuple_awaitable = net::as_tuple(net::use_awaitable);
// The client runs its calls on one I/O thread, so a call needs no strand:
// its handlers never run at once, and the strand's lock and reference
// counts on every completion were a few per cent of a turn's CPU.
using executor_type = net::io_context::executor_type;

struct connection {
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  // The request was written by the caller's thread (openai_client::impl::
  // send_early): what of it the socket did not take yet.
  bool sent_early = false;
  std::string unsent;

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  void close() {
    boost::system::error_code ec;
    lowest().socket().close(ec);
  }
};

// The outcome of one attempt of a call.
struct attempt {
  bool ok = false;
  llm_error err;
  bool retriable = false;
  std::optional<std::chrono::milliseconds> retry_after;
};

}  // namespace

// One call: its executor (the client's one I/O thread), cancellation and
// the guarantee that exactly one final callback runs.
struct call_state : call_handle, std::enable_shared_from_this<call_state> {
  explicit call_state(executor_type e) : exec(std::move(e)) {}

  executor_type exec;
  std::atomic<bool> finished{false};
  bool cancelled = false;              // I/O thread only
  connection* active = nullptr;        // I/O thread only
  net::steady_timer* timer = nullptr;  // I/O thread only (backoff)
  std::function<void(llm_error)> on_cancel;

  // True for the first caller: it owns the final callback.
  bool finish() { return !finished.exchange(true); }

  void cancel() override {
    net::post(exec, [self = shared_from_this()] { self->do_cancel(); });
  }

  void do_cancel() {
    if (cancelled)
      return;
    cancelled = true;
    if (active)
      active->close();
    if (timer)
      timer->cancel();
    if (finish() && on_cancel) {
      llm_error e;
      e.kind = failure::cancelled;
      e.message = "cancelled";
      on_cancel(std::move(e));
    }
  }
};

struct openai_client::impl : std::enable_shared_from_this<impl> {
  endpoint_config cfg;
  base_url url;
  net::io_context ioc{1};
  ssl::context ssl_ctx{ssl::context::tls_client};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::thread thread;

  // Callers' threads start calls: `mx` guards the list of calls.
  std::mutex mx;
  // Every call, for the destructor to cancel; expired entries are swept
  // when the list has doubled since the last sweep, so a new call costs
  // O(1) amortised however many are open (10,000 streams: issue 20).
  std::vector<std::weak_ptr<call_state>> calls;
  size_t sweep_at = 64;
  // The pooled connections: taken by the I/O thread, and by a caller's
  // thread that writes its request itself (send_early).
  std::mutex idle_mx;
  std::vector<std::unique_ptr<connection>> idle;
  // The I/O thread only: the jitter of retries and descriptor waits.
  std::mt19937_64 rng{std::random_device{}()};

  explicit impl(endpoint_config c) : cfg(std::move(c)) {
    auto u = parse_base_url(cfg.base_url);
    if (!u)
      throw std::invalid_argument("invalid base_url \"" + cfg.base_url
                                  + "\" (expected http://host[:port]/path or https://...)");
    url = std::move(*u);
    if (url.tls) {
      ssl_ctx.set_default_verify_paths();
      if (!cfg.ca_file.empty())
        ssl_ctx.load_verify_file(cfg.ca_file);
      ssl_ctx.set_verify_mode(cfg.verify_tls ? ssl::verify_peer : ssl::verify_none);
    }
  }

  std::shared_ptr<call_state> new_call() {
    auto st = std::make_shared<call_state>(ioc.get_executor());
    std::lock_guard lock{mx};
    if (calls.size() >= sweep_at) {
      std::erase_if(calls, [](auto& w) { return w.expired(); });
      sweep_at = std::max<size_t>(64, 2 * calls.size());
    }
    calls.push_back(st);
    return st;
  }

  std::unique_ptr<connection> take_idle() {
    std::lock_guard lock{idle_mx};
    if (idle.empty())
      return nullptr;
    auto c = std::move(idle.back());
    idle.pop_back();
    return c;
  }

  void put_idle(std::unique_ptr<connection> c) {
    std::lock_guard lock{idle_mx};
    if (idle.size() < cfg.max_idle_connections)
      idle.push_back(std::move(c));
  }

  // On the caller's thread: a pooled plain connection with the streamed
  // chat request for `body` written to it at once, without waiting for
  // the I/O thread to wake (one thread hand-off less before the model
  // sees the request: docs/performance.md). Nothing pooled, or TLS: none.
  // The socket is this call's alone from take_idle() on, with no
  // operation pending, so one non-blocking send() from here is safe; what
  // it did not take (or all, when it failed: a connection the server
  // closed meets that on the I/O thread and is retried fresh) is written
  // by the I/O thread.
  std::unique_ptr<connection> send_early(const std::string& body, std::string_view request_id) {
    if (url.tls)
      return nullptr;
    auto c = take_idle();
    if (!c)
      return nullptr;
    auto req = make_request("/chat/completions", body, true, request_id);
    http::request_serializer<http::string_body> sr{req};
    beast::error_code ec;
    while (!ec && !sr.is_done())
      sr.next(ec, [&](beast::error_code&, const auto& buffers) {
        for (auto b : beast::buffers_range_ref(buffers))
          c->unsent.append(static_cast<const char*>(b.data()), b.size());
        sr.consume(beast::buffer_bytes(buffers));
      });
    if (ec)
      c->unsent.clear();  // the I/O thread writes the request as usual
    else
      c->sent_early = true;
    if (c->sent_early) {
      auto n = ::send(c->plain->socket().native_handle(), c->unsent.data(), c->unsent.size(),
                      MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        c->unsent.erase(0, static_cast<size_t>(n));
    }
    return c;
  }

  std::chrono::milliseconds backoff(int attempt_no) {
    auto cap = std::min<int64_t>(cfg.backoff_max.count(), cfg.backoff_base.count()
                                                              << std::min(attempt_no, 20));
    std::uniform_int_distribution<int64_t> d(0, std::max<int64_t>(cap, 0));
    return std::chrono::milliseconds{d(rng)};
  }

  http::request<http::string_body> make_request(std::string_view path, std::string body,
                                                bool stream,
                                                std::string_view request_id = {}) const {
    http::request<http::string_body> req{http::verb::post, url.prefix + std::string{path}, 11};
    bool default_port = (url.tls && url.port == "443") || (!url.tls && url.port == "80");
    auto host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
    req.set(http::field::host, default_port ? host : host + ":" + url.port);
    req.set(http::field::user_agent, "ragtor");
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, stream ? "text/event-stream" : "application/json");
    if (!cfg.api_key.empty())
      req.set(http::field::authorization, "Bearer " + cfg.api_key);
    // (Request ids are checked where they enter, is_valid_id; a header
    // value with a control character is still never sent.)
    if (!request_id.empty() && std::all_of(request_id.begin(), request_id.end(), [](char c) {
          return c > ' ' && c < 0x7f;
        }))
      req.set("X-Request-Id", request_id);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  // Which timeout fired, given the phase deadline and the total deadline.
  static failure timeout_kind(clock_type::time_point phase_deadline,
                              clock_type::time_point total_deadline, failure phase) {
    return total_deadline <= phase_deadline ? failure::timeout_total : phase;
  }

  static bool out_of_descriptors(const boost::system::error_code& ec) {
    return ec == boost::system::errc::too_many_files_open
           || ec == boost::system::errc::too_many_files_open_in_system;
  }

  // Opens `sock` for `protocol`. With no descriptor free (the open-file
  // limit reached, as when every client stream holds one) it waits for one
  // — streams that end free theirs — until `deadline`: a shortage here is
  // a queue, not the model server's failure, so the connect timeout starts
  // only once the socket is open.
  net::awaitable<boost::system::error_code> open_socket(call_state& st, tcp::socket& sock,
                                                        tcp protocol,
                                                        clock_type::time_point deadline) {
    std::optional<clock_type::time_point> since;  // when this connect began to wait
    for (;;) {
      boost::system::error_code ec;
      sock.close(ec);
      sock.open(protocol, ec);
      if (!out_of_descriptors(ec) || st.cancelled)
        co_return ec;
      auto wait = descriptor_wait();
      auto now = clock_type::now();
      if (now + wait >= deadline)
        co_return ec;
      if (!since) {
        since = now;
        metrics::global().llm_descriptor_waits.inc();
      }
      if (cfg.on_descriptor_wait)
        cfg.on_descriptor_wait(std::chrono::duration_cast<std::chrono::milliseconds>(now - *since));
      net::steady_timer timer{co_await net::this_coro::executor};
      timer.expires_after(wait);
      st.timer = &timer;
      co_await timer.async_wait(tuple_awaitable);
      st.timer = nullptr;
      if (st.cancelled)
        co_return net::error::operation_aborted;
    }
  }

  // Connects `c` to the first of `endpoints` that accepts, each within the
  // connect timeout (`phase` is set to the last one's deadline). It opens
  // each socket itself: asio's range connect reports a socket it could not
  // open as operation_aborted, which hid "too many open files" (issue 20).
  net::awaitable<boost::system::error_code> connect_any(call_state& st, connection& c,
                                                        const tcp::resolver::results_type& endpoints,
                                                        clock_type::time_point total_deadline,
                                                        clock_type::time_point& phase) {
    boost::system::error_code ec = net::error::host_not_found;
    for (const auto& entry : endpoints) {
      ec = co_await open_socket(st, c.lowest().socket(), entry.endpoint().protocol(),
                                total_deadline);
      if (out_of_descriptors(ec) || st.cancelled)
        co_return ec;
      if (ec)
        continue;
      phase = clock_type::now() + cfg.connect_timeout;
      c.lowest().expires_at(std::min(phase, total_deadline));
      std::tie(ec) = co_await c.lowest().async_connect(entry.endpoint(), tuple_awaitable);
      if (!ec || ec == beast::error::timeout || st.cancelled)
        co_return ec;
    }
    co_return ec;
  }

  // 10-40 ms, jittered so that waiting calls do not retry in step.
  std::chrono::milliseconds descriptor_wait() {
    return std::chrono::milliseconds{std::uniform_int_distribution<int64_t>(10, 40)(rng)};
  }

  net::awaitable<std::pair<std::unique_ptr<connection>, llm_error>> connect(
      call_state& st, clock_type::time_point total_deadline) {
    auto ex = co_await net::this_coro::executor;
    llm_error err;
    err.kind = failure::connect;
    tcp::resolver resolver{ex};
    auto [rec, results] = co_await resolver.async_resolve(url.host, url.port, tuple_awaitable);
    if (rec) {
      err.message = "cannot resolve " + url.host + ": " + rec.message();
      co_return std::pair{nullptr, err};
    }
    auto c = std::make_unique<connection>();
    if (url.tls) {
      c->tls.emplace(ex, ssl_ctx);
      if (!SSL_set_tlsext_host_name(c->tls->native_handle(), url.host.c_str())) {
        err.message = "cannot set TLS server name";
        co_return std::pair{nullptr, err};
      }
      if (cfg.verify_tls)
        c->tls->set_verify_callback(ssl::host_name_verification(url.host));
    } else {
      c->plain.emplace(ex);
    }
    auto phase = clock_type::now() + cfg.connect_timeout;
    st.active = c.get();
    auto cec = co_await connect_any(st, *c, results, total_deadline, phase);
    if (!cec && url.tls) {
      auto [hec] = co_await c->tls->async_handshake(ssl::stream_base::client, tuple_awaitable);
      cec = hec;
    }
    st.active = nullptr;
    if (cec) {
      if (cec == beast::error::timeout)
        err.kind = timeout_kind(phase, total_deadline, failure::timeout_connect);
      err.message = "cannot connect to " + url.host + ":" + url.port + ": " + cec.message();
      co_return std::pair{nullptr, err};
    }
    boost::system::error_code ignored;
    c->lowest().socket().set_option(tcp::no_delay{true}, ignored);
    co_return std::pair{std::move(c), llm_error{}};
  }

  // Sends the request and reads the response header. `fresh` tells
  // whether the connection was just opened (a pooled one may have been
  // closed by the server meanwhile).
  template <class Stream, class Parser>
  net::awaitable<boost::system::error_code> send_and_read_header(
      Stream& s, connection& c, http::request<http::string_body>& req, Parser& p,
      clock_type::time_point deadline) {
    c.lowest().expires_at(deadline);
    if (c.sent_early) {
      // Written by the caller's thread, but for what the socket did not take.
      c.sent_early = false;
      auto unsent = std::move(c.unsent);
      if (!unsent.empty()) {
        auto [wec, wn] =
            co_await net::async_write(c.lowest(), net::buffer(unsent), tuple_awaitable);
        if (wec)
          co_return wec;
      }
    } else {
      auto [wec, wn] = co_await http::async_write(s, req, tuple_awaitable);
      if (wec)
        co_return wec;
    }
    c.lowest().expires_at(deadline);
    auto [rec, rn] = co_await http::async_read_header(s, c.buffer, p, tuple_awaitable);
    co_return rec;
  }

  // One attempt of a streamed chat completion on connection `c`.
  template <class Stream>
  net::awaitable<attempt> stream_on(Stream& s, connection& c, call_state& st,
                                    http::request<http::string_body>& req,
                                    const stream_callbacks& cb, bool& delivered, std::string& text,
                                    completion& result, bool& header_seen, bool& reusable,
                                    clock_type::time_point total_deadline,
                                    std::string& retry_body) {
    attempt a;
    http::response_parser<http::buffer_body> p;
    p.body_limit(boost::none);
    auto first_deadline = clock_type::now() + cfg.first_token_timeout;
    auto phase = std::min(first_deadline, total_deadline);
    auto ec = co_await send_and_read_header(s, c, req, p, phase);
    // Sent: its copy of the prompt is not needed for the rest of a stream
    // that may last minutes (a retry builds a new request).
    std::string{}.swap(req.body());
    if (ec) {
      a.retriable = true;
      if (ec == beast::error::timeout) {
        a.err.kind = timeout_kind(first_deadline, total_deadline, failure::timeout_first_token);
        a.err.message = "no response within the first-token timeout";
      } else {
        a.err.kind = failure::connect;
        a.err.message = "connection failed before the response: " + ec.message();
      }
      co_return a;
    }
    header_seen = true;
    auto status = p.get().result_int();
    // Deltas are a few hundred bytes: a small buffer keeps the frame of
    // every streaming request (one per open stream) small.
    // 2 KiB holds about ten of them; what does not fit stays in the
    // connection's buffer for the next turn of the loop, without a syscall.
    std::array<char, 2 * 1024> buf;
    if (status < 200 || status > 299) {
      std::string body;
      while (!p.is_done() && body.size() < 64 * 1024) {
        p.get().body().data = buf.data();
        p.get().body().size = buf.size();
        c.lowest().expires_at(phase);
        auto [rec, n] = co_await http::async_read_some(s, c.buffer, p, tuple_awaitable);
        body.append(buf.data(), buf.size() - p.get().body().size);
        if (rec && rec != http::error::need_buffer)
          break;
      }
      a.err.kind = failure::http_status;
      a.err.http_status = static_cast<int>(status);
      a.err.message = "HTTP " + std::to_string(status) + ": " + parse_error_body(body);
      a.retriable = status == 429 || status >= 500;
      if (auto ra = p.get()[http::field::retry_after]; !ra.empty()) {
        try {
          a.retry_after = std::chrono::seconds{std::stoi(std::string{ra})};
        } catch (...) {
        }
      }
      co_return a;
    }
    sse_parser sse;
    bool saw_done = false;
    // The deltas of one socket read go out as one callback (one message to
    // the stream instead of one per token when the model is fast), however
    // many turns of the loop `buf` takes to hold them.
    std::string burst;
    auto flush_burst = [&] {
      if (!burst.empty() && !st.finished)
        cb.on_delta(burst);
      burst.clear();
    };
    while (!p.is_done() && !saw_done) {
      p.get().body().data = buf.data();
      p.get().body().size = buf.size();
      auto phase_deadline = delivered ? clock_type::now() + cfg.idle_timeout : first_deadline;
      c.lowest().expires_at(std::min(phase_deadline, total_deadline));
      auto before = c.buffer.size();
      auto room = std::max<size_t>(512, c.buffer.capacity() - before);  // what Beast reads at most
      auto [rec, n] = co_await http::async_read_some(s, c.buffer, p, tuple_awaitable);
      // A read that filled the connection's buffer left more in the socket:
      // the model writes faster than one read takes. The buffer doubles (to
      // 16 KiB) so that one read takes a burst; a slow stream's reads never
      // fill it, and its buffer stays at the 512 bytes Beast starts with.
      if (!rec && n + c.buffer.size() >= before + room && c.buffer.capacity() < 16 * 1024)
        c.buffer.reserve(std::min<size_t>(16 * 1024, 2 * std::max<size_t>(512, c.buffer.capacity())));
      // Beast's read returns after one chunk (an eager parser would instead
      // wait for the next chunk's header): the chunks the read brought too
      // are parsed here, as far as `buf` holds, so the events a fast model
      // wrote together reach the stream as one delta and one SSE event.
      while (!rec && !p.is_done() && c.buffer.size() > 0 && p.get().body().size > 0) {
        beast::error_code pec;
        auto used = p.put(c.buffer.data(), pec);
        c.buffer.consume(used);
        if (pec == http::error::need_more || (!pec && used == 0))
          break;  // a chunk not read whole yet: the next read
        rec = pec;
      }
      bool more = rec == http::error::need_buffer;  // `buf` is full, more is read already
      if (more)
        rec = {};
      auto got = buf.size() - p.get().body().size;
      std::string_view unread{buf.data(), got}, data;
      while (sse.next(unread, data)) {
        if (st.cancelled)
          co_return a;
        if (data == "[DONE]") {
          saw_done = true;
          break;
        }
        auto chunk = parse_stream_chunk(data);
        if (!chunk || !chunk->error.empty()) {
          flush_burst();
          a.err.kind = failure::protocol;
          if (chunk)
            a.err.message = "the model reported an error mid-stream: " + chunk->error;
          else
            a.err.message = "malformed stream chunk: " + std::string{data.substr(0, 200)};
          a.retriable = false;
          co_return a;
        }
        if (!chunk->delta.empty()) {
          if (!delivered)  // no retry after the first token: the body is not needed again
            std::string{}.swap(retry_body);
          delivered = true;
          text += chunk->delta;
          burst += chunk->delta;
        }
        if (!chunk->finish_reason.empty())
          result.finish_reason = chunk->finish_reason;
        if (chunk->tokens)
          result.tokens = *chunk->tokens;
      }
      if (st.cancelled)
        co_return a;
      // Held only while `buf` filled before the read was all parsed: the
      // rest is in the connection's buffer, and the next turn parses it
      // without a read unless its last event is not all there yet (then
      // the read waits for the rest of an event already being written).
      if (!more || saw_done || rec)
        flush_burst();
      if (rec && !saw_done) {
        a.retriable = !delivered;
        if (rec == beast::error::timeout) {
          a.err.kind =
              timeout_kind(phase_deadline, total_deadline,
                           delivered ? failure::timeout_idle : failure::timeout_first_token);
          a.err.message = delivered ? "the model stalled mid-answer" : "no first token in time";
        } else {
          a.err.kind = failure::protocol;
          a.err.message = "connection lost mid-stream: " + rec.message();
        }
        co_return a;
      }
    }
    flush_burst();
    if (!saw_done && result.finish_reason.empty()) {
      a.err.kind = failure::protocol;
      a.err.message = "the stream ended without [DONE]";
      a.retriable = !delivered;
      co_return a;
    }
    // Finish the chunked body so the connection can be reused.
    while (saw_done && !p.is_done()) {
      p.get().body().data = buf.data();
      p.get().body().size = buf.size();
      c.lowest().expires_after(std::chrono::seconds(2));
      auto [rec, n] = co_await http::async_read_some(s, c.buffer, p, tuple_awaitable);
      if (rec && rec != http::error::need_buffer)
        break;
    }
    reusable = p.is_done() && p.get().keep_alive();
    result.text = std::move(text);
    if (result.finish_reason.empty())
      result.finish_reason = "stop";
    a.ok = true;
    co_return a;
  }

  // One attempt of a non-streaming request; the body on success.
  template <class Stream>
  net::awaitable<attempt> unary_on(Stream& s, connection& c, http::request<http::string_body>& req,
                                   std::string& body_out, bool& header_seen, bool& reusable,
                                   clock_type::time_point total_deadline) {
    attempt a;
    http::response_parser<http::string_body> p;
    p.body_limit(256u << 20);
    auto first_deadline = clock_type::now() + cfg.first_token_timeout;
    auto phase = std::min(first_deadline, total_deadline);
    auto ec = co_await send_and_read_header(s, c, req, p, phase);
    if (!ec) {
      header_seen = true;
      c.lowest().expires_at(phase);
      auto [rec, n] = co_await http::async_read(s, c.buffer, p, tuple_awaitable);
      ec = rec;
    }
    if (ec) {
      a.retriable = true;
      if (ec == beast::error::timeout) {
        a.err.kind = timeout_kind(first_deadline, total_deadline, failure::timeout_first_token);
        a.err.message = "no complete response in time";
      } else {
        a.err.kind = header_seen ? failure::protocol : failure::connect;
        a.err.message = "connection failed: " + ec.message();
      }
      co_return a;
    }
    auto status = p.get().result_int();
    if (status < 200 || status > 299) {
      a.err.kind = failure::http_status;
      a.err.http_status = static_cast<int>(status);
      a.err.message = "HTTP " + std::to_string(status) + ": " + parse_error_body(p.get().body());
      a.retriable = status == 429 || status >= 500;
      if (auto ra = p.get()[http::field::retry_after]; !ra.empty()) {
        try {
          a.retry_after = std::chrono::seconds{std::stoi(std::string{ra})};
        } catch (...) {
        }
      }
      co_return a;
    }
    reusable = p.get().keep_alive();
    body_out = std::move(p.get().body());
    a.ok = true;
    co_return a;
  }

  // Runs attempts with retries. `one(conn, header_seen, reusable)` is one
  // attempt on a connection; `can_retry()` says whether retrying is still
  // allowed (false once a delta was delivered).
  // `early`: a pooled connection the request was written to already
  // (send_early), for the first attempt.
  template <class One, class CanRetry>
  net::awaitable<std::optional<llm_error>> with_retries(call_state& st, One one, CanRetry can_retry,
                                                        clock_type::time_point total_deadline,
                                                        std::unique_ptr<connection> early = {}) {
    auto ex = co_await net::this_coro::executor;
    int attempts = 0;
    for (;;) {
      ++attempts;
      attempt a;
      // A pooled connection the server closed meanwhile fails before any
      // response byte: then try once more on a fresh connection for free.
      for (int fresh_try = 0; fresh_try < 2; ++fresh_try) {
        auto conn = fresh_try > 0 ? nullptr : early ? std::move(early) : take_idle();
        bool pooled = conn != nullptr;
        if (!conn) {
          auto [c, err] = co_await connect(st, total_deadline);
          if (!c) {
            a = attempt{};
            a.err = err;
            a.retriable = true;
            break;
          }
          conn = std::move(c);
        }
        if (st.cancelled) {
          conn->close();  // a request written early must not be answered
          co_return std::nullopt;
        }
        st.active = conn.get();
        bool header_seen = false, reusable = false;
        a = co_await one(*conn, header_seen, reusable);
        st.active = nullptr;
        if (st.cancelled)
          co_return std::nullopt;
        if (a.ok && reusable)
          put_idle(std::move(conn));
        if (a.ok || !pooled || header_seen)
          break;
      }
      if (a.ok)
        co_return std::nullopt;
      if (st.cancelled)
        co_return std::nullopt;
      a.err.attempts = attempts;
      if (!a.retriable || !can_retry() || attempts > cfg.max_retries
          || clock_type::now() >= total_deadline)
        co_return a.err;
      auto wait = a.retry_after ? std::min(*a.retry_after, cfg.backoff_max) : backoff(attempts - 1);
      net::steady_timer timer{ex};
      timer.expires_after(wait);
      st.timer = &timer;
      co_await timer.async_wait(tuple_awaitable);
      st.timer = nullptr;
      if (st.cancelled)
        co_return std::nullopt;
    }
  }

  net::awaitable<void> run_stream(std::shared_ptr<call_state> st, std::string body,
                                  stream_callbacks cb, std::unique_ptr<connection> early,
                                  std::string request_id) {
    // No shared_from_this: the client's destructor joins the I/O thread
    // before the impl goes away, and frames left in the io_context must not
    // keep it alive.
    auto total_deadline = clock_type::now() + cfg.total_timeout;
    bool delivered = false;
    std::string text;
    completion result;
    std::optional<llm_error> err;
    try {
      err = co_await with_retries(
          *st,
          [&](connection& c, bool& header_seen, bool& reusable) -> net::awaitable<attempt> {
            // Built only when it is not on the wire already.
            auto req = c.sent_early ? http::request<http::string_body>{}
                                    : make_request("/chat/completions", body, true, request_id);
            text.clear();
            result = completion{};
            if (c.tls)
              co_return co_await stream_on(*c.tls, c, *st, req, cb, delivered, text, result,
                                           header_seen, reusable, total_deadline, body);
            co_return co_await stream_on(*c.plain, c, *st, req, cb, delivered, text, result,
                                         header_seen, reusable, total_deadline, body);
          },
          [&] { return !delivered; }, total_deadline, std::move(early));
    } catch (const std::exception& e) {
      err = llm_error{failure::protocol, 0, std::string{"client error: "} + e.what(), delivered};
    }
    if (st->cancelled)
      co_return;
    if (err) {
      err->after_first_token = delivered;
      if (st->finish())
        cb.on_error(std::move(*err));
    } else if (st->finish()) {
      cb.on_done(std::move(result));
    }
  }

  net::awaitable<void> run_unary(std::shared_ptr<call_state> st, std::string path, std::string body,
                                 std::function<void(std::variant<std::string, llm_error>)> cb) {
    // No shared_from_this: the client's destructor joins the I/O thread
    // before the impl goes away, and frames left in the io_context must not
    // keep it alive.
    auto total_deadline = clock_type::now() + cfg.total_timeout;
    std::string out;
    std::optional<llm_error> err;
    try {
      err = co_await with_retries(
          *st,
          [&](connection& c, bool& header_seen, bool& reusable) -> net::awaitable<attempt> {
            auto req = make_request(path, body, false);
            if (c.tls)
              co_return co_await unary_on(*c.tls, c, req, out, header_seen, reusable,
                                          total_deadline);
            co_return co_await unary_on(*c.plain, c, req, out, header_seen, reusable,
                                        total_deadline);
          },
          [] { return true; }, total_deadline);
    } catch (const std::exception& e) {
      err = llm_error{failure::protocol, 0, std::string{"client error: "} + e.what()};
    }
    if (st->cancelled || !st->finish())
      co_return;
    if (err)
      cb(std::move(*err));
    else
      cb(std::move(out));
  }
};

openai_client::openai_client(endpoint_config cfg)
    : impl_(std::make_shared<impl>(std::move(cfg))) {
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->thread = std::thread{[i = impl_.get()] {
    pthread_setname_np(pthread_self(), "llm-io");
    i->ioc.run();
  }};
}

openai_client::~openai_client() {
  std::vector<std::shared_ptr<call_state>> live;
  {
    std::lock_guard lock{impl_->mx};
    for (auto& w : impl_->calls)
      if (auto s = w.lock())
        live.push_back(std::move(s));
  }
  for (auto& s : live)
    s->cancel();
  impl_->work.reset();
  // Give cancellations a moment to run, then stop whatever is left.
  net::post(impl_->ioc, [i = impl_.get()] {
    std::lock_guard lock{i->idle_mx};
    for (auto& c : i->idle)
      c->close();
    i->idle.clear();
  });
  impl_->ioc.stop();
  impl_->thread.join();
}

const endpoint_config& openai_client::config() const {
  return impl_->cfg;
}

std::shared_ptr<call_handle> openai_client::stream_chat(chat_params p, stream_callbacks cb,
                                                        std::string request_id) {
  return stream_chat_body(build_chat_body(impl_->cfg.model, p, true), std::move(cb),
                          std::move(request_id));
}

std::shared_ptr<call_handle> openai_client::stream_chat_body(std::string body, stream_callbacks cb,
                                                             std::string request_id) {
  auto st = impl_->new_call();
  st->on_cancel = cb.on_error;
  auto early = impl_->send_early(body, request_id);
  net::co_spawn(st->exec,
                impl_->run_stream(st, std::move(body), std::move(cb), std::move(early),
                                  std::move(request_id)),
                net::detached);
  return st;
}

namespace {

// Starts a non-streaming POST to `path`; `parse` turns the response body
// into the caller's result (a value or an llm_error).
template <class Result, class Parse>
std::shared_ptr<call_handle> post_unary(openai_client::impl& im, std::string path,
                                        std::string body, Parse parse,
                                        std::function<void(Result)> cb) {
  auto st = im.new_call();
  st->on_cancel = [cb](llm_error e) { cb(std::move(e)); };
  net::co_spawn(st->exec,
                im.run_unary(st, std::move(path), std::move(body),
                             [cb, parse](std::variant<std::string, llm_error> r) {
                               if (auto* e = std::get_if<llm_error>(&r))
                                 return cb(std::move(*e));
                               cb(parse(std::get<std::string>(r)));
                             }),
                net::detached);
  return st;
}

}  // namespace

std::shared_ptr<call_handle> openai_client::chat(chat_params p,
                                                 std::function<void(chat_result)> cb) {
  return post_unary<chat_result>(
      *impl_, "/chat/completions", build_chat_body(impl_->cfg.model, p, false),
      [](const std::string& body) -> chat_result {
        auto parsed = parse_completion(body);
        if (!parsed)
          return llm_error{failure::protocol, 0, "malformed completion response"};
        return completion{std::move(parsed->text),
                          parsed->finish_reason.empty() ? "stop" : std::move(parsed->finish_reason),
                          parsed->tokens, std::move(parsed->tool_calls)};
      },
      std::move(cb));
}

std::shared_ptr<call_handle> openai_client::embed(std::vector<std::string> inputs,
                                                  std::function<void(embed_result)> cb) {
  auto count = inputs.size();
  return post_unary<embed_result>(
      *impl_, "/embeddings", build_embeddings_body(impl_->cfg.model, inputs),
      [count](const std::string& body) -> embed_result {
        auto parsed = parse_embeddings(body);
        if (!parsed || parsed->size() != count)
          return llm_error{failure::protocol, 0, "malformed embeddings response"};
        return std::move(*parsed);
      },
      std::move(cb));
}

std::shared_ptr<call_handle> openai_client::rerank(std::string query,
                                                   std::vector<std::string> documents,
                                                   std::function<void(rerank_result)> cb) {
  auto count = documents.size();
  return post_unary<rerank_result>(
      *impl_, "/rerank", build_rerank_body(impl_->cfg.model, query, documents, count),
      [count](const std::string& body) -> rerank_result {
        auto parsed = parse_rerank(body, count);
        if (!parsed)
          return llm_error{failure::protocol, 0, "malformed rerank response"};
        return std::move(*parsed);
      },
      std::move(cb));
}

embed_result openai_client::embed_sync(std::vector<std::string> inputs) {
  std::promise<embed_result> done;
  auto f = done.get_future();
  embed(std::move(inputs), [&done](embed_result r) { done.set_value(std::move(r)); });
  return f.get();
}

}  // namespace ragtor::llm
