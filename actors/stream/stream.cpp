#include "actors/stream/stream.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"
#include "actors/admin/measured.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

#include <spdlog/spdlog.h>
#include <caf/actor_cast.hpp>
#include <caf/actor_clock.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/pipeline/planner.hpp"
#include "llm/prompt_builder.hpp"
#include "llm/query_rewrite.hpp"
#include "memory/long_term.hpp"
#include "protocol/errc.hpp"
#include "protocol/event_feed.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/kb_json.hpp"
#include "protocol/stream_events.hpp"

namespace ragtor {

namespace {
const log::component lg{"stream"};
}  // namespace

namespace {

enum class phase { routing, history, retrieving, generating, persisting, finished };
constexpr const char* phase_names[] = {"routing",    "history",    "retrieving",
                                       "generating", "persisting", "finished"};
enum class early_search { none, running, answered };

// Timers. A delayed message holds its receiver until it fires, so one long
// timer (the 300 s turn deadline) would keep every finished stream in
// memory for minutes; a short watchdog re-armed only while something is
// pending (the subscriber check, the turn deadline) keeps a finished
// stream at most one period.
constexpr int32_t watchdog = 0;
constexpr int32_t detach_check = 2;

// Appends `ev`, merging consecutive tokens into one event (which carries
// the last one's seq).
template <class Container>
void append_coalesced(Container& events, const stream_event& ev) {
  if (ev.kind == event_kind::token && !events.empty() && events.back().kind == event_kind::token) {
    events.back().data += ev.data;
    events.back().seq = ev.seq;
  } else {
    events.push_back(ev);
  }
}

// One entry of a turn's event log. Consecutive tokens are one entry; `ends`
// holds the length of its text after each of them (seq first_seq + i), so
// a client that saw part of the run is replayed exactly the rest.
struct log_entry {
  stream_event ev;
  uint64_t first_seq = 0;
  std::vector<uint32_t> ends;
};

void append_to_log(std::vector<log_entry>& log, const stream_event& ev) {
  if (ev.kind == event_kind::token && !log.empty() && log.back().ev.kind == event_kind::token) {
    auto& run = log.back();
    run.ev.data += ev.data;
    run.ev.seq = ev.seq;
    run.ends.push_back(static_cast<uint32_t>(run.ev.data.size()));
    return;
  }
  log_entry e{ev, ev.seq, {}};
  if (ev.kind == event_kind::token)
    e.ends.push_back(static_cast<uint32_t>(ev.data.size()));
  log.push_back(std::move(e));
}

// The logged events after seq `after`, tokens coalesced.
std::deque<stream_event> replay_after(const std::vector<log_entry>& log, uint64_t after) {
  std::deque<stream_event> out;
  for (auto& e : log) {
    if (e.ev.seq <= after)
      continue;
    if (e.ev.kind == event_kind::token && e.first_seq <= after) {
      stream_event rest = e.ev;
      rest.data.erase(0, e.ends[after - e.first_seq]);
      out.push_back(std::move(rest));
    } else {
      out.push_back(e.ev);
    }
  }
  return out;
}

struct subscriber {
  event_sink_actor sink;
  // The sink's in-process feed, if it has one: batches go there directly.
  std::shared_ptr<event_feed> feed;
  int32_t credit = 0;  // event batches it can take
  std::deque<stream_event> pending;
  size_t pending_bytes = 0;
  bool got_done = false;
};

struct stream_state {
  static inline const char* name = "stream";
  chat_request req;
  turn_opened opened;
  stream_deps deps;
  stream_settings settings;

  phase ph = phase::routing;
  route_decision route;
  std::vector<stored_message> history;
  std::string summary;                // the conversation summary; "" when none
  std::string core_memory;            // the user's profile; "" when none or incognito
  std::vector<std::string> memories;  // recalled long-term memories
  std::vector<std::string> episodic;  // recalled past turns
  // The summary's state as the context read found it (request_summary).
  std::optional<summary_record> summary_state;
  retrieval_result evidence;
  std::string query;         // what is searched: the question, or its rewrite
  std::string instructions;  // system instructions chosen by a planner ("" = built-in)
  std::string question;      // the question answered, when a planner restated it
  bool need_human_help = false;  // a planner escalated the turn
  std::string escalation_reason;
  std::string answer;  // concatenation of the tokens published
  uint64_t tokens = 0;  // token events published
  // For the latency metrics (real time, whatever the actor clock).
  std::chrono::steady_clock::time_point begun = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_token{};
  generation_result gen;
  std::string message_id;  // the stored assistant message

  // Per-node timing for debug execution logs (DESIGN §5.1, seed 002).
  std::chrono::steady_clock::time_point node_started = std::chrono::steady_clock::now();

  // The first failure ends the turn: code "" = none.
  std::string error_node_logged;  // the execution log that reported it
  std::string error_code;
  std::string error_message;
  bool cancelled = false;
  planner_actor planner;  // while a planner plans this turn

  // Routing and the context reads (window, summary, core memory, memories,
  // episodes) run at once; the turn goes on when all have answered.
  bool routed = false;         // the router answered
  bool route_failed = false;   // ...with an error: the turn already ended
  int context_pending = 0;     // context reads not answered yet
  bool context_joined = false;
  bool history_degraded = false;
  std::chrono::steady_clock::time_point context_started;
  // The search started early (retrieve_early), and its answer until
  // retrieve() takes it.
  early_search early = early_search::none;
  bool awaiting_early = false;  // retrieve() waits for it
  retrieval_result early_result;
  caf::error early_error;

