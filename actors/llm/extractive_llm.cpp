#include "actors/llm/extractive_llm.hpp"
#include "actors/admin/measured.hpp"

#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "llm/extractive_generator.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {

// One generation in progress (paced mode only).
struct job {
  caf::typed_response_promise<generation_result> promise;
  token_sink_actor sink;
  extractive_answer answer;
  size_t next = 0;   // index of the next token to send
  std::string sent;  // concatenation of the tokens sent so far
  int32_t prompt_tokens = 0;
};

struct extractive_llm_state {
  static inline const char* name = "extractive_llm";
  extractive_llm_settings settings;
  std::unordered_map<std::string, job> jobs;  // request_id -> job
  uint64_t generated = 0;
  uint64_t cancelled = 0;
};

int32_t approx_tokens(const std::string& s) {
  return static_cast<int32_t>(s.size() / 4 + 1);
}

int32_t prompt_tokens_of(const generation_request& req) {
  return approx_tokens(req.question) + approx_tokens(req.evidence.context);
}

generation_result result_of(int32_t prompt_tokens, const extractive_answer& a, std::string text,
                            std::string finish_reason) {
  generation_result r;
  r.answer = std::move(text);
  // Citations are only claimed for the part that was actually sent.
  for (auto& c : a.citations)
    if (finish_reason == "stop" || r.answer.find(c.quote) != std::string::npos)
      r.citations.push_back(c);
  r.usage.prompt_tokens = prompt_tokens;
  r.usage.completion_tokens = approx_tokens(r.answer);
  r.finish_reason = std::move(finish_reason);
  return r;
}

}  // namespace

llm_actor spawn_extractive_llm(caf::actor_system& sys, extractive_llm_settings settings) {
  return sys.spawn([settings](measured_pointer<llm_actor, extractive_llm_state> self)
                       -> llm_actor::behavior_type {
    self->state.settings = settings;
    self->track("llm", "extractive");
    return {
        [=](atom::generate, const generation_request& req,
            token_sink_actor sink) -> caf::result<generation_result> {
          ++self->state.generated;
          extractive_options opts;
          opts.max_sentences = self->state.settings.max_sentences;
          opts.cite = req.cite;
          auto answer = req.general ? general_reply_without_model()
                                    : extractive_answer_for(req.question, req.evidence, opts);
          if (self->state.settings.pace.count() == 0) {
            for (auto& t : answer.tokens)
              self->send(sink, atom::token_v, req.request_id, t);
            return result_of(prompt_tokens_of(req), answer, answer.text, "stop");
          }
          auto rp = self->make_response_promise<generation_result>();
          auto& j = self->state.jobs[req.request_id];
          j.promise = rp;
          j.sink = sink;
          j.answer = std::move(answer);
          j.prompt_tokens = prompt_tokens_of(req);
          self->send(self, atom::tick_v, req.request_id);
          return rp;
        },
        [=](atom::tick, const std::string& request_id) {
          auto i = self->state.jobs.find(request_id);
          if (i == self->state.jobs.end())
            return;  // cancelled meanwhile
          auto& j = i->second;
          if (j.next < j.answer.tokens.size()) {
            auto& t = j.answer.tokens[j.next++];
            j.sent += t;
            self->send(j.sink, atom::token_v, request_id, t);
          }
          if (j.next < j.answer.tokens.size()) {
            self->delayed_send(self, self->state.settings.pace, atom::tick_v, request_id);
            return;
          }
          j.promise.deliver(result_of(j.prompt_tokens, j.answer, j.sent, "stop"));
          self->state.jobs.erase(i);
        },
        [=](atom::cancel, const std::string& request_id) {
          auto i = self->state.jobs.find(request_id);
          if (i == self->state.jobs.end())
            return;
          ++self->state.cancelled;
          auto& j = i->second;
          j.promise.deliver(result_of(j.prompt_tokens, j.answer, j.sent, "cancelled"));
          self->state.jobs.erase(i);
        },
        [=](atom::complete, const completion_request&) -> caf::result<completion_result> {
          return make_error(errc::unavailable,
                            "no language model is configured (set [llm] base_url)");
        },
        [=](atom::upstream, const std::string&, const upstream_event&) {
          // Not used: the extractive generator has no upstream.
        },
        [=](atom::status) -> std::string {
          json_writer w;
          self->status_head(w);
          w              .field("processed", self->state.generated)
              .field("cancelled", self->state.cancelled)
              .field("in_flight", static_cast<uint64_t>(self->state.jobs.size()))
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
