#include "actors/llm/openai_llm.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"
#include "actors/admin/measured.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <variant>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "llm/citation_parser.hpp"
#include "llm/openai_client.hpp"
#include "llm/prompt_builder.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/token_count.hpp"

namespace ragtor {

namespace {
const log::component lg{"llm"};
}  // namespace

namespace {

// A generation waiting for a concurrency slot.
struct pending {
  generation_request req;
  token_sink_actor sink;
  caf::typed_response_promise<generation_result> promise;
};

// A completion waiting for a concurrency slot.
struct pending_completion {
  completion_request req;
  caf::typed_response_promise<completion_result> promise;
};

// The answer text of one generation, shared by the client's I/O thread and
// the gateway. Deltas go from the I/O thread through the citation parser
// straight to the stream's sink: one hand-off per socket read instead of two,
// and the gateway is not in the token path. The gateway closes it when the
// call ends — done and error arrive after the last delta — or is cancelled;
// closing flushes the parser, and deltas after it are dropped.
class shown_text {
public:
  shown_text(token_sink_actor sink, std::string request_id,
             std::vector<llm::citation_source> sources)
      : sink_(std::move(sink)), request_id_(std::move(request_id)), citations_(std::move(sources)) {}

  void feed(std::string_view delta) {
    std::lock_guard guard{mu_};
    if (!closed_)
      show(citations_.feed(delta));
  }

  void close() {
    std::lock_guard guard{mu_};
    if (closed_)
      return;
    closed_ = true;
    show(citations_.finish());
  }

  // After close().
  const std::string& visible() const { return visible_; }
  std::vector<citation> citations() const { return citations_.citations(); }

private:
  void show(std::string text) {
    if (text.empty())
      return;
    visible_ += text;
    caf::anon_send(sink_, atom::token_v, request_id_, std::move(text));
  }

  std::mutex mu_;
  bool closed_ = false;
  token_sink_actor sink_;
  std::string request_id_;
  llm::citation_stream_parser citations_;
  std::string visible_;  // text sent to the sink
};

// A generation talking to the model.
struct call {
  caf::typed_response_promise<generation_result> promise;
  std::shared_ptr<llm::call_handle> handle;
  std::shared_ptr<shown_text> shown;
  bool cite = true;  // false: the KB turned citations off; none are reported
  int32_t prompt_tokens = 0;
  bool general = false;
};

// Background work: a conversation summary, which nobody waits for.
bool background_purpose(std::string_view purpose) { return purpose == "summary"; }

// Slots background work may hold at once: all but a quarter of them (at
// least one kept free when there are two or more), so that summaries
// already running never take every slot from the next turn's answer.
size_t background_cap(size_t max_concurrency) {
  return max_concurrency < 2 ? max_concurrency
                             : max_concurrency - std::max<size_t>(1, max_concurrency / 4);
}

struct openai_llm_state {
  static inline const char* name = "openai_llm";
  std::shared_ptr<llm::openai_client> client;
  openai_llm_settings settings;
  std::unordered_map<std::string, call> calls;  // request_id -> call
  // Calls waiting for a slot, in arrival order: generations and
  // completions share the concurrency limit and the queue.
  std::deque<std::variant<pending, pending_completion>> queue;
  // Non-streaming completions in flight.
  struct completion_call {
    std::shared_ptr<llm::call_handle> handle;
    caf::typed_response_promise<completion_result> promise;
    std::string purpose;
    std::string request_id;  // the turn's; "" = none
    bool background = false;  // a summary (counted in background_running)
  };
  std::unordered_map<std::string, completion_call> completions;  // "#n" -> call
  size_t background_running = 0;  // completions in flight that are summaries
  uint64_t next_completion = 0;
  uint64_t generated = 0, failed = 0, cancelled = 0, refused = 0, completed_calls = 0;
  uint64_t prompt_tokens = 0, completion_tokens = 0;