  // Delivery. Every event is also kept (tokens coalesced) so that a
  // subscriber joining late — a client retrying with the same request_id,
  // or re-attaching after it went away — is replayed what it missed.
  uint64_t next_seq = 0;
  std::vector<log_entry> log;
  std::vector<subscriber> subs;
  bool had_subscriber = false;
  bool abandoned = false;  // nobody subscribed in time
  bool done_emitted = false;
  // The last subscriber went away: the turn runs on until this instant
  // for a client to re-attach (server.detach_grace_ms).
  std::optional<caf::actor_clock::time_point> detached_until;
  // When the turn began, on the actor clock (the test coordinator's
  // virtual clock in unit tests), like detached_until.
  caf::actor_clock::time_point started;

  // A turn started before its user message was stored (the session's early
  // start): it routes, reads its context, searches and asks the model while
  // the store commits. Until the store confirms, events wait in `held` (the
  // first published event is `start`, sent only once the message is
  // durable) and the answer is not stored.
  bool durable = true;
  std::vector<stream_event> held;
  bool persist_waiting = false;  // the answer is ready before the message is durable
  // A session's first turn starts before the store says which conversation
  // it is in: until then it routes, reads and searches, but plans nothing
  // (no model call, no flow state) — it may yet be rerun (session.cpp).
  bool plan_waiting = false;
};

using self_ptr = measured_pointer<stream_actor, stream_state>;

void emit(self_ptr self, stream_event ev);

// A phase of the turn before its first token is over
// (ragtor_turn_phase_seconds): the time since the turn began.
void phase_over(self_ptr self, metrics::turn_phase p) {
  metrics::global().phase(
      p, std::chrono::duration<double>(std::chrono::steady_clock::now() - self->state.begun).count());
}

// Starts timing the next node of the turn.
void begin_node(self_ptr self) {
  self->state.node_started = std::chrono::steady_clock::now();
}

// Publishes {node, duration_ms, input, output} for the node that just
// ended (input/output are JSON objects).
void write_node_log(self_ptr self, std::string_view node, std::string_view input,
                    std::string_view output) {
  auto& st = self->state;
  auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - st.node_started)
          .count();
  json_writer w;
  w.begin_object().field("node", node).field("duration_ms", ms);
  w.key("input").raw(input);
  w.key("output").raw(output);
  if (!st.error_code.empty() && st.error_node_logged.empty()) {
    w.key("error").begin_object().field("code", st.error_code).field("message", st.error_message);
    w.end_object();
    st.error_node_logged = std::string{node};
  }
  w.end_object();
  emit(self, stream_event{event_kind::execution_log, w.take(), true});
}

// A node log's input or output: JSON text, or what makes it.
template <class Json>
std::string node_json(Json&& json) {
  if constexpr (std::is_invocable_v<Json>)
    return json();
  else
    return std::string{std::forward<Json>(json)};
}

// With debug on, publishes the log of the node that just ended. Its input
// and output are passed as functions that build them, so that without
// debug (most turns) nothing is built: they were a tenth of a turn's JSON.
template <class Input, class Output>
void log_node(self_ptr self, std::string_view node, Input&& input, Output&& output) {
  if (self->state.req.debug)
    write_node_log(self, node, node_json(std::forward<Input>(input)),
                   node_json(std::forward<Output>(output)));
}

// Publishes a node log a planner recorded (debug only).
void emit_log(self_ptr self, const node_log& l) {
  if (!self->state.req.debug)
    return;
  json_writer w;
  w.begin_object().field("node", l.node).field("duration_ms", l.duration_ms);
  w.key("input").raw(l.input_json);
  w.key("output").raw(l.output_json);
  w.end_object();
  emit(self, stream_event{event_kind::execution_log, w.take(), true});
}

void persist(self_ptr self);
void retrieve(self_ptr self);
void plan(self_ptr self);
std::pair<std::vector<episode_record>, std::vector<memory_record>> turn_memory(self_ptr self);
void cancel_turn(self_ptr self, std::string code, std::string message);
void request_summary(self_ptr self);

// Quits once `done` reached every subscriber (and somebody subscribed).
void maybe_quit(self_ptr self) {
  auto& st = self->state;
  if (!st.done_emitted)
    return;
  if (st.abandoned) {
    self->quit();
    return;
  }
  if (!st.had_subscriber)
    return;
  for (auto& sub : st.subs)
    if (!sub.got_done)
      return;
  // A turn that completed while detached waits out the grace period, so a
  // client re-attaching gets its exact events (a cancelled one is stored
  // and replayed from the store).
  if (st.subs.empty() && st.detached_until && !st.cancelled
      && self->clock().now() < *st.detached_until)
    return;
  self->quit();
}

void flush(self_ptr self, subscriber& sub) {
  if (sub.credit <= 0 || sub.pending.empty())
    return;
  std::vector<stream_event> batch{std::make_move_iterator(sub.pending.begin()),
                                  std::make_move_iterator(sub.pending.end())};
  sub.pending.clear();
  sub.pending_bytes = 0;
  --sub.credit;
  sub.got_done = batch.back().kind == event_kind::done;
  if (!sub.feed)
    return self->send(sub.sink, atom::events_v, std::move(batch));
  // A reader that has gone drops it; its sink's exit removes `sub`.
  sub.feed->hand_over(std::move(batch));
}

// ragtor_turns_total{outcome} of a turn that ends now.
metrics::turn_outcome outcome_of(const stream_state& st) {
  using enum metrics::turn_outcome;
  if (st.error_code.empty())
    return st.cancelled ? cancelled : completed;
  if (st.error_code == "slow_client" || (st.error_code == "cancelled" && st.subs.empty()))
    return client_gone;
  if (st.error_code == "cancelled")
    return cancelled;
  if (st.error_code == "overloaded")
    return overloaded;
  return failed;
}

void emit(self_ptr self, stream_event ev) {
  auto& st = self->state;
  if (!st.durable) {
    st.held.push_back(std::move(ev));
    return;
  }
  ev.seq = ++st.next_seq;
  if (ev.kind == event_kind::token) {
    auto& m = metrics::global();
    auto now = std::chrono::steady_clock::now();
    m.tokens_streamed.inc();
    if (st.last_token == std::chrono::steady_clock::time_point{}) {
      auto ttft = std::chrono::duration<double>(now - st.begun).count();
      m.time_to_first_token.observe(ttft);
      m.phase(metrics::turn_phase::first_token, ttft);
    } else {
      m.inter_token_latency.observe(std::chrono::duration<double>(now - st.last_token).count());
    }
    st.last_token = now;
  }
  bool too_slow = false;
  for (auto& sub : st.subs) {
    sub.pending_bytes += ev.data.size();
    // Coalesce consecutive tokens while the subscriber is behind.
    append_coalesced(sub.pending, ev);
    flush(self, sub);
    too_slow = too_slow || sub.pending_bytes > st.settings.max_pending_bytes;
  }
  append_to_log(st.log, ev);
  if (too_slow && !st.cancelled && st.ph != phase::finished)
    cancel_turn(self, "slow_client", "the client does not read the stream fast enough");
  maybe_quit(self);
}

subscriber* find_subscriber(self_ptr self, const caf::actor_addr& addr) {
  for (auto& sub : self->state.subs)
    if (sub.sink.address() == addr)
      return &sub;
  return nullptr;
}

void fail(self_ptr self, const caf::error& err, std::string_view what) {
  auto& st = self->state;
  if (st.error_code.empty()) {
    auto code = code_of(err);
    st.error_code = std::string{http_error_of(code).code};
    auto msg = error_message(err);
    st.error_message = std::string{what} + (msg.empty() ? "" : ": " + msg);
    lg->warn("stream {}: {} failed: {}", st.req.request_id, what, self->system().render(err));
  }
}

// Results per turn: the KB's top_k, else [retrieval] top_k.
int32_t top_k_of(self_ptr self) {
  auto& st = self->state;
  return st.route.kb.top_k > 0 ? st.route.kb.top_k : st.settings.top_k;
}

// Inputs and outputs of the nodes, as shown in debug execution logs.
std::string route_input(self_ptr self) {
  auto& r = self->state.req;
  return json_strings(
      {{"message", r.message}, {"kb_prefix", r.kb_prefix}, {"agent_type", r.agent_type}});
}

std::string history_input(self_ptr self) {
  auto& st = self->state;
  json_writer w;
  w.begin_object()
      .field("conversation_id", st.opened.conversation_id)
      .field("window", static_cast<int64_t>(st.settings.window))
      .end_object();
  return w.take();
}

std::string retrieve_input(self_ptr self) {
  auto& st = self->state;
  json_writer w;
  w.begin_object()
      .field("worker_name", st.route.worker_name)
      .field("query", st.query)
      .field("top_k", static_cast<int64_t>(top_k_of(self)))
      .field("search_mode", st.route.kb.search_mode)
      .end_object();
  return w.take();
}

std::string retrieve_output(self_ptr self) {
  auto& ev = self->state.evidence;
  json_writer w;
  w.begin_object().field("retrieval_count", static_cast<uint64_t>(ev.retrieval_results.size()));
  w.key("chunk_ids").begin_array();
  for (auto& id : ev.chunk_ids)
    w.value(id);
  w.end_array();
  write_trace(w, ev.trace);
  w.end_object();
  return w.take();
}

std::string generate_input(self_ptr self) {
  auto& st = self->state;
  json_writer w;
  w.begin_object()
      .field("general", st.route.worker_name.empty())
      .field("evidence", static_cast<uint64_t>(st.evidence.retrieval_results.size()))
      .field("history", static_cast<uint64_t>(st.history.size()))
      .end_object();
  return w.take();
}

std::string generate_output(self_ptr self) {
  auto& st = self->state;
  json_writer w;
  w.begin_object()
      .field("finish_reason", st.gen.finish_reason)
      .field("answer_chars", static_cast<uint64_t>(st.answer.size()))
      .field("citations", static_cast<uint64_t>(st.gen.citations.size()))
      .field("prompt_tokens", static_cast<int64_t>(st.gen.usage.prompt_tokens))
      .field("completion_tokens", static_cast<int64_t>(st.gen.usage.completion_tokens))
      .end_object();
  return w.take();
}

std::string persist_input(self_ptr self) {
  auto& st = self->state;
  json_writer w;
  w.begin_object()
      .field("completed", st.error_code.empty() && !st.cancelled)
      .field("answer_chars", static_cast<uint64_t>(st.answer.size()))
      .end_object();
  return w.take();
}

void finish(self_ptr self) {
  auto& st = self->state;
  st.ph = phase::finished;
  if (!st.error_code.empty())
    emit(self, make_error_event(st.error_code, st.error_message));
  done_content c;
  c.answer = st.answer;
  c.conversation_id = st.opened.conversation_id;
  c.message_id = st.message_id;
  c.citations = st.gen.citations;
  if (st.opened.has_answer)
    c.citations_raw = st.opened.answer.citations_json;
  c.chunk_ids = st.evidence.chunk_ids;
  c.usage = st.gen.usage;
  c.partial = !st.error_code.empty() || st.cancelled;
  c.finish_reason = c.partial ? "cancelled" : st.gen.finish_reason.empty() ? "stop" : st.gen.finish_reason;
  c.need_human_help = st.need_human_help;
  c.escalation_reason = st.escalation_reason;
  st.done_emitted = true;
  metrics::global().turn(outcome_of(st));
  metrics::global().turn_duration.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - st.begun).count());
  if (!st.error_code.empty())
    self->stats().error(st.error_code + ": " + st.error_message);
  if (st.deps.session)
    self->send(st.deps.session, atom::turn_done_v, st.req.request_id);
  emit(self, make_done_event(c));
}

