// The planner driver: one event-based actor per planning turn that executes
// the steps of a planner_logic (pipeline/planner_logic.hpp) and feeds each
// result back, until the logic finishes. Nothing here blocks: model,
// search and store calls are requests with deadlines, tool calls go
// through the shared asynchronous HTTP client and come back as messages,
// and the backoff between model attempts is a delayed message to itself.
#include "actors/pipeline/planner.hpp"
#include "protocol/log.hpp"
#include "actors/admin/measured.hpp"

#include <chrono>

#include <caf/actor_cast.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <spdlog/spdlog.h>

#include "pipeline/http_json.hpp"
#include "pipeline/planner_logic.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {
const log::component lg{"planner"};
}  // namespace

namespace {

using std::chrono::milliseconds;

constexpr auto store_timeout = std::chrono::seconds(10);

// Failures worth another attempt: timeouts, a failing upstream. The
// gateway refusing the call (`overloaded`) ends the turn instead.
bool retryable(const caf::error& err) {
  if (err == caf::sec::request_timeout)
    return true;
  auto c = code_of(err);
  return c == errc::timeout || c == errc::llm_failed;
}

struct planner_state {
  static inline const char* name = "planner";
  planner_deps deps;
  std::shared_ptr<void> place;  // in the planner gate
  std::string mode;
  std::string request_id;
  std::unique_ptr<plan::planner_logic> logic;
  caf::typed_response_promise<plan_outcome> promise;
  bool planning = false;  // a `plan` request is being answered
  plan::step current;
  uint64_t step_no = 0;  // identifies the step replies belong to
  int32_t attempt = 0;   // of the current model step
  bool model_in_flight = false;
  std::shared_ptr<http_call> tool_call;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  uint64_t model_calls = 0;
};

using self_ptr = measured_pointer<planner_actor, planner_state>;

void run(self_ptr self, plan::step s);

// Answers the plan request with `out` and quits.
void end(self_ptr self, caf::expected<plan_outcome> out) {
  auto& st = self->state;
  if (!st.planning)
    return;
  st.planning = false;
  if (st.tool_call)
    st.tool_call->cancel();
  if (out)
    st.promise.deliver(std::move(*out));
  else
    st.promise.deliver(out.error());
  st.place.reset();  // a finished turn never holds a place
  self->quit();
}

// The current step finished: the logic chooses the next one.
void advance(self_ptr self, plan::result r) {
  auto& st = self->state;
  if (!st.planning)
    return;
  st.model_in_flight = false;
  st.tool_call.reset();
  run(self, st.logic->next(std::move(r)));
}

plan::result failed(caf::error err, int32_t attempts = 1) {
  plan::result r;
  r.ok = false;
  r.error = std::move(err);
  r.attempts = attempts;
  return r;
}

void call_model(self_ptr self) {
  auto& st = self->state;
  st.model_in_flight = true;
  ++st.model_calls;
  auto step_no = st.step_no;
  auto attempt = st.attempt;
  self->request(st.deps.llm, milliseconds{st.current.timeout_ms}, atom::complete_v,
                st.current.completion)
      .then(
          [=](completion_result& res) {
            if (self->state.step_no != step_no)
              return;
            plan::result r;
            r.completion = std::move(res);
            r.attempts = attempt;
            advance(self, std::move(r));
          },
          [=](caf::error& err) {
            auto& st = self->state;
            if (st.step_no != step_no || !st.planning)
              return;
            st.model_in_flight = false;
            if (err == caf::sec::request_timeout)
              // The gateway still waits for the model: close that call.
              self->send(st.deps.llm, atom::cancel_v, st.request_id);
            if (code_of(err) == errc::overloaded)
              return end(self, std::move(err));
            if (retryable(err) && attempt <= st.current.retries) {
              lg->warn("planner {}: {} attempt {} failed: {}", st.request_id,
                           st.current.completion.purpose, attempt, error_message(err));
              auto backoff = milliseconds{st.current.backoff_ms} * (1 << (attempt - 1));
              self->delayed_send(self, backoff, atom::tick_v, step_no, attempt + 1);
              return;
            }
            advance(self, failed(std::move(err), attempt));
          });
}

void search(self_ptr self) {
  auto& st = self->state;
  auto step_no = st.step_no;
  auto timeout = milliseconds{st.current.timeout_ms};
  auto on_error = [=](caf::error& err) {
    if (self->state.step_no == step_no)
      advance(self, failed(std::move(err)));
  };
  retrieve_options opts;
  opts.top_k = st.current.top_k;
  opts.request_id = st.request_id;
  self->request(st.deps.pool, timeout, atom::retrieve_v, st.current.worker_name, st.current.query,
                std::string{}, opts)
      .then(
          [=](retrieval_result& found) {
            if (self->state.step_no != step_no)
              return;
            plan::result r;
            r.found = std::move(found);
            advance(self, std::move(r));
          },
          on_error);
}

void post_tool(self_ptr self) {
  auto& st = self->state;
  if (!st.deps.tools_http)
    return advance(self, failed(make_error(errc::unavailable, "no HTTP client for tools")));
  auto me = planner_actor{self};
  auto step_no = st.step_no;
  st.tool_call = st.deps.tools_http->post(
      st.current.url, st.current.body, st.current.timeout_ms,
      [me, step_no](caf::expected<std::string> out) {
        // On the client's thread: only a message goes back.
        if (out)
          caf::anon_send(me, atom::upstream_v, step_no, true, std::move(*out), std::string{});
        else
          caf::anon_send(me, atom::upstream_v, step_no, false, std::string{},
                         error_message(out.error()));
      });
}

void load_state(self_ptr self) {
  auto& st = self->state;
  auto step_no = st.step_no;
  self->request(st.deps.store, store_timeout, atom::flow_state_v, st.current.conversation_id)
      .then(
          [=](std::string& json) {
            if (self->state.step_no != step_no)
              return;
            plan::result r;
            r.text = std::move(json);
            advance(self, std::move(r));
          },
          [=](caf::error& err) {
            if (self->state.step_no == step_no)
              advance(self, failed(std::move(err)));
          });
}

void save_state(self_ptr self) {
  auto& st = self->state;
  auto step_no = st.step_no;
  self->request(st.deps.store, store_timeout, atom::flow_state_v, st.current.conversation_id,
                st.current.state_json)
      .then(
          [=](bool) {
            if (self->state.step_no == step_no)
              advance(self, plan::result{});
          },
          [=](caf::error& err) {
            if (self->state.step_no == step_no)
              advance(self, failed(std::move(err)));
          });
}

void run(self_ptr self, plan::step s) {
  auto& st = self->state;
  ++st.step_no;
  st.current = std::move(s);
  switch (st.current.kind) {
    case plan::step_kind::finish:
      return end(self, std::move(st.current.outcome));
    case plan::step_kind::complete:
      st.attempt = 1;
      return call_model(self);
    case plan::step_kind::search:
      return search(self);
    case plan::step_kind::post_tool:
      return post_tool(self);
    case plan::step_kind::load_state:
      return load_state(self);
    case plan::step_kind::save_state:
      return save_state(self);
  }
}

// Stops the turn: the call in flight is closed upstream (the model
// gateway closes this request's completion, the HTTP client its socket).
void cancel(self_ptr self, std::string why) {
  auto& st = self->state;
  if (!st.planning)
    return;
  if (st.model_in_flight)
    self->send(st.deps.llm, atom::cancel_v, st.request_id);
  lg->info("planner {}: cancelled in {} ({})", st.request_id,
               st.logic ? std::string{st.logic->stage()} : std::string{"start"}, why);
  end(self, make_error(errc::cancelled, std::move(why)));
}

}  // namespace

