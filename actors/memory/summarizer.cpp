#include "actors/request_timeout.hpp"
#include "actors/memory/summarizer.hpp"
#include "protocol/log.hpp"
#include "actors/admin/measured.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <span>
#include <vector>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {
const log::component lg{"summarizer"};
}  // namespace

namespace {

struct summarizer_state {
  static inline const char* name = "summarizer";
  summarizer_state() = default;  // not an aggregate: CAF would build it from `this`
  store_actor store;
  llm_actor llm;
  summarizer_settings settings;
  std::set<std::string> running;  // conversations with a run under way
  // Triggers that came during a run: answered by one more check after it.
  std::map<std::string, std::vector<caf::typed_response_promise<std::string>>> waiting;
  // Watchers of summary versions (GET .../summary?wait_version=N).
  struct watcher {
    int64_t min_version;
    uint64_t id;
    caf::typed_response_promise<bool> promise;
  };
  std::map<std::string, std::vector<watcher>> watchers;
  uint64_t next_watcher = 0;
  uint64_t triggers = 0, not_due = 0, written = 0, conflicts = 0, failed = 0, busy = 0,
           extractive = 0, full_runs = 0, merges = 0;
  // Messages older than the window a full summary by the model reads first;
  // doubled (up to the read limit) whenever a page did not fill the
  // transcript, which is then read again whole (page_rereads).
  int64_t full_page = 64;
  uint64_t page_enough = 0, page_rereads = 0;
  // Merges read again deeper: a message stored between loading the summary
  // and reading shifted the read past messages it needed.
  uint64_t reads_deeper = 0;
};

using self_ptr = measured_pointer<summarizer_actor, summarizer_state>;
// The triggers a run answers (none for a re-check nobody waits for).
using promise_t = std::vector<caf::typed_response_promise<std::string>>;

void run(self_ptr self, std::string conv, promise_t rp);

// Answers (and forgets) the watchers of `conv` that `pick` selects.
template <class Pick>
void answer_watchers(self_ptr self, const std::string& conv, bool value, Pick pick) {
  auto& st = self->state;
  auto i = st.watchers.find(conv);
  if (i == st.watchers.end())
    return;
  std::erase_if(i->second, [&](summarizer_state::watcher& w) {
    if (!pick(w))
      return false;
    w.promise.deliver(value);
    return true;
  });
  if (i->second.empty())
    st.watchers.erase(i);
}

// This node stored version `version` of the summary of `conv`.
void wake_watchers(self_ptr self, const std::string& conv, int64_t version) {
  answer_watchers(self, conv, true, [&](auto& w) { return w.min_version <= version; });
}

// Ends a run: answers its triggers, then checks once more for the triggers
// that came meanwhile (their turns may have made a refresh due).
void finish(self_ptr self, const std::string& conv, promise_t& rp, std::string outcome) {
  auto& st = self->state;
  st.running.erase(conv);
  for (auto& p : rp)
    p.deliver(outcome);
  if (auto i = st.waiting.find(conv); i != st.waiting.end()) {
    auto next = std::move(i->second);
    st.waiting.erase(i);
    run(self, conv, std::move(next));
  }
}

void store_summary(self_ptr self, std::string conv, promise_t rp, summary_record loaded,
                   summary_record next) {
  auto& st = self->state;
  auto expected = loaded.version;
  tidy_request(self, st.store, std::chrono::seconds(30), atom::summary_v, next, expected)
      .then(
          [=](bool ok) mutable {
            auto& st = self->state;
            if (ok) {
              ++st.written;
              wake_watchers(self, conv, expected + 1);
              lg->debug("summarizer: {} summarised up to seq {} (version {})", conv,
                            next.covered_seq, expected + 1);
            } else {
              ++st.conflicts;
              lg->info(
                  "summarizer: {} changed meanwhile (another writer or a clear); "
                  "this summary is discarded",
                  conv);
            }
            finish(self, conv, rp, ok ? "written" : "conflict");
          },
          [=](caf::error& err) mutable {
            ++self->state.failed;
            lg->warn("summarizer: storing the summary of {} failed: {}", conv,
                         self->system().render(err));
            finish(self, conv, rp, "failed");
          });
}

void summarise(self_ptr self, std::string conv, promise_t rp, summary_record loaded,
               summary_action action, std::vector<stored_message> all) {
  auto& st = self->state;
  // Everything older than the window; a merge takes only what left the
  // window since the last summary.
  auto window = static_cast<size_t>(std::max(0, st.settings.policy.window));
  // Whether the read was bounded (older messages left unread).
  bool bounded = static_cast<int64_t>(all.size()) < loaded.total_messages;
  std::vector<stored_message> outside = std::move(all);
  outside.resize(outside.size() > window ? outside.size() - window : 0);
  if (outside.empty()) {
    ++st.not_due;
    return finish(self, conv, rp, "none");
  }
  summary_record next;
  next.conversation_id = conv;
  next.covered_seq = outside.back().seq;
  next.incremental_updates = action == summary_action::merge ? loaded.incremental_updates + 1 : 0;
  std::vector<stored_message> input;
  for (auto& m : outside)
    if (action == summary_action::full || m.seq > loaded.covered_seq)
      input.push_back(std::move(m));
  if (input.empty()) {
    ++st.not_due;
    return finish(self, conv, rp, "none");
  }
  ++(action == summary_action::full ? st.full_runs : st.merges);
  if (!st.settings.use_model) {
    ++st.extractive;
    // A full summary whose read was bounded keeps the previous summary's
    // sentences, as the model prompt does.
    next.summary = extractive_summary(
        action == summary_action::merge || bounded ? loaded.summary : "", input);
    return store_summary(self, conv, rp, loaded, next);
  }
  auto req = summary_request(action, loaded.summary, input, st.settings.max_input_tokens,
                             st.settings.max_tokens);
  tidy_request(self, st.llm, st.settings.timeout, atom::complete_v, std::move(req))
      .then(
          [=](completion_result& res) mutable {
            auto text = std::move(res.text);
            while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
              text.pop_back();
            if (text.empty()) {
              ++self->state.failed;
              lg->warn("summarizer: the model returned an empty summary for {}", conv);
              return finish(self, conv, rp, "failed");
            }
            next.summary = std::move(text);
            store_summary(self, conv, rp, loaded, next);
          },
          [=](caf::error& err) mutable {
            ++self->state.failed;
            lg->warn("summarizer: summarising {} failed, keeping the old summary: {}", conv,
                         self->system().render(err));
            finish(self, conv, rp, "failed");
          });
}

void read_failed(self_ptr self, const std::string& conv, promise_t rp, const caf::error& err) {
  ++self->state.failed;
  lg->warn("summarizer: cannot read conversation {}: {}", conv, self->system().render(err));
  finish(self, conv, rp, "failed");
}

// Reads the newest `limit` messages (summary_read_limit) and summarises
// them. A full summary by the model reads a page first, the window and
// `full_page` older messages, and the rest of the limit only when the
// page's transcript is not full (transcript_is_full): the model is shown
// the same transcript either way, and a long conversation is not read
// back thousands of messages deep for the few hundred its transcript holds.
void read_and_summarise(self_ptr self, std::string conv, promise_t rp, summary_record loaded,
                        summary_action action, int32_t limit, bool whole) {
  auto& st = self->state;
  int64_t window = std::max(0, st.settings.policy.window);
  int32_t first = limit;
  if (!whole && action == summary_action::full && st.settings.use_model)
    first = static_cast<int32_t>(std::min<int64_t>(limit, window + st.full_page));
  tidy_request(self, st.store, std::chrono::seconds(30), atom::history_v, conv, first)
      .then(
          [=](std::vector<stored_message>& all) mutable {
            auto& st = self->state;
            // A merge whose read a newer message shifted past what it
            // needed: read once more, deeper (summary_read_deeper).
            if (auto deeper = whole ? 0 : summary_read_deeper(loaded, action, all, first);
                deeper > 0) {
              ++st.reads_deeper;
              return read_and_summarise(self, conv, rp, loaded, action, deeper, true);
            }
            if (first < limit && all.size() == static_cast<size_t>(first)) {
              auto older = all.size() > static_cast<size_t>(window) ? all.size() - window : 0;
              if (!transcript_is_full(std::span{all.data(), older}, st.settings.max_input_tokens)) {
                ++st.page_rereads;
                st.full_page = std::min<int64_t>(2 * st.full_page, limit);
                return read_and_summarise(self, conv, rp, loaded, action, limit, true);
              }
              ++st.page_enough;
            }
            summarise(self, conv, rp, loaded, action, std::move(all));
          },
          [=](caf::error& err) { read_failed(self, conv, rp, err); });
}

void run(self_ptr self, std::string conv, promise_t rp) {
  auto& st = self->state;
  if (st.running.contains(conv)) {
    ++st.busy;
    auto& w = st.waiting[conv];
    w.insert(w.end(), rp.begin(), rp.end());
    return;
  }
  st.running.insert(conv);
  tidy_request(self, st.store, std::chrono::seconds(30), atom::summary_v, conv, std::string{})
      .then(
          [=](summary_record& loaded) mutable {
            auto& st = self->state;
            auto action = plan_summary(loaded, st.settings.policy);
            if (action == summary_action::none) {
              ++st.not_due;
              return finish(self, conv, rp, "none");
            }
            auto limit = summary_read_limit(loaded, action, st.settings.policy,
                                            st.settings.max_input_tokens);
            read_and_summarise(self, conv, rp, std::move(loaded), action, limit, false);
          },
          [=](caf::error& err) { read_failed(self, conv, rp, err); });
}

}  // namespace