void persist(self_ptr self) {
  auto& st = self->state;
  if (st.ph == phase::persisting || st.ph == phase::finished)
    return;
  if (!st.durable) {
    st.persist_waiting = true;  // the user message is not stored yet
    return;
  }
  st.ph = phase::persisting;
  begin_node(self);
  if (st.req.stateless) {
    // Nothing of a stateless turn is stored.
    log_node(
        self, "persist", [=] { return persist_input(self); },
        [] {
          return json_strings({{"stored", "no (stateless)"}});
        });
    return finish(self);
  }
  stored_message msg;
  msg.conversation_id = st.opened.conversation_id;
  msg.role = "assistant";
  msg.content = st.answer;
  msg.citations_json = citations_json(st.gen.citations);
  msg.completed = st.error_code.empty() && !st.cancelled;
  msg.request_id = st.req.request_id;
  auto [episodes, memories] = turn_memory(self);
  self->request(st.deps.store, st.settings.step_timeout, atom::finish_turn_v, std::move(msg),
                std::move(episodes), std::move(memories))
      .then(
          [=](std::string& id) {
            self->state.message_id = std::move(id);
            if (self->state.error_code.empty() && !self->state.cancelled)
              request_summary(self);
            log_node(
                self, "persist", [=] { return persist_input(self); },
                [=] {
                  return json_strings({{"message_id", self->state.message_id}});
                });
            finish(self);
          },
          [=](caf::error& err) {
            fail(self, err, "storing the answer");
            log_node(
                self, "persist", [=] { return persist_input(self); }, "{}");
            finish(self);
          });
}

