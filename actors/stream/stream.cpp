#include "actors/stream/stream.hpp"

#include <deque>

#include <spdlog/spdlog.h>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/stream_events.hpp"

namespace ragtor {

namespace {

enum class phase { routing, history, retrieving, generating, persisting, finished };

constexpr int32_t subscriber_check = 0;
constexpr int32_t turn_deadline = 1;

// Appends `ev`, merging consecutive tokens into one event.
template <class Container>
void append_coalesced(Container& events, const stream_event& ev) {
  if (ev.kind == event_kind::token && !events.empty() && events.back().kind == event_kind::token)
    events.back().data += ev.data;
  else
    events.push_back(ev);
}

struct subscriber {
  event_sink_actor sink;
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
  retrieval_result evidence;
  std::string answer;  // concatenation of the tokens published
  generation_result gen;
  std::string message_id;  // the stored assistant message

  // The first failure ends the turn: code "" = none.
  std::string error_code;
  std::string error_message;
  bool cancelled = false;

  // Delivery. Every event is also kept (tokens coalesced) so that a
  // subscriber joining late — a client retrying with the same request_id —
  // is replayed the whole turn.
  std::vector<stream_event> log;
  std::vector<subscriber> subs;
  bool had_subscriber = false;
  bool abandoned = false;  // nobody subscribed in time
  bool done_emitted = false;
};

using self_ptr = stream_actor::stateful_pointer<stream_state>;

void persist(self_ptr self);
void cancel_turn(self_ptr self, std::string code, std::string message);

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
  self->send(sub.sink, atom::events_v, std::move(batch));
}

void emit(self_ptr self, stream_event ev) {
  auto& st = self->state;
  bool too_slow = false;
  for (auto& sub : st.subs) {
    sub.pending_bytes += ev.data.size();
    // Coalesce consecutive tokens while the subscriber is behind.
    append_coalesced(sub.pending, ev);
    flush(self, sub);
    too_slow = too_slow || sub.pending_bytes > st.settings.max_pending_bytes;
  }
  append_coalesced(st.log, ev);
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
    spdlog::warn("stream {}: {} failed: {}", st.req.request_id, what, self->system().render(err));
  }
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
  st.done_emitted = true;
  self->send(st.deps.session, atom::turn_done_v, st.req.request_id);
  emit(self, make_done_event(c));
}

void persist(self_ptr self) {
  auto& st = self->state;
  if (st.ph == phase::persisting || st.ph == phase::finished)
    return;
  st.ph = phase::persisting;
  stored_message msg;
  msg.conversation_id = st.opened.conversation_id;
  msg.role = "assistant";
  msg.content = st.answer;
  msg.citations_json = citations_json(st.gen.citations);
  msg.completed = st.error_code.empty() && !st.cancelled;
  msg.request_id = st.req.request_id;
  self->request(st.deps.store, st.settings.step_timeout, atom::finish_turn_v, std::move(msg))
      .then(
          [=](std::string& id) {
            self->state.message_id = std::move(id);
            finish(self);
          },
          [=](caf::error& err) {
            fail(self, err, "storing the answer");
            finish(self);
          });
}

void generate(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled || !st.error_code.empty())
    return persist(self);
  st.ph = phase::generating;
  emit(self, make_progress_event("generation", 0, 1, st.route.agent_type, -1, ""));
  generation_request gr;
  gr.request_id = st.req.request_id;
  gr.question = st.req.message;
  gr.history = st.history;
  gr.evidence = st.evidence;
  gr.general = st.route.worker_name.empty();
  auto sink = caf::actor_cast<token_sink_actor>(self);
  self->request(st.deps.llm, st.settings.turn_timeout, atom::generate_v, std::move(gr), sink)
      .then(
          [=](generation_result& res) {
            auto& st = self->state;
            st.gen = std::move(res);
            if (st.gen.finish_reason == "cancelled" && !st.cancelled)
              st.cancelled = true;
            emit(self, make_progress_event("generation", 1, 1, st.route.agent_type, -1, ""));
            persist(self);
          },
          [=](caf::error& err) {
            fail(self, err, "generation");
            persist(self);
          });
}

void retrieve(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled)
    return persist(self);
  if (st.route.worker_name.empty())
    return generate(self);  // general: no retrieval
  st.ph = phase::retrieving;
  emit(self, make_progress_event("retrieval", 0, 1, st.route.agent_type, -1, ""));
  auto on_error = [=](caf::error& err) {
    fail(self, err, "retrieval");
    emit(self, make_progress_event("retrieval", 1, 1, self->state.route.agent_type, 0,
                                   self->state.error_message));
    persist(self);
  };
  self->request(st.deps.pool, st.settings.step_timeout, atom::resolve_v, st.route.worker_name)
      .then(
          [=](retrieval_agent_actor& agent) {
            auto& st = self->state;
            if (st.cancelled)
              return persist(self);
            retrieve_options opts;
            opts.top_k = st.settings.top_k;
            opts.request_id = st.req.request_id;
            self->request(agent, st.settings.step_timeout, atom::retrieve_v, st.req.message,
                          st.opened.conversation_id, opts)
                .then(
                    [=](retrieval_result& res) {
                      auto& st = self->state;
                      st.evidence = std::move(res);
                      emit(self,
                           make_progress_event(
                               "retrieval", 1, 1, st.route.agent_type,
                               static_cast<int64_t>(st.evidence.retrieval_results.size()), ""));
                      generate(self);
                    },
                    on_error);
          },
          on_error);
}

