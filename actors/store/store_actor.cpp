#include "actors/store/store_actor.hpp"
#include "protocol/log.hpp"
#include "protocol/metrics.hpp"
#include "actors/admin/measured.hpp"

#include "memory/long_term.hpp"

#include <unordered_map>

#include <spdlog/spdlog.h>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "persistence/migrations.hpp"
#include "persistence/postgres/pg_backend.hpp"
#include "persistence/recall_index.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "persistence/store_executor.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"

namespace ragtor {

namespace {
const log::component lg{"store"};
}  // namespace

namespace {

struct store_state {
  static inline const char* name = "store";
  std::shared_ptr<store_executor> executor;
  std::string backend;
  // Job id -> delivers that job's response promise.
  std::unordered_map<uint64_t, std::function<void()>> pending;
  uint64_t next_job = 0;

  ~store_state() {
    // Runs what is queued, then joins the workers: an acknowledged write is
    // never dropped at shutdown.
    if (executor)
      executor->stop();
    // stop() ran every queued job and joined the workers, so each pending
    // job's result slot is filled, but its store_done can no longer reach
    // this (exiting) actor. Answer here, still inside the actor (the state
    // dies in on_exit): 0.17 has no broken_promise, so an undelivered promise
    // would leave its requester waiting for its own timeout.
    for (auto& [id, deliver] : pending)
      deliver();
    pending.clear();
  }
};

using store_ptr = measured_pointer<store_actor, store_state>;

// The mean commit time of this process's store transactions
// (ragtor_store_commit_duration_seconds), in ms.
double commit_ms_mean() {
  auto& h = metrics::global().store_commit_duration;
  auto n = h.count();
  return n == 0 ? 0.0 : h.sum() * 1000.0 / static_cast<double>(n);
}

// Someone else's conversation is reported exactly like a missing one, so
// ids cannot be probed.
caf::error not_found(const std::string& conversation_id) {
  return make_error(errc::not_found, "no conversation \"" + conversation_id + "\"");
}

// What a job's result slot says, as the message that answers its request.
template <class R>
caf::message answer_of(std::optional<caf::expected<R>>& value, const std::string& error) {
  if (!value.has_value())
    return caf::make_message(make_error(errc::unavailable, "database error: " + error));
  if (*value)
    return caf::make_message(std::move(**value));
  return caf::make_message(std::move(value->error()));
}

// Writes what a completed turn leaves for recall, inside the answer's write
// job: the episode and the memories each under a savepoint of their own, so
// a failure of either is logged and leaves the answer (and the other)
// stored. Before, they were two more write jobs the stream asked for after
// the answer was committed: two more commits (an fsync each unless grouped)
// and four more messages before `done`.
void keep_for_recall(store_backend& db, const std::string& request_id,
                     const std::vector<episode_record>& episodes,
                     const std::vector<memory_record>& memories) {
  auto derived = [&](const char* what, auto write) {
    if (auto err = in_savepoint(db, write); !err.empty())
      lg->warn("store: turn {}: {} not stored: {}", request_id, what, err);
  };
  if (!episodes.empty())
    derived("episode", [&] {
      for (auto& e : episodes)
        db.add_episode(e);
    });
  if (!memories.empty())
    derived("memories", [&] {
      for (auto& m : memories)
        db.add_memory(m);
    });
}

// Queues `work` and answers the request once it ran. `work` returns R, or
// caf::expected<R> to refuse (e.g. not_found) without failing the
// transaction.
//
// A request from an actor is answered by the worker thread that ran the
// job, straight into the requester's mailbox (no execution unit: the
// scheduler's thread-safe path, as anon_send from any thread), instead of
// telling the store actor, which would then answer: one hand-off between
// threads less per store request (docs/performance.md, "Answered from the
// worker"). Anything else (a forwarded request, a plain message) is
// answered by the store actor as before.
template <class R, class F>
caf::result<R> submit(store_ptr self, bool write, F work) {
  auto& st = self->state;
  auto rp = self->make_response_promise<R>();
  auto value = std::make_shared<std::optional<caf::expected<R>>>();
  auto run = [value, work = std::move(work)](store_backend& db) mutable { *value = work(db); };
  caf::response_promise& untyped = rp;
  if (untyped.pending() && untyped.id().is_request() && untyped.stages().empty()
      && untyped.source()) {
    auto done = [value, to = untyped.source(), from = self->ctrl(),
                 mid = untyped.id().response_id()](const std::string& err) {
      if (!err.empty())
        value->reset();  // the transaction did not commit
      to->enqueue(caf::make_mailbox_element(from, mid, {}, answer_of(*value, err)), nullptr);
    };
    if (write)
      st.executor->submit_write(std::move(run), std::move(done));
    else
      st.executor->submit_read(std::move(run), std::move(done));
    return rp;  // left pending: answered above, never by the promise
  }
  auto id = ++st.next_job;
  auto error = std::make_shared<std::string>();
  st.pending.emplace(id, [rp, value, error]() mutable {
    caf::response_promise& untyped = rp;
    untyped.deliver(answer_of(*value, *error));
  });
  auto handle = caf::actor_cast<store_actor>(self);
  auto done = [handle, id, value, error](const std::string& err) {
    if (!err.empty()) {
      value->reset();  // the transaction did not commit
      *error = err;
    }
    caf::anon_send(handle, atom::store_done_v, id);
  };
  if (write)
    st.executor->submit_write(std::move(run), std::move(done));
  else
    st.executor->submit_read(std::move(run), std::move(done));
  return rp;
}

}  // namespace

caf::expected<store_actor> spawn_store(caf::actor_system& sys, const store_options& opts) {
  std::shared_ptr<store_executor> executor;
  try {
    // Two connections: the writer (group commits) and the reader.
    auto open = [&]() -> std::unique_ptr<store_backend> {
      if (!opts.postgres_dsn.empty())
        return std::make_unique<pg_backend>(opts.postgres_dsn, opts.postgres_prepared);
      return std::make_unique<sqlite_backend>(opts.sqlite_path);
    };
    auto writer = open();
    auto ran = apply_migrations(*writer, embedded_migrations());
    if (ran > 0)
      lg->info("store: applied {} migration(s) ({})", ran, writer->backend_name());
    std::vector<std::unique_ptr<store_backend>> readers;
    for (int i = 0; i < std::max(1, opts.read_connections); ++i)
      readers.push_back(open());
    executor = std::make_shared<store_executor>(std::move(writer), std::move(readers),
                                                static_cast<size_t>(opts.flush_max_batch),
                                                opts.run_inline);
  } catch (const std::exception& e) {
    return make_error(errc::unavailable, e.what());
  }
  std::string backend = opts.postgres_dsn.empty() ? "sqlite" : "postgres";
  // Shared by the reader threads' jobs; outlives them (the jobs hold it).
  auto recall = std::make_shared<recall_index>(opts.recall_index_bytes);
  return sys.spawn([executor, backend, recall](store_ptr self) -> store_actor::behavior_type {
    self->state.executor = executor;
    self->state.backend = backend;
    self->track("store", "store");
    return {
        // A turn's writes take their fields from the message (moved, not
        // copied: the message is this handler's alone).
        [=](atom::begin_turn, std::string& user_id, std::string& session_id, std::string& content,
            std::string& request_id) {
          return submit<turn_opened>(
              self, true,
              [user_id = std::move(user_id), session_id = std::move(session_id),
               content = std::move(content),
               request_id = std::move(request_id)](store_backend& db) {
                return db.begin_turn(user_id, session_id, content, request_id, now_ms());
              });
        },
        [=](atom::finish_turn, stored_message& msg) {
          return submit<std::string>(self, true, [msg = std::move(msg)](store_backend& db) {
            return db.finish_turn(msg, now_ms());
          });
        },
        [=](atom::finish_turn, stored_message& msg, std::vector<episode_record>& episodes,
            std::vector<memory_record>& memories) {
          // Embedded here, once, so that recall never embeds stored turns.
          for (auto& e : episodes)
            if (e.embedding.empty())
              e.embedding = episode_embedding(e.text);
          return submit<std::string>(self, true,
                                     [msg = std::move(msg), episodes = std::move(episodes),
                                      memories = std::move(memories)](store_backend& db) {
                                       auto id = db.finish_turn(msg, now_ms());
                                       keep_for_recall(db, msg.request_id, episodes, memories);
                                       return id;
                                     });
        },
        [=](atom::find_turn, const std::string& request_id, const std::string& user_id) {
          return submit<stored_message>(
              self, false, [=](store_backend& db) -> caf::expected<stored_message> {
                stored_message out;
                if (!db.find_turn(request_id, user_id, out))
                  return make_error(errc::not_found, "no turn \"" + request_id + "\"");
                return out;
              });
        },
        [=](atom::history, const std::string& conversation_id, int32_t limit) {
          return submit<std::vector<stored_message>>(
              self, false, [=](store_backend& db) { return db.history(conversation_id, limit); });
        },
        [=](atom::history, const std::string& conversation_id, const std::string& user_id,
            const std::string& question, int32_t window_limit, int64_t window_start_seq,
            bool incognito) {
          return submit<turn_context>(self, false, [=](store_backend& db) {
            return read_turn_context(db, conversation_id, user_id, question, window_limit,
                                     window_start_seq, incognito, now_ms(), recall.get());
          });
        },
        [=](atom::list_convs, const std::string& user_id, int32_t limit,
            const std::string& cursor) {
          return submit<conversation_page>(self, false, [=](store_backend& db) {
            return db.list_conversations(user_id, limit, cursor);
          });
        },
        [=](atom::messages, const std::string& conversation_id, const std::string& user_id,
            int32_t limit, int64_t before) {
          return submit<std::vector<stored_message>>(
              self, false, [=](store_backend& db) -> caf::expected<std::vector<stored_message>> {
                if (db.conversation_owner(conversation_id) != user_id)
                  return not_found(conversation_id);
                return db.messages_page(conversation_id, limit, before);
              });
        },
        [=](atom::delete_conv, const std::string& conversation_id, const std::string& user_id) {
          return submit<bool>(self, true, [=](store_backend& db) -> caf::expected<bool> {
            if (db.conversation_owner(conversation_id) != user_id)
              return not_found(conversation_id);
            return db.delete_conversation(conversation_id);
          });
        },
        [=](atom::clear, const std::string& user_id, const std::string& session_id) {
          return submit<int64_t>(self, true, [=](store_backend& db) {
            return db.clear_conversation(user_id, session_id);
          });
        },
        [=](atom::feedback, const feedback_vote& vote) {
          return submit<std::string>(
              self, true, [=](store_backend& db) -> caf::expected<std::string> {
                auto state = db.toggle_feedback(vote, now_ms());
                if (state.empty())
                  return make_error(errc::not_found, "no message \"" + vote.message_id + "\"");
                return state;
              });
        },
        [=](atom::key_create, const api_key_record& k) {
          return submit<api_key_record>(
              self, true, [=](store_backend& db) -> caf::expected<api_key_record> {
                auto stored = k;
                if (stored.id.empty())
                  stored.id = new_id();
                if (stored.created_at_ms == 0)
                  stored.created_at_ms = now_ms();
                if (!db.create_api_key(stored))
                  return make_error(errc::conflict, "an API key named \"" + k.name + "\" exists");
                return stored;
              });
        },
        [=](atom::key_list) {
          return submit<std::vector<api_key_record>>(
              self, false, [=](store_backend& db) { return db.list_api_keys(); });
        },
        [=](atom::kb_sync, const std::string& kb, const std::string& settings,
            const std::vector<document>& docs) {
          return submit<int64_t>(self, true, [=](store_backend& db) {
            return db.put_kb_documents(kb, settings, docs, now_ms());
          });
        },
        [=](atom::kb_sync) {
          return submit<std::vector<kb_version>>(
              self, false, [=](store_backend& db) { return db.list_kb_versions(); });
        },
        [=](atom::kb_sync, const std::string& kb, int64_t after) {
          return submit<std::vector<document>>(
              self, false, [=](store_backend& db) { return db.kb_documents_after(kb, after); });
        },
        [=](atom::members, const member_info& m) {
          return submit<bool>(self, true, [=](store_backend& db) {
            db.write_member(m);
            return true;
          });
        },
        [=](atom::members) {
          return submit<std::vector<member_info>>(
              self, false, [=](store_backend& db) { return db.list_members(); });
        },
        [=](atom::key_revoke, const std::string& name) {
          return submit<bool>(
              self, true, [=](store_backend& db) { return db.revoke_api_key(name, now_ms()); });
        },
        [=](atom::recall, const std::string& user_id, const std::string& question,
            const std::string& conversation_id, int64_t window_start_seq) {
          return submit<std::vector<std::string>>(self, false, [=](store_backend& db) {
            return recall->episodes(db, user_id, question, conversation_id, window_start_seq,
                                    now_ms());
          });
        },
        [=](atom::episode, const std::string& user_id, int32_t limit) {
          return submit<std::vector<episode_record>>(
              self, false, [=](store_backend& db) { return db.recent_episodes(user_id, limit); });
        },
        [=](atom::mem_list, const std::string& user_id) {
          return submit<std::vector<memory_record>>(
              self, false, [=](store_backend& db) { return db.list_memories(user_id, now_ms()); });
        },
        [=](atom::mem_delete, const std::string& user_id, const std::string& id) {
          return submit<int64_t>(
              self, true, [=](store_backend& db) { return db.delete_memories(user_id, id); });
        },
        [=](atom::summary, const std::string& conversation_id, const std::string& user_id) {
          return submit<summary_record>(
              self, false, [=](store_backend& db) -> caf::expected<summary_record> {
                if (!user_id.empty() && db.conversation_owner(conversation_id) != user_id)
                  return not_found(conversation_id);
                return db.load_summary(conversation_id);
              });
        },
        [=](atom::summary, const summary_record& s, int64_t expected) {
          return submit<bool>(
              self, true, [=](store_backend& db) { return db.save_summary(s, expected, now_ms()); });
        },
        [=](atom::flow_state, const std::string& conversation_id) {
          return submit<std::string>(
              self, false, [=](store_backend& db) { return db.load_flow_state(conversation_id); });
        },
        [=](atom::flow_state, const std::string& conversation_id, const std::string& state) {
          return submit<bool>(self, true, [=](store_backend& db) {
            return db.save_flow_state(conversation_id, state, now_ms());
          });
        },
        [=](atom::kb_graph, const kb_graph_rows& g) {
          return submit<bool>(self, true, [=](store_backend& db) -> caf::expected<bool> {
            switch (db.write_graph(g, now_ms())) {
              case store_backend::graph_write::unchanged:
                return false;
              case store_backend::graph_write::written:
                return true;
              default:
                return make_error(errc::conflict, "knowledge base \"" + g.kb
                                                      + "\": the stored entity graph is not "
                                                        "the one this change was made against");
            }
          });
        },
        [=](atom::core_mem, const std::string& user_id) {
          return submit<std::string>(self, false,
                                     [=](store_backend& db) { return db.core_memory(user_id); });
        },
        [=](atom::core_mem, const std::string& user_id, const std::string& profile) {
          return submit<std::string>(self, true, [=](store_backend& db) {
            db.set_core_memory(user_id, profile, now_ms());
            return profile;
          });
        },
        [=](atom::store_done, uint64_t id) {
          auto& pending = self->state.pending;
          if (auto i = pending.find(id); i != pending.end()) {
            auto deliver = std::move(i->second);
            pending.erase(i);
            deliver();
          }
        },
        [=](atom::ping) {
          return submit<bool>(self, false, [](store_backend& db) {
            db.execute_script("SELECT 1");
            return true;
          });
        },
        [=](atom::status) -> std::string {
          auto s = self->state.executor->snapshot();
          json_writer w;
          self->status_head(w);
          w.field("backend", self->state.backend)
              .field("queued", s.queued)
              .field("pending_replies", static_cast<uint64_t>(self->state.pending.size()))
              .field("committed_batches", s.committed_batches)
              .field("committed_jobs", s.committed_jobs)
              .field("failed_jobs", s.failed_jobs)
              .field("rerun_batches", s.rerun_batches)
              .field("mean_batch_size", s.committed_batches == 0
                                            ? 0.0
                                            : static_cast<double>(s.committed_jobs)
                                                  / static_cast<double>(s.committed_batches))
              .field("mean_commit_ms", commit_ms_mean())
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