void generate(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled || !st.error_code.empty())
    return persist(self);
  st.ph = phase::generating;
  begin_node(self);
  emit(self, make_progress_event("generation", 0, 1, st.route.agent_type, -1, ""));
  generation_request gr;
  gr.request_id = st.req.request_id;
  gr.question = st.question.empty() ? st.req.message : st.question;
  gr.general = st.route.worker_name.empty();
  gr.cite = st.route.kb.enable_source_citation;
  gr.temperature = st.req.temperature >= 0 ? st.req.temperature : st.route.kb.temperature;
  gr.max_tokens = st.req.max_tokens > 0 ? st.req.max_tokens : st.route.kb.max_tokens;
  // The context goes to the gateway rather than a copy of it: the stream
  // needs none of it again (done reports only the chunk ids), and a stream
  // may stay open for minutes, so a copy would sit in every open stream
  // (issue 20: memory per open stream).
  auto input = st.req.debug ? generate_input(self) : std::string{};
  gr.history = std::move(st.history);
  gr.evidence = std::move(st.evidence);
  st.evidence = {};
  st.evidence.chunk_ids = gr.evidence.chunk_ids;
  gr.core_memory = std::move(st.core_memory);
  gr.memories = std::move(st.memories);
  gr.episodic = std::move(st.episodic);
  gr.summary = std::move(st.summary);
  gr.instructions = std::move(st.instructions);
  if (auto& m = st.settings.model) {
    llm::build_request_prompt(gr, m->prompt_budget_tokens, m->system_instructions);
    gr.body = llm::build_chat_body(m->model, llm::request_chat_params(gr, m->temperature,
                                                                      m->max_tokens),
                                   true);
  }
  auto sink = caf::actor_cast<token_sink_actor>(self);
  phase_over(self, metrics::turn_phase::model_called);
  self->request(st.deps.llm, st.settings.turn_timeout, atom::generate_v, std::move(gr), sink)
      .then(
          [=](generation_result& res) {
            auto& st = self->state;
            st.gen = std::move(res);
            if (st.gen.finish_reason == "cancelled" && !st.cancelled)
              st.cancelled = true;
            emit(self, make_progress_event("generation", 1, 1, st.route.agent_type, -1, ""));
            log_node(self, "generate", input, [=] { return generate_output(self); });
            persist(self);
          },
          [=](caf::error& err) {
            fail(self, err, "generation");
            log_node(self, "generate", input, [=] { return generate_output(self); });
            persist(self);
          });
}

// Search failure is not the end of the turn (seed 004 §10): the answer is
// generated from no documents, which makes it say it found nothing.
// The search answered: its results are the turn's evidence.
void retrieved(self_ptr self, retrieval_result res) {
  auto& st = self->state;
  if (st.cancelled)
    return persist(self);
  st.evidence = std::move(res);
  emit(self, make_progress_event("retrieval", 1, 1, st.route.agent_type,
                                 static_cast<int64_t>(st.evidence.retrieval_results.size()), ""));
  log_node(
      self, "retrieve", [=] { return retrieve_input(self); },
      [=] { return retrieve_output(self); });
  generate(self);
}

// The search failed: the answer is generated from no documents.
void retrieval_failed(self_ptr self, const caf::error& err) {
  auto& st = self->state;
  st.evidence = {};
  auto msg = error_message(err);
  lg->warn("stream {}: search failed ({}); answering without documents", st.req.request_id,
               self->system().render(err));
  log_node(
      self, "retrieve", [=] { return retrieve_input(self); },
      [&] {
        return json_strings({{"degraded", "search failed: " + msg + "; no documents"}});
      });
  emit(self,
       make_progress_event("retrieval", 1, 1, st.route.agent_type, 0, "search failed: " + msg));
  generate(self);
}