summarizer_actor spawn_summarizer(caf::actor_system& sys, store_actor store, llm_actor llm,
                                  summarizer_settings settings) {
  return sys.spawn([=](self_ptr self) -> summarizer_actor::behavior_type {
    auto& st = self->state;
    st.store = store;
    st.llm = llm;
    st.settings = settings;
    self->track("summarizer", "summarizer");
    return {
        [=](atom::summarize, std::string& conv) -> caf::result<std::string> {
          auto& st = self->state;
          ++st.triggers;
          if (!st.settings.enabled)
            return std::string{"none"};
          auto rp = self->make_response_promise<std::string>();
          run(self, std::move(conv), promise_t{rp});
          return rp;
        },
        [=](atom::summary, std::string& conv, int64_t min_version,
            int32_t timeout_ms) -> caf::result<bool> {
          // Registered before reading the store, so a write in between
          // wakes it too.
          auto& st = self->state;
          auto rp = self->make_response_promise<bool>();
          auto id = st.next_watcher++;
          st.watchers[conv].push_back({min_version, id, rp});
          self->delayed_send(self, std::chrono::milliseconds(timeout_ms), atom::tick_v, conv, id);
          auto this_one = [id](auto& w) { return w.id == id; };
          tidy_request(self, st.store, std::chrono::seconds(30), atom::summary_v, conv, std::string{})
              .then(
                  [=](summary_record& rec) {
                    if (rec.version >= min_version)
                      answer_watchers(self, conv, true, this_one);
                  },
                  [=](caf::error&) { answer_watchers(self, conv, false, this_one); });
          return rp;
        },
        [=](atom::tick, const std::string& conv, uint64_t id) {
          answer_watchers(self, conv, false, [id](auto& w) { return w.id == id; });
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w              .field("mode", st.settings.use_model ? "model" : "extractive")
              .field("running", static_cast<uint64_t>(st.running.size()))
              .field("triggers", st.triggers)
              .field("not_due", st.not_due)
              .field("written", st.written)
              .field("conflicts", st.conflicts)
              .field("failed", st.failed)
              .field("busy", st.busy)
              .field("full_runs", st.full_runs)
              .field("merges", st.merges)
              .field("extractive", st.extractive)
              .field("page_enough", st.page_enough)
              .field("page_rereads", st.page_rereads)
              .field("full_page", st.full_page)
              .field("reads_deeper", st.reads_deeper)
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