void load_history(self_ptr self) {
  auto& st = self->state;
  if (st.cancelled)
    return persist(self);
  st.ph = phase::history;
  self->request(st.deps.store, st.settings.step_timeout, atom::history_v, st.opened.conversation_id,
                st.settings.window + 1)
      .then(
          [=](std::vector<stored_message>& msgs) {
            auto& st = self->state;
            // The window excludes the current message.
            std::erase_if(msgs, [&](const stored_message& m) {
              return m.message_id == st.opened.message_id;
            });
            while (msgs.size() > static_cast<size_t>(st.settings.window))
              msgs.erase(msgs.begin());
            st.history = std::move(msgs);
            retrieve(self);
          },
          [=](caf::error& err) {
            // History is context, not the answer: degrade instead of failing.
            spdlog::warn("stream {}: history unavailable: {}", self->state.req.request_id,
                         self->system().render(err));
            retrieve(self);
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
  st.cancelled = true;
  if (st.error_code.empty()) {
    st.error_code = std::move(code);
    st.error_message = std::move(message);
  }
  spdlog::info("stream {}: cancelled ({})", st.req.request_id, st.error_code);
  // In-flight steps see `cancelled` when they answer; a running generation
  // is stopped and answers with what it produced.
  if (st.ph == phase::generating)
    self->send(st.deps.llm, atom::cancel_v, st.req.request_id);
}

void start_pipeline(self_ptr self) {
  auto& st = self->state;
  self->request(st.deps.router, st.settings.step_timeout, atom::route_v, st.req)
      .then(
          [=](route_decision& rd) {
            auto& st = self->state;
            st.route = std::move(rd);
            emit(self, make_route_event(st.route, st.req.debug));
            load_history(self);
          },
          [=](caf::error& err) {
            fail(self, err, "routing");
            persist(self);
          });
}

}  // namespace

stream_actor spawn_stream(caf::actor_system& sys, chat_request req, turn_opened opened,
                          stream_deps deps, stream_settings settings) {
  return sys.spawn([req, opened, deps, settings](self_ptr self) -> stream_actor::behavior_type {
    auto& st = self->state;
    st.req = req;
    st.opened = opened;
    st.deps = deps;
    st.settings = settings;
    self->set_down_handler([=](caf::down_msg& msg) {
      auto& st = self->state;
      std::erase_if(st.subs,
                    [&](const subscriber& sub) { return sub.sink.address() == msg.source; });
      if (!st.subs.empty())
        return;
      if (st.done_emitted)
        self->quit();
      else
        cancel_turn(self, "cancelled", "the client went away");
    });
    emit(self, make_start_event());
    self->delayed_send(self, settings.subscriber_timeout, atom::tick_v, subscriber_check);
    if (opened.has_answer) {
      // A retry of a request_id whose turn is already stored: replay the
      // stored answer instead of writing anything new.
      st.answer = opened.answer.content;
      st.message_id = opened.answer.message_id;
      if (!opened.answer.completed) {
        st.error_code = "cancelled";
        st.error_message = "the stored answer of this request_id is partial";
      }
      st.ph = phase::generating;
      if (!st.answer.empty())
        emit(self, make_token_event(st.answer));
      finish(self);
    } else {
      self->delayed_send(self, settings.turn_timeout, atom::tick_v, turn_deadline);
      start_pipeline(self);
    }
    return {
        [=](atom::subscribe, event_sink_actor sink) {
          auto& st = self->state;
          if (find_subscriber(self, sink.address()))
            return;
          st.had_subscriber = true;
          self->monitor(sink);
          subscriber sub;
          sub.sink = sink;
          // A late subscriber first gets everything so far.
          for (auto& ev : st.log) {
            sub.pending.push_back(ev);
            sub.pending_bytes += ev.data.size();
          }
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
        [=](atom::tick, int32_t which) {
          auto& st = self->state;
          if (which == turn_deadline) {
            cancel_turn(self, "timeout", "the turn exceeded server.turn_timeout_s");
          } else if (!st.had_subscriber) {
            st.abandoned = true;
            if (st.done_emitted)
              self->quit();
            else
              cancel_turn(self, "cancelled", "nobody subscribed to the stream");
          }
        },
        [=](atom::token, const std::string& request_id, std::string& text) {
          auto& st = self->state;
          if (request_id != st.req.request_id || st.ph != phase::generating)
            return;
          st.answer += text;
          emit(self, make_token_event(std::move(text)));
        },
    };
  });
}

}  // namespace ragtor