// The search request for the turn's query.
auto search(self_ptr self) {
  auto& st = self->state;
  retrieve_options opts;
  opts.top_k = top_k_of(self);
  opts.request_id = st.req.request_id;
  return self->request(st.deps.pool, st.settings.step_timeout, atom::retrieve_v,
                       st.route.worker_name, st.query, st.opened.conversation_id, opts);
}

// A pipeline turn without query rewriting searches the question itself, so
// its search starts as soon as the route is known, alongside the context
// reads; retrieve() takes its answer (events and logs keep their order).
void retrieve_early(self_ptr self) {
  auto& st = self->state;
  auto& mode = st.route.kb.answer_mode;
  if (st.cancelled || st.route.worker_name.empty() || st.route.kb.enable_query_rewrite
      || !(mode.empty() || mode == "pipeline"))
    return;
  st.query = st.req.message;
  st.early = early_search::running;
  search(self).then(
      [=](retrieval_result& res) {
        auto& st = self->state;
        phase_over(self, metrics::turn_phase::evidence);
        st.early = early_search::answered;
        if (st.awaiting_early)
          return retrieved(self, std::move(res));
        st.early_result = std::move(res);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        phase_over(self, metrics::turn_phase::evidence);
        st.early = early_search::answered;
        if (st.awaiting_early)
          return retrieval_failed(self, err);
        st.early_error = std::move(err);
      });
}

// Search failure is not the end of the turn (seed 004 §10): the answer is
// generated from no documents, which makes it say it found nothing.
void retrieve(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled)
    return persist(self);
  if (st.route.worker_name.empty())
    return generate(self);  // general: no retrieval
  st.ph = phase::retrieving;
  begin_node(self);
  emit(self, make_progress_event("retrieval", 0, 1, st.route.agent_type, -1, ""));
  if (st.early == early_search::answered && st.query == st.req.message) {
    if (st.early_error)
      return retrieval_failed(self, st.early_error);
    return retrieved(self, std::move(st.early_result));
  }
  if (st.early == early_search::running && st.query == st.req.message) {
    st.awaiting_early = true;
    return;
  }
  search(self).then(
      [=](retrieval_result& res) {
        phase_over(self, metrics::turn_phase::evidence);
        retrieved(self, std::move(res));
      },
      [=](caf::error& err) {
        phase_over(self, metrics::turn_phase::evidence);
        retrieval_failed(self, err);
      });
}

// The rewrite node (seed 004 §4.2): with enable_query_rewrite, the model
// turns the question and the window into a standalone search query.
// Skipped when off; without a model or on failure the question is searched.
void rewrite(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled)
    return persist(self);
  st.query = st.req.message;
  if (st.route.worker_name.empty() || !st.route.kb.enable_query_rewrite)
    return retrieve(self);
  begin_node(self);
  std::vector<std::pair<std::string, std::string>> window;
  for (auto& m : st.history)
    window.emplace_back(m.role, m.content);
  self->request(st.deps.llm, st.settings.step_timeout, atom::complete_v,
                llm::rewrite_request(st.req.message, window))
      .then(
          [=](completion_result& res) {
            auto& st = self->state;
            auto q = llm::parse_rewrite_reply(res.text);
            std::string outcome = q.empty() ? "unusable reply; question kept" : "rewritten";
            if (!q.empty())
              st.query = std::move(q);
            log_node(
                self, "rewrite",
                [&] {
                  return json_strings({{"question", st.req.message}});
                },
                [&] {
                  return json_strings({{"query", st.query}, {"outcome", outcome}});
                });
            retrieve(self);
          },
          [=](caf::error& err) {
            auto& st = self->state;
            log_node(
                self, "rewrite",
                [&] {
                  return json_strings({{"question", st.req.message}});
                },
                [&] {
                  return json_strings(
                      {{"query", st.query}, {"outcome", "skipped: " + error_message(err)}});
                });
            retrieve(self);
          });
}

// Chooses how the turn is answered: the KB's answer_mode. Planners (the
// guided workflow, the tool agent) decide what to search and whether to
// answer, ask, or escalate; "pipeline" means rewrite -> search -> generate.
void plan(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled)
    return persist(self);
  if (!st.durable && st.opened.conversation_id.empty()) {
    st.plan_waiting = true;  // on_opened plans
    return;
  }
  auto& mode = st.route.kb.answer_mode;
  if (st.route.worker_name.empty() || mode == "pipeline" || mode.empty())
    return rewrite(self);
  begin_node(self);
  plan_input in;
  in.request_id = st.req.request_id;
  in.conversation_id = st.opened.conversation_id;
  in.user_id = st.req.user_id;
  in.question = st.req.message;
  in.history = st.history;
  in.memories = st.memories;
  in.episodic = st.episodic;
  in.kb = st.route.kb.name;
  in.agent_type = st.route.agent_type;
  in.settings = st.route.kb;
  in.top_k = top_k_of(self);
  if (!st.deps.planners) {
    fail(self, make_error(errc::overloaded, "this node plans no turns"), mode);
    return persist(self);
  }
  planner_deps pd{st.deps.llm, st.deps.pool, st.deps.store, st.deps.tools_http};
  auto planner = spawn_planner(self->system(), mode, pd, *st.deps.planners);
  if (!planner) {
    fail(self, planner.error(), mode);
    return persist(self);
  }
  // A planner that dies without answering ends the turn (down handler).
  st.planner = *planner;
  self->monitor(st.planner);
  emit(self, make_progress_event(mode, 0, 1, st.route.agent_type, -1, ""));
  self->request(st.planner, st.settings.turn_timeout, atom::plan_v, std::move(in))
      .then(
          [=](plan_outcome& out) {
            auto& st = self->state;
            self->demonitor(st.planner.address());
            st.planner = nullptr;
            for (auto& l : out.logs)
              emit_log(self, l);
            emit(self, make_progress_event(
                           st.route.kb.answer_mode, 1, 1, st.route.agent_type,
                           static_cast<int64_t>(out.evidence.retrieval_results.size()), ""));
            if (st.cancelled)
              return persist(self);
            if (out.action == "pipeline")
              return rewrite(self);
            if (out.action == "generate") {
              st.query = st.req.message;
              st.evidence = std::move(out.evidence);
              st.instructions = std::move(out.instructions);
              st.question = std::move(out.question);
              if (out.general)
                st.route.worker_name.clear();
              return generate(self);
            }
            // "reply" / "escalate": the planner's text is the answer.
            st.need_human_help = out.need_human_help;
            st.escalation_reason = out.reason;
            st.ph = phase::generating;
            st.answer = out.reply;
            st.gen.finish_reason = "stop";
            emit(self, make_token_event(out.reply));
            persist(self);
          },
          [=](caf::error& err) {
            auto& st = self->state;
            if (st.planner) {
              self->demonitor(st.planner.address());
              st.planner = nullptr;
            }
            fail(self, err, st.route.kb.answer_mode);
            persist(self);
          });
}