  size_t in_flight() const { return calls.size() + completions.size(); }
  // Whether background work holds every slot it may (background_cap).
  bool background_full() const {
    return background_running >= background_cap(settings.max_concurrency);
  }
  // Forgets a completion in flight (answered or cancelled).
  auto erase_completion(std::unordered_map<std::string, completion_call>::iterator i) {
    if (i->second.background)
      --background_running;
    return completions.erase(i);
  }
  // This gateway's share of ragtor_llm_queue_depth.
  int64_t reported_queue = 0;
  void sync_queue_gauge() {
    auto n = static_cast<int64_t>(queue.size());
    metrics::global().llm_queue_depth.add(n - reported_queue);
    reported_queue = n;
  }

  ~openai_llm_state() {
    metrics::global().llm_queue_depth.add(-reported_queue);
    // Close every upstream connection when the gateway stops.
    for (auto& [id, c] : calls)
      if (c.handle)
        c.handle->cancel();
    for (auto& [id, c] : completions)
      if (c.handle)
        c.handle->cancel();
  }
};

using self_ptr = measured_pointer<llm_actor, openai_llm_state>;

// The evidence's texts move into the citation parser: the prompt is built,
// and the parser's copy is the one the call keeps while it streams.
std::vector<llm::citation_source> sources_of(retrieval_result&& evidence) {
  std::vector<llm::citation_source> out;
  out.reserve(evidence.retrieval_results.size());
  for (auto& item : evidence.retrieval_results)
    out.push_back({std::move(item.doc_id), std::move(item.result_id), std::move(item.title),
                   std::move(item.evidence)});
  return out;
}

std::vector<llm::chat_message> to_chat(const std::vector<llm_message>& msgs) {
  std::vector<llm::chat_message> out;
  for (auto& m : msgs)
    out.push_back({m.role, m.content, m.tool_call_id, m.tool_calls});
  return out;
}

caf::error upstream_error(const openai_llm_settings& s, const upstream_event& ev) {
  auto what = "model \"" + s.model + "\" failed (" + ev.error_kind
              + (ev.http_status ? " " + std::to_string(ev.http_status) : std::string{}) + ")";
  if (!ev.text.empty())
    what += ": " + ev.text;
  if (ev.error_kind == "timeout_connect" || ev.error_kind == "timeout_first_token"
      || ev.error_kind == "timeout_idle" || ev.error_kind == "timeout_total")
    return make_error(errc::timeout, std::move(what));
  return make_error(errc::llm_failed, std::move(what));
}

upstream_event event_of(const llm::llm_error& e) {
  upstream_event ev;
  ev.kind = "error";
  ev.text = e.message;
  ev.error_kind = std::string{llm::to_string(e.kind)};
  ev.http_status = e.http_status;
  ev.after_first_token = e.after_first_token;
  return ev;
}

void start_next(self_ptr self);

// Starts the upstream call of `p` (a slot is free).
void start(self_ptr self, pending p) {
  auto& st = self->state;
  auto id = p.req.request_id;
  // Turns' streams build their calls' bodies themselves (stream_settings::
  // model), side by side on every worker; a request without one (a
  // planner's) gets its prompt built here, one call after another.
  if (p.req.body.empty() && p.req.prompt.empty())
    llm::build_request_prompt(p.req, st.settings.prompt_budget_tokens,
                              st.settings.system_instructions);
  call c;
  c.promise = std::move(p.promise);
  c.prompt_tokens = p.req.prompt_tokens;
  c.general = p.req.general;
  c.cite = p.req.cite;
  c.shown = std::make_shared<shown_text>(std::move(p.sink), id,
                                         p.req.general || !p.req.cite
                                             ? std::vector<llm::citation_source>{}
                                             : sources_of(std::move(p.req.evidence)));
  // Callbacks run on the client's I/O thread: deltas go through the call's
  // shown_text to the stream; the end of the call comes back as a message.
  auto me = llm_actor{self};
  llm::stream_callbacks cb;
  cb.on_delta = [shown = c.shown](std::string_view delta) { shown->feed(delta); };
  cb.on_done = [me, id](llm::completion done) {
    upstream_event ev;
    ev.kind = "done";
    ev.finish_reason = std::move(done.finish_reason);
    ev.usage.prompt_tokens = done.tokens.prompt_tokens;
    ev.usage.completion_tokens = done.tokens.completion_tokens;
    caf::anon_send(me, atom::upstream_v, id, std::move(ev));
  };
  cb.on_error = [me, id](llm::llm_error err) {
    caf::anon_send(me, atom::upstream_v, id, event_of(err));
  };
  auto [it, inserted] = st.calls.emplace(id, std::move(c));
  if (!inserted) {
    // The same request id twice at once: the session never does this.
    p.promise.deliver(make_error(errc::conflict, "request " + id + " is already generating"));
    return;
  }
  // The call carries the turn's request id (X-Request-Id).
  if (p.req.body.empty())
    it->second.handle = st.client->stream_chat(
        llm::request_chat_params(p.req, st.settings.temperature, st.settings.max_tokens),
        std::move(cb), id);
  else
    it->second.handle = st.client->stream_chat_body(std::move(p.req.body), std::move(cb), id);
}

// Closes the call's text (flushing the citation parser to the sink) and
// gives the result.
generation_result result_of(call& c, std::string finish_reason, usage_info usage) {
  c.shown->close();
  generation_result r;
  r.answer = c.shown->visible();
  if (c.cite)
    r.citations = c.shown->citations();
  r.usage = usage;
  if (r.usage.prompt_tokens == 0)
    r.usage.prompt_tokens = c.prompt_tokens;
  if (r.usage.completion_tokens == 0)
    r.usage.completion_tokens = static_cast<int32_t>(approx_tokens(r.answer));
  r.finish_reason = std::move(finish_reason);
  return r;
}

void on_completion(self_ptr self, const std::string& id, upstream_event& ev) {
  auto& st = self->state;
  auto i = st.completions.find(id);
  if (i == st.completions.end())
    return;
  auto& c = i->second;
  if (ev.kind == "done") {
    ++st.completed_calls;
    st.prompt_tokens += ev.usage.prompt_tokens;
    st.completion_tokens += ev.usage.completion_tokens;
    completion_result out;
    out.text = std::move(ev.text);
    out.finish_reason = std::move(ev.finish_reason);
    out.usage = ev.usage;
    out.tool_calls = std::move(ev.tool_calls);
    metrics::global().llm_request(metrics::llm_outcome::ok);
    c.promise.deliver(std::move(out));
  } else {
    ++st.failed;
    metrics::global().llm_request(metrics::llm_outcome::error);
    self->stats().error(c.purpose + " completion: " + ev.error_kind + " " + ev.text);
    lg->warn("llm {}: {} completion failed: {} {}", st.settings.model, c.purpose, ev.error_kind,
                 ev.text);
    c.promise.deliver(upstream_error(st.settings, ev));
  }
  st.erase_completion(i);
  start_next(self);
}

void on_upstream(self_ptr self, const std::string& id, upstream_event& ev) {
  auto& st = self->state;
  if (id.starts_with('#'))
    return on_completion(self, id, ev);
  auto i = st.calls.find(id);
  if (i == st.calls.end())
    return;  // cancelled meanwhile: late events of a closed call
  auto& c = i->second;
  if (ev.kind == "done") {
    ++st.generated;
    auto r = result_of(c, ev.finish_reason.empty() ? "stop" : ev.finish_reason, ev.usage);
    st.prompt_tokens += r.usage.prompt_tokens;
    st.completion_tokens += r.usage.completion_tokens;
    metrics::global().llm_request(metrics::llm_outcome::ok);
    c.promise.deliver(std::move(r));
  } else {
    ++st.failed;
    metrics::global().llm_request(metrics::llm_outcome::error);
    self->stats().error("request " + id + ": " + ev.error_kind + " " + ev.text);
    // What was shown stays shown; the stream stores it as a partial answer.
    c.shown->close();
    lg->warn("llm {}: request {} failed after {} chars: {} {}", st.settings.model, id,
                 c.shown->visible().size(), ev.error_kind, ev.text);
    c.promise.deliver(upstream_error(st.settings, ev));
  }
  st.calls.erase(i);
  start_next(self);
}

void start_completion(self_ptr self, pending_completion p) {
  auto& st = self->state;
  // Request ids of streams never start with '#'.
  auto key = "#" + std::to_string(st.next_completion++);
  llm::chat_params params;
  params.messages = to_chat(p.req.messages);
  params.temperature = p.req.temperature;
  params.max_tokens = p.req.max_tokens;
  params.tools_json = p.req.tools_json;
  params.tool_choice = p.req.tool_choice;
  // The reply arrives on the client's thread and comes back as a
  // message; the promise is delivered on the actor's own thread.
  auto me = llm_actor{self};
  auto& slot = st.completions[key];
  slot.promise = std::move(p.promise);
  slot.purpose = std::move(p.req.purpose);
  slot.request_id = std::move(p.req.request_id);
  slot.background = background_purpose(slot.purpose);
  st.background_running += slot.background;
  slot.handle = st.client->chat(
      std::move(params), [me, key](std::variant<llm::completion, llm::llm_error> r) {
        upstream_event ev;
        if (auto* c = std::get_if<llm::completion>(&r)) {
          ev.kind = "done";
          ev.text = std::move(c->text);
          ev.finish_reason = std::move(c->finish_reason);
          ev.usage.prompt_tokens = c->tokens.prompt_tokens;
          ev.usage.completion_tokens = c->tokens.completion_tokens;
          ev.tool_calls = std::move(c->tool_calls);
        } else {
          ev = event_of(std::get<llm::llm_error>(r));
        }
        caf::anon_send(me, atom::upstream_v, key, std::move(ev));
      });
}

// Whether a queued call is background work.
bool background(const std::variant<pending, pending_completion>& p) {
  auto* c = std::get_if<pending_completion>(&p);
  return c && background_purpose(c->req.purpose);
}

// A freed slot goes to the oldest call somebody waits for (an answer, or
// a turn's routing, rewrite, planning call), and to background work only
// when none is queued and fewer than background_cap run: at the limit, a
// summary of the turn before does not hold up the next turn's answer.
void start_next(self_ptr self) {
  auto& st = self->state;
  while (!st.queue.empty() && st.in_flight() < st.settings.max_concurrency) {
    auto next = std::find_if(st.queue.begin(), st.queue.end(),
                             [](const auto& p) { return !background(p); });
    if (next == st.queue.end()) {
      if (st.background_full())
        break;
      next = st.queue.begin();
    }
    auto p = std::move(*next);
    st.queue.erase(next);
    if (auto* gen = std::get_if<pending>(&p))
      start(self, std::move(*gen));
    else
      start_completion(self, std::move(std::get<pending_completion>(p)));
  }
  st.sync_queue_gauge();
}

// The refusal of a call past max_concurrency running and max_queue waiting.
caf::error at_limit(self_ptr self) {
  auto& st = self->state;
  ++st.refused;
  metrics::global().llm_request(metrics::llm_outcome::overloaded);
  return make_error(errc::overloaded, "model \"" + st.settings.model + "\" is at its limit ("
                                          + std::to_string(st.settings.max_concurrency)
                                          + " running, " + std::to_string(st.settings.max_queue)
                                          + " waiting); retry later");
}

// Whether the queue has room for a call: when it is full, a call somebody
// waits for takes the place of the newest queued summary, which is refused
// as overloaded (the summarizer tries again at a later turn).
bool make_room(self_ptr self, bool foreground) {
  auto& st = self->state;
  if (st.queue.size() < st.settings.max_queue)
    return true;
  if (!foreground)
    return false;
  auto last = std::find_if(st.queue.rbegin(), st.queue.rend(),
                           [](const auto& p) { return background(p); });
  if (last == st.queue.rend())
    return false;
  std::get<pending_completion>(*last).promise.deliver(at_limit(self));
  st.queue.erase(std::next(last).base());
  return true;
}

// Cancels the completions of turn `id`, queued or in flight (their
// upstream connections close now); answers how many.
size_t cancel_completions(self_ptr self, const std::string& id) {
  auto& st = self->state;
  size_t n = 0;
  for (auto q = st.queue.begin(); q != st.queue.end();) {
    auto* c = std::get_if<pending_completion>(&*q);
    if (c && c->req.request_id == id) {
      c->promise.deliver(make_error(errc::cancelled, "the turn was cancelled"));
      q = st.queue.erase(q);
      ++n;
    } else {
      ++q;
    }
  }
  for (auto i = st.completions.begin(); i != st.completions.end();) {
    if (i->second.request_id == id) {
      if (i->second.handle)
        i->second.handle->cancel();
      i->second.promise.deliver(make_error(errc::cancelled, "the turn was cancelled"));
      i = st.erase_completion(i);
      ++n;
    } else {
      ++i;
    }
  }
  st.cancelled += n;
  return n;
}

}  // namespace

llm_actor spawn_openai_llm(caf::actor_system& sys, std::shared_ptr<llm::openai_client> client,
                           openai_llm_settings settings) {
  return sys.spawn([client, settings](self_ptr self) -> llm_actor::behavior_type {
    self->state.client = client;
    self->state.settings = settings;
    self->track("llm", settings.model.empty() ? "openai" : "openai:" + settings.model);
    return {
        [=](atom::generate, generation_request& req,
            token_sink_actor sink) -> caf::result<generation_result> {
          auto& st = self->state;
          auto rp = self->make_response_promise<generation_result>();
          if (st.in_flight() < st.settings.max_concurrency)
            start(self, pending{std::move(req), std::move(sink), rp});
          else if (make_room(self, true))
            st.queue.push_back(pending{std::move(req), std::move(sink), rp});
          else
            rp.deliver(at_limit(self));
          st.sync_queue_gauge();
          return rp;
        },
        [=](atom::cancel, const std::string& id) {
          auto& st = self->state;
          bool freed = cancel_completions(self, id) > 0;
          for (auto q = st.queue.begin(); q != st.queue.end(); ++q) {
            auto* p = std::get_if<pending>(&*q);
            if (p && p->req.request_id == id) {
              generation_result r;
              r.finish_reason = "cancelled";
              p->promise.deliver(std::move(r));
              st.queue.erase(q);
              ++st.cancelled;
              break;
            }
          }
          auto i = st.calls.find(id);
          if (i != st.calls.end()) {
            auto& c = i->second;
            if (c.handle)
              c.handle->cancel();  // closes the upstream socket now
            ++st.cancelled;
            c.promise.deliver(result_of(c, "cancelled", {}));
            st.calls.erase(i);
            freed = true;
            metrics::global().llm_request(metrics::llm_outcome::cancelled);
          }
          if (freed)
            start_next(self);
          st.sync_queue_gauge();
        },
        [=](atom::upstream, const std::string& id, upstream_event& ev) {
          on_upstream(self, id, ev);
        },
        [=](atom::complete, completion_request& req) -> caf::result<completion_result> {
          auto& st = self->state;
          auto rp = self->make_response_promise<completion_result>();
          if (st.in_flight() < st.settings.max_concurrency
              && (!background_purpose(req.purpose) || !st.background_full()))
            start_completion(self, pending_completion{std::move(req), rp});
          else if (make_room(self, !background_purpose(req.purpose)))
            st.queue.push_back(pending_completion{std::move(req), rp});
          else
            rp.deliver(at_limit(self));
          st.sync_queue_gauge();
          return rp;
        },
        [=](atom::tick, const std::string&) {
          // Not used: the model paces itself.
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w              .field("model", st.settings.model)
              .field("processed", st.generated)
              .field("failed", st.failed)
              .field("cancelled", st.cancelled)
              .field("refused", st.refused)
              .field("in_flight", static_cast<uint64_t>(st.in_flight()))
              .field("queued", static_cast<uint64_t>(st.queue.size()))
              .field("background_in_flight", static_cast<uint64_t>(st.background_running))
              .field("prompt_tokens", st.prompt_tokens)
              .field("completion_tokens", st.completion_tokens)
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