std::shared_ptr<void> planner_gate::enter() {
  auto& count = *running_;
  auto n = count.load();
  do {
    if (n >= max_)
      return nullptr;
  } while (!count.compare_exchange_weak(n, n + 1));
  // The place holds the counter, not the gate.
  return std::shared_ptr<void>{running_.get(), [counter = running_](void*) { --*counter; }};
}

caf::expected<planner_actor> spawn_planner(caf::actor_system& sys, std::string_view mode,
                                           planner_deps deps, planner_gate& gate) {
  auto place = gate.enter();
  if (!place)
    return make_error(errc::overloaded,
                      std::to_string(gate.max())
                          + " workflow or tool-agent turns are planning already "
                            "(server.max_planner_turns); retry later");
  return sys.spawn([deps, place, mode = std::string{mode}](
                       self_ptr self) mutable -> planner_actor::behavior_type {
    auto& st = self->state;
    st.deps = std::move(deps);
    st.place = std::move(place);
    st.mode = mode;
    self->track("planner", mode);
    // The turn's stream went away without cancelling: nothing waits for
    // this plan any more.
    self->set_down_handler([=](caf::down_msg&) { cancel(self, "the turn ended"); });
    return {
        [=](atom::plan, plan_input& in) -> caf::result<plan_outcome> {
          auto& st = self->state;
          if (st.planning || st.logic)
            return make_error(errc::conflict, "a planner plans one turn");
          st.request_id = in.request_id;
          if (auto sender = caf::actor_cast<caf::actor>(self->current_sender()))
            self->monitor(sender);
          st.logic = plan::make_planner(st.mode, std::move(in));
          st.promise = self->make_response_promise<plan_outcome>();
          st.planning = true;
          auto rp = st.promise;
          run(self, st.logic->start());
          return rp;
        },
        [=](atom::cancel) { cancel(self, "the turn was cancelled"); },
        [=](atom::tick, uint64_t step_no, int32_t attempt) {
          auto& st = self->state;
          if (!st.planning || st.step_no != step_no)
            return;
          st.attempt = attempt;
          call_model(self);
        },
        [=](atom::upstream, uint64_t step_no, bool ok, std::string& body, std::string& error) {
          auto& st = self->state;
          if (!st.planning || st.step_no != step_no)
            return;
          if (ok) {
            plan::result r;
            r.text = std::move(body);
            return advance(self, std::move(r));
          }
          advance(self, failed(make_error(errc::unavailable, std::move(error))));
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w              .field("request_id", st.request_id)
              .field("stage", st.logic ? st.logic->stage() : std::string_view{"idle"})
              .field("step", plan::to_string(st.current.kind))
              .field("steps", st.step_no)
              .field("model_calls", st.model_calls)
              .field("uptime_ms", static_cast<int64_t>(
                                      std::chrono::duration_cast<milliseconds>(
                                          std::chrono::steady_clock::now() - st.started)
                                          .count()))
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