// What a completed turn leaves for recall (not for incognito turns): the
// turn as an episode and what the user stated about themselves. They go to
// the store with the answer and are committed in its write job, so a client
// that read `done` finds them; derived data: one that fails is logged by
// the store and never fails the turn.
std::pair<std::vector<episode_record>, std::vector<memory_record>> turn_memory(self_ptr self) {
  auto& st = self->state;
  std::pair<std::vector<episode_record>, std::vector<memory_record>> out;
  if (st.req.incognito || !st.error_code.empty() || st.cancelled)
    return out;
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  episode_record ep;
  ep.conversation_id = st.opened.conversation_id;
  ep.user_id = st.req.user_id;
  ep.seq = st.opened.seq + 1;  // the assistant message follows the user's
  ep.text = episode_text(st.req.message, st.answer);
  ep.created_at = now;
  out.first.push_back(std::move(ep));
  for (auto& f : extract_memories(st.req.message)) {
    memory_record m;
    m.user_id = st.req.user_id;
    m.kind = f.kind;
    m.content = f.content;
    m.source_message_id = st.opened.message_id;
    m.created_at = now;
    m.expires_at = now + f.ttl_days * 24 * 3600 * 1000;
    out.second.push_back(std::move(m));
  }
  return out;
}

// After a completed turn: the summarizer refreshes the summary in the
// background if due; the answer never waits for it.
void request_summary(self_ptr self) {
  auto& st = self->state;
  if (st.req.incognito || !st.deps.summarizer)
    return;
  // A conversation's messages are seqs 1..N, so after this turn it has the
  // answer's seq of them: with the summary's state from the context read,
  // the rule says whether a refresh is due. Most turns it is not, and the
  // summarizer is spared a store read per turn. The state may be older than
  // the summary (a refresh finished meanwhile), which only makes a refresh
  // look due when it is not; the summarizer then reads and decides.
  if (st.settings.summary && st.summary_state) {
    auto s = *st.summary_state;
    s.count_messages(st.opened.seq + 1);
    if (plan_summary(s, *st.settings.summary) == summary_action::none)
      return;
  }
  caf::anon_send(st.deps.summarizer, atom::summarize_v, st.opened.conversation_id);
}

// Routing and the context reads have all answered: the history and
// memory nodes are logged (after the route, whatever answered first) and
// the answer is planned.
void context_ready(self_ptr self) {
  auto& st = self->state;
  if (!st.routed || st.context_pending > 0 || st.context_joined || st.route_failed)
    return;
  st.context_joined = true;
  if (st.cancelled)
    return persist(self);
  st.node_started = st.context_started;
  if (st.req.stateless) {
    log_node(
        self, "history", [=] { return history_input(self); },
        [] {
          return json_strings({{"source", "request (stateless)"}});
        });
    return plan(self);
  }
  log_node(
      self, "history", [=] { return history_input(self); },
      [&] {
        json_writer w;
        if (st.history_degraded)
          w.begin_object().field("degraded", "history unavailable").end_object();
        else
          w.begin_object()
              .field("messages", static_cast<uint64_t>(st.history.size()))
              .field("summary_chars", static_cast<uint64_t>(st.summary.size()))
              .end_object();
        return w.take();
      });
  if (!st.req.incognito)
    log_node(
        self, "memory",
        [&] {
          return json_strings({{"user_id", st.req.user_id}});
        },
        [&] {
          json_writer m;
          m.begin_object()
              .field("core_memory", !st.core_memory.empty())
              .field("memories", static_cast<uint64_t>(st.memories.size()))
              .field("episodes", static_cast<uint64_t>(st.episodic.size()))
              .end_object();
          return m.take();
        });
  plan(self);
}

// One context read answered (or failed: context, not the answer, so a
// failure only degrades the prompt).
void context_answered(self_ptr self) {
  --self->state.context_pending;
  context_ready(self);
}

// The turn's context in one store read (turn_context): the recent window;
// unless incognito, the conversation summary (everything older than the
// window), the user's core memory, the long-term memories related to the
// question (top 5) and past turns similar to it that are not in the window.
// One request instead of five: each was a round trip through the store
// actor, its executor and the actor clock (docs/performance.md). A part
// the store could not read is left out and the turn goes on without it.
// Stateless turns bring their history with the request and read nothing.
void load_context(self_ptr self) {
  auto& st = self->state;
  st.context_started = std::chrono::steady_clock::now();
  if (st.req.stateless) {
    st.history = st.req.context;
    return;
  }
  st.context_pending = 1;
  // `what` names the part, and after a colon why it failed.
  auto unavailable = [=](std::string_view what) {
    lg->warn("stream {}: left out of the context: {}", self->state.req.request_id, what);
    if (what.starts_with("history"))
      self->state.history_degraded = true;
  };
  self->request(st.deps.store, st.settings.step_timeout, atom::history_v, st.opened.conversation_id,
                st.req.user_id, st.req.message, st.settings.window + 1,
                st.opened.seq - static_cast<int64_t>(st.settings.window), st.req.incognito)
      .then(
          [=](turn_context& ctx) {
            auto& st = self->state;
            phase_over(self, metrics::turn_phase::context);
            for (auto& f : ctx.failed)
              unavailable(f);
            // The window excludes the current message (read before or
            // after its commit when the turn started early).
            auto& msgs = ctx.history;
            std::erase_if(msgs, [&](const stored_message& m) {
              return m.message_id == st.opened.message_id
                     || (!st.durable && m.request_id == st.req.request_id);
            });
            while (msgs.size() > static_cast<size_t>(st.settings.window))
              msgs.erase(msgs.begin());
            st.history = std::move(msgs);
            st.summary = std::move(ctx.summary);
            if (ctx.summary_known) {
              summary_record s;
              s.version = ctx.summary_version;
              s.covered_seq = ctx.summary_covered_seq;
              s.incremental_updates = ctx.summary_merges;
              st.summary_state = s;
            }
            st.core_memory = ctx.core_memory == "{}" ? std::string{} : std::move(ctx.core_memory);
            st.memories = std::move(ctx.memories);
            st.episodic = std::move(ctx.episodes);
            context_answered(self);
          },
          [=](caf::error& err) {
            phase_over(self, metrics::turn_phase::context);
            unavailable("history, summary and memories: " + self->system().render(err));
            context_answered(self);
          });
}

void cancel_turn(self_ptr self, std::string code, std::string message) {
  auto& st = self->state;
  if (st.done_emitted) {
    if (st.subs.empty())
      self->quit();
    return;
  }
  if (st.cancelled)
    return;
  // The whole answer is being stored (with its episode and memories):
  // nothing left to stop; `done` follows.
  if (st.ph == phase::persisting && st.error_code.empty())
    return;
  st.cancelled = true;
  if (st.error_code.empty()) {
    st.error_code = std::move(code);
    st.error_message = std::move(message);
  }
  lg->info("stream {}: cancelled ({})", st.req.request_id, st.error_code);
  // In-flight steps see `cancelled` when they answer; a running generation
  // is stopped and answers with what it produced.
  if (st.ph == phase::generating)
    self->send(st.deps.llm, atom::cancel_v, st.req.request_id);
  // A planner closes its model or tool call and answers `cancelled` now.
  if (st.planner)
    self->send(st.planner, atom::cancel_v);
}

// The last client went away: with a grace period the turn runs on,
// detached, for a client to re-attach; without one it is cancelled.
void detach(self_ptr self) {
  auto& st = self->state;
  if (st.settings.detach_grace <= caf::timespan::zero()) {
    if (st.done_emitted)
      return self->quit();
    return cancel_turn(self, "cancelled", "the client went away");
  }
  st.detached_until = self->clock().now() + st.settings.detach_grace;
  lg->debug("stream {}: detached; waiting {} ms for a client", st.req.request_id,
                std::chrono::duration_cast<std::chrono::milliseconds>(st.settings.detach_grace)
                    .count());
  self->delayed_send(self, st.settings.detach_grace, atom::tick_v, detach_check);
  maybe_quit(self);
}

// A detach timer fired: unless a client came back (or a later detach set
// a later deadline), the turn is cancelled, or quits when it is done.
void detach_expired(self_ptr self) {
  auto& st = self->state;
  if (!st.subs.empty() || !st.detached_until
      || self->clock().now() < *st.detached_until)
    return;
  if (st.done_emitted)
    return self->quit();
  cancel_turn(self, "cancelled",
              "the client went away and did not re-attach within server.detach_grace_ms");
}

caf::timespan watchdog_period(const stream_settings& s) {
  return std::max(caf::timespan{std::chrono::milliseconds(1)},
                  std::min({s.subscriber_timeout, s.turn_timeout,
                            caf::timespan{std::chrono::seconds(5)}}));
}

// The watchdog: nobody subscribed in time -> abandoned; the turn took
// longer than turn_timeout -> cancelled (timeout). Re-armed while either
// can still happen.
void on_watchdog(self_ptr self) {
  auto& st = self->state;
  auto age = self->clock().now() - st.started;
  if (!st.had_subscriber && !st.abandoned && age >= st.settings.subscriber_timeout) {
    st.abandoned = true;
    if (st.done_emitted)
      return self->quit();
    cancel_turn(self, "cancelled", "nobody subscribed to the stream");
  }
  if (!st.done_emitted && age >= st.settings.turn_timeout)
    cancel_turn(self, "timeout", "the turn exceeded server.turn_timeout_s");
  bool pending = !st.done_emitted || (!st.had_subscriber && !st.abandoned);
  if (pending)
    self->delayed_send(self, watchdog_period(st.settings), atom::tick_v, watchdog);
}

// The store answered the session's begin_turn of an early-started turn.
void on_opened(self_ptr self, turn_opened o, bool keep) {
  auto& st = self->state;
  if (st.durable)
    return;
  if (!keep) {
    // The turn failed to store its user message, or starts over from what
    // the store answered: nothing was published, nothing is stored.
    lg->debug("stream {}: discarded before its user message was stored", st.req.request_id);
    st.cancelled = true;
    if (st.ph == phase::generating)
      self->send(st.deps.llm, atom::cancel_v, st.req.request_id);
    if (st.planner)
      self->send(st.planner, atom::cancel_v);
    return self->quit();
  }
  st.opened = std::move(o);
  st.durable = true;
  emit(self, make_start_event());
  auto held = std::move(st.held);
  for (auto& ev : held)
    emit(self, std::move(ev));
  if (st.persist_waiting) {
    st.persist_waiting = false;
    persist(self);
  }
  if (st.plan_waiting) {
    st.plan_waiting = false;
    plan(self);
  }
}

void start_pipeline(self_ptr self) {
  auto& st = self->state;
  begin_node(self);
  self->request(st.deps.router, st.settings.step_timeout, atom::route_v, st.req)
      .then(
          [=](route_decision& rd) {
            auto& st = self->state;
            st.route = std::move(rd);
            st.routed = true;
            phase_over(self, metrics::turn_phase::routed);
            emit(self, make_route_event(st.route, st.req.debug));
            log_node(
                self, "route", [=] { return route_input(self); },
                [&] { return route_decision_json(st.route); });
            retrieve_early(self);
            context_ready(self);
          },
          [=](caf::error& err) {
            auto& st = self->state;
            st.routed = true;
            st.route_failed = true;
            fail(self, err, "routing");
            log_node(
                self, "route", [=] { return route_input(self); }, "{}");
            persist(self);
          });
  load_context(self);
}

}  // namespace

stream_actor spawn_stream(caf::actor_system& sys, chat_request req, turn_opened opened,
                          stream_deps deps, stream_settings settings, bool durable) {
  // Moved, not copied, into the actor's state: CAF runs this function once.
  return sys.spawn([req = std::move(req), opened = std::move(opened), deps = std::move(deps),
                    settings = std::move(settings),
                    durable](self_ptr self) mutable -> stream_actor::behavior_type {
    auto& st = self->state;
    st.req = std::move(req);
    st.opened = std::move(opened);
    st.deps = std::move(deps);
    st.settings = std::move(settings);
    self->track("stream", st.req.request_id);
    self->set_down_handler([=](caf::down_msg& msg) {
      auto& st = self->state;
      if (st.planner && msg.source == st.planner.address()) {
        // It quit without answering (a bug or a crash): the turn ends.
        st.planner = nullptr;
        fail(self, make_error(errc::internal, "the planner stopped: " + self->system().render(msg.reason)),
             st.route.kb.answer_mode);
        return persist(self);
      }
      if (!find_subscriber(self, msg.source))
        return;
      std::erase_if(st.subs,
                    [&](const subscriber& sub) { return sub.sink.address() == msg.source; });
      if (!st.subs.empty())
        return;
      detach(self);
    });
    st.started = self->clock().now();
    st.durable = durable || st.opened.has_answer;
    if (st.durable)
      emit(self, make_start_event());
    self->delayed_send(self, watchdog_period(st.settings), atom::tick_v, watchdog);
    if (st.opened.has_answer) {
      // A retry of a request_id whose turn is already stored: replay the
      // stored answer instead of writing anything new.
      st.answer = st.opened.answer.content;
      st.message_id = st.opened.answer.message_id;
      if (!st.opened.answer.completed) {
        st.error_code = "cancelled";
        st.error_message = "the stored answer of this request_id is partial";
      }
      st.ph = phase::generating;
      if (!st.answer.empty())
        emit(self, make_token_event(st.answer));
      finish(self);
    } else {
      start_pipeline(self);
    }
    return {
        [=](atom::subscribe, event_sink_actor sink, uint64_t after) {
          auto& st = self->state;
          if (find_subscriber(self, sink.address()))
            return;
          st.had_subscriber = true;
          self->monitor(sink);
          subscriber sub;
          sub.sink = sink;
          sub.feed = find_local_feed(caf::actor_cast<caf::actor_control_block*>(sink));
          // A late subscriber first gets what it missed.
          sub.pending = replay_after(st.log, after);
          for (auto& ev : sub.pending)
            sub.pending_bytes += ev.data.size();
          st.subs.push_back(std::move(sub));
        },
        [=](atom::demand, event_sink_actor sink, int32_t n) {
          if (auto* sub = find_subscriber(self, sink.address())) {
            sub->credit += n;
            flush(self, *sub);
            maybe_quit(self);
          }
        },
        [=](atom::cancel) { cancel_turn(self, "cancelled", "the request was cancelled"); },
        [=](atom::opened, turn_opened& o, bool keep) { on_opened(self, std::move(o), keep); },
        [=](atom::tick, int32_t which) {
          if (which == detach_check)
            detach_expired(self);
          else
            on_watchdog(self);
        },
        [=](atom::token, const std::string& request_id, std::string& text) {
          auto& st = self->state;
          if (request_id != st.req.request_id || st.ph != phase::generating)
            return;
          st.answer += text;
          ++st.tokens;
          emit(self, make_token_event(std::move(text)));
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          auto age = std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now()
                                                                            - st.started);
          json_writer w;
          self->status_head(w);
          w.field("request_id", st.req.request_id)
              .field("user_id", st.req.user_id)
              .field("session_id", st.req.session_id)
              .field("conversation_id", st.opened.conversation_id)
              .field("kb", st.route.kb_prefix)
              .field("stage", phase_names[static_cast<int>(st.ph)])
              .field("tokens", st.tokens)
              .field("waits_for_commit", st.plan_waiting)
              .field("age_ms", static_cast<int64_t>(age.count()))
              .field("subscribers", static_cast<uint64_t>(st.subs.size()))
              .field("cancelled", st.cancelled)
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
