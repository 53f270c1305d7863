// The SQLite backend, migrations, the group-commit executor and the store
// actor, against real SQLite files.
#include <atomic>
#include <filesystem>
#include <latch>
#include <thread>

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/store/store_actor.hpp"
#include "persistence/migrations.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "persistence/store_executor.hpp"
#include "protocol/errc.hpp"

using namespace ragtor;

namespace {

struct temp_db {
  std::filesystem::path dir;
  temp_db() {
    dir = std::filesystem::temp_directory_path() / ("ragtor-store-" + new_id());
    std::filesystem::create_directories(dir);
  }
  ~temp_db() { std::filesystem::remove_all(dir); }
  std::filesystem::path file() const { return dir / "test.db"; }
};

std::unique_ptr<sqlite_backend> open_migrated(const std::filesystem::path& p) {
  auto db = std::make_unique<sqlite_backend>(p);
  apply_migrations(*db, embedded_migrations());
  return db;
}

// A real store actor (worker threads and all) on a scratch SQLite file.
struct live_store {
  temp_db t;
  caf::actor_system_config cfg;
  caf::actor_system sys{registered(cfg)};
  caf::expected<store_actor> store{spawn_store(sys, options(t))};

  static caf::actor_system_config& registered(caf::actor_system_config& c) {
    register_types(c);
    return c;
  }
  static store_options options(const temp_db& t) {
    store_options opts;
    opts.sqlite_path = t.file();
    return opts;
  }
};

int64_t count_rows(const std::filesystem::path& p, const char* sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  // The store's connections may be closing (checkpointing) right now.
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
  int64_t n = -1;
  if (sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

}  // namespace

TEST(store_backend, sqlite_schema_has_every_table) {
  temp_db t;
  open_migrated(t.file());
  // Every table of DESIGN §9 exists.
  for (auto table : {"conversations", "messages", "feedback", "conversation_summaries",
                     "core_memory", "episodes", "memories", "knowledge_bases", "documents",
                     "chunks", "entities", "relations", "schema_migrations"}) {
    auto sql = std::string{"SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='"}
               + table + "'";
    EXPECT_EQ(count_rows(t.file(), sql.c_str()), 1) << table;
  }
}

// /metrics' ragtor_sqlite_memory_bytes: each connection publishes its page
// cache, schema and statements when it opens and after its jobs, and takes
// its part away when it closes.
TEST(store_backend, sqlite_connections_publish_their_memory) {
  temp_db t;
  auto before = sqlite_backend::memory_used();
  {
    auto db = open_migrated(t.file());
    db->after_job();
    auto migrated = sqlite_backend::memory_used();
    EXPECT_GT(migrated, before + 16 * 1024) << "the schema and the pages the migrations touched";
    db->begin();
    std::string conversation;
    for (int i = 0; i < 200; ++i)
      conversation = db->begin_turn("u", "s", std::string(2000, 'x'), new_id(), 0).conversation_id;
    db->commit();
    auto reader = std::make_unique<sqlite_backend>(t.file());
    EXPECT_EQ(reader->history(conversation, 100).size(), 100u);
    reader->after_job();
    EXPECT_GT(sqlite_backend::memory_used(), migrated) << "a second connection adds its own";
    reader.reset();
    EXPECT_EQ(sqlite_backend::memory_used(), migrated) << "and takes it away when it closes";
  }
  EXPECT_EQ(sqlite_backend::memory_used(), before);
}

TEST(store_backend, sqlite_data_survives_reopening) {
  temp_db t;
  std::string conv;
  {
    auto db = open_migrated(t.file());
    db->begin();
    conv = db->begin_turn("u", "s", "persist me", "", 1).conversation_id;
    db->commit();
  }
  auto db = open_migrated(t.file());
  auto h = db->history(conv, 5);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].content, "persist me");
}

// The files SQLite has open in /var/tmp (or $SQLITE_TMPDIR): statement
// journals and temporary b-trees, unlinked as soon as they are created.
std::vector<std::string> sqlite_temp_files() {
  std::vector<std::string> out;
  for (auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.find("etilqs_") != std::string::npos)
      out.push_back(target);
  }
  return out;
}

// A write job runs in a savepoint inside its batch's transaction, so every
// page it changes is kept for its rollback. A job that changed more than
// 16 pages (64 KiB) wrote them to a temporary file created and unlinked in
// /var/tmp, several times a second under load; they stay in memory.
TEST(store_backend, a_large_job_in_a_batch_keeps_its_rollback_in_memory) {
  temp_db t;
  auto db = open_migrated(t.file());
  std::vector<std::string> convs;
  db->begin();
  for (int i = 0; i < 3000; ++i)
    convs.push_back(db->begin_turn("u" + std::to_string(i), "s", "hello", "", 1).conversation_id);
  db->commit();
  db->begin();
  db->savepoint();
  // Answers in 40 conversations spread over the tables and indexes: far
  // more than 16 of the pages that existed when the savepoint began.
  for (int i = 0; i < 3000; i += 75) {
    stored_message answer;
    answer.conversation_id = convs[i];
    answer.content = "an answer";
    answer.completed = true;
    db->finish_turn(answer, 2);
  }
  auto files = sqlite_temp_files();
  db->release_savepoint();
  db->commit();
  EXPECT_TRUE(files.empty()) << files.front();
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages"), 3040);
}

TEST(store_executor, concurrent_writes_are_group_committed) {
  temp_db t;
  auto writer = open_migrated(t.file());
  std::vector<std::unique_ptr<store_backend>> readers;
  readers.push_back(std::make_unique<sqlite_backend>(t.file()));
  store_executor ex{std::move(writer), std::move(readers), 256};
  constexpr int threads = 8;
  constexpr int per_thread = 25;
  std::atomic<int> acked{0};
  std::atomic<int> failed{0};
  std::latch all_done{threads * per_thread};
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([&, i] {
      for (int j = 0; j < per_thread; ++j)
        ex.submit_write(
            [i](store_backend& db) { db.begin_turn("u" + std::to_string(i), "s", "m", "", 1); },
            [&](const std::string& err) {
              (err.empty() ? acked : failed)++;
              all_done.count_down();
            });
    });
  for (auto& th : ts)
    th.join();
  all_done.wait();
  EXPECT_EQ(acked.load(), threads * per_thread);
  EXPECT_EQ(failed.load(), 0);
  auto s = ex.snapshot();
  EXPECT_EQ(s.committed_jobs, static_cast<uint64_t>(threads * per_thread));
  EXPECT_LT(s.committed_batches, static_cast<uint64_t>(threads * per_thread))
      << "no batching happened";
  ex.stop();
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages"), threads * per_thread);
}

TEST(store_executor, a_failing_job_does_not_fail_its_batch) {
  temp_db t;
  std::vector<std::unique_ptr<store_backend>> readers;
  readers.push_back(std::make_unique<sqlite_backend>(t.file()));
  store_executor ex{open_migrated(t.file()), std::move(readers), 256, true};
  std::vector<std::string> outcomes;
  ex.submit_write([](store_backend& db) { db.begin_turn("u", "s", "ok", "", 1); },
                  [&](const std::string& e) { outcomes.push_back(e); });
  ex.submit_write(
      [](store_backend& db) {
        stored_message bad;  // no such conversation: foreign key violation
        bad.conversation_id = "missing";
        bad.content = "x";
        db.finish_turn(bad, 1);
      },
      [&](const std::string& e) { outcomes.push_back(e); });
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[0].empty());
  EXPECT_FALSE(outcomes[1].empty());
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages"), 1);
}

// A batch runs first without savepoints. When a job fails, the batch is
// rolled back and runs again with a savepoint per job: the failing job is
// undone alone and the others commit, their rows stored once (the jobs
// before the failing one ran twice, those after it once); a job alone, failing, leaves none of its
// writes. The first job holds the writer until the next three are queued, so they make one batch.
// Each job notes whether the writer was isolating jobs as it ran.
TEST(store_executor, a_failing_job_in_a_batch_is_undone_alone) {
  temp_db t;
  std::vector<std::unique_ptr<store_backend>> readers;
  readers.push_back(std::make_unique<sqlite_backend>(t.file()));
  store_executor ex{open_migrated(t.file()), std::move(readers), 256};
  std::latch started{1}, queued{1}, batched{4}, alone{1};
  std::vector<std::string> outcomes(5);
  std::vector<std::vector<bool>> runs(5);  // written by the writer's thread
  auto record = [&](size_t i) {
    return [&, i](const std::string& e) {
      outcomes[i] = e.empty() ? "ok" : e;
      (i < 4 ? batched : alone).count_down();
    };
  };
  auto opens = [&](size_t i, const std::string& session) {
    return [&, i, session](store_backend& db) {
      runs[i].push_back(db.isolating());
      db.begin_turn("u", session, "m", "", 1);
    };
  };
  // Writes, then fails: a message stored, then a foreign key violation.
  auto writes_then_fails = [&](size_t i, const std::string& session) {
    return [&, i, session](store_backend& db) {
      runs[i].push_back(db.isolating());
      db.begin_turn("u", session, "kept only if this job commits", "", 1);
      stored_message bad;
      bad.conversation_id = "missing";
      bad.content = "x";
      db.finish_turn(bad, 1);
    };
  };
  ex.submit_write(
      [&, first = opens(0, "first")](store_backend& db) {
        started.count_down();
        queued.wait();
        first(db);
      },
      record(0));
  started.wait();
  ex.submit_write(opens(1, "a"), record(1));
  ex.submit_write(writes_then_fails(2, "b"), record(2));
  ex.submit_write(opens(3, "c"), record(3));
  queued.count_down();
  batched.wait();
  // Alone in its batch: the writer has nothing else.
  ex.submit_write(writes_then_fails(4, "d"), record(4));
  alone.wait();
  EXPECT_EQ(outcomes[0], "ok");
  EXPECT_EQ(outcomes[1], "ok");
  EXPECT_NE(outcomes[2], "ok");
  EXPECT_EQ(outcomes[3], "ok");
  EXPECT_NE(outcomes[4], "ok");
  using runs_t = std::vector<bool>;
  EXPECT_EQ(runs[0], (runs_t{false})) << "a batch where nothing fails runs once, no savepoints";
  for (size_t i : {1, 2, 4})
    EXPECT_EQ(runs[i], (runs_t{false, true})) << "job " << i << ": run again, isolated";
  EXPECT_EQ(runs[3], (runs_t{true})) << "the first run stopped at the job that failed";
  auto s = ex.snapshot();
  EXPECT_EQ(s.committed_jobs, 3u);
  EXPECT_EQ(s.failed_jobs, 2u);
  EXPECT_EQ(s.rerun_batches, 2u);
  ex.stop();
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages"), 3);
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM conversations"), 3)
      << "a failed job's conversation was kept";
}

// A batch where no job fails: one run of each job, with the writer not
// isolating them, and every job committed.
TEST(store_executor, a_batch_without_failures_runs_each_job_once) {
  temp_db t;
  std::vector<std::unique_ptr<store_backend>> readers;
  readers.push_back(std::make_unique<sqlite_backend>(t.file()));
  store_executor ex{open_migrated(t.file()), std::move(readers), 256};
  std::latch started{1}, queued{1}, done{6};
  std::vector<std::vector<bool>> runs(6);  // written by the writer's thread
  for (size_t i = 0; i < 6; ++i) {
    if (i == 1)
      started.wait();  // the first job holds the writer: the rest queue behind it
    ex.submit_write(
        [&, i](store_backend& db) {
          if (i == 0) {
            started.count_down();
            queued.wait();
          }
          runs[i].push_back(db.isolating());
          // A write that must not fail its job, nested as a finished turn
          // nests its episode: no savepoint here either.
          auto nested = in_savepoint(db, [&] { runs[i].push_back(db.isolating()); });
          EXPECT_TRUE(nested.empty());
          db.begin_turn("u", "s" + std::to_string(i), "m", "", 1);
        },
        [&](const std::string& e) {
          EXPECT_TRUE(e.empty()) << e;
          done.count_down();
        });
  }
  queued.count_down();
  done.wait();
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(runs[i], (std::vector<bool>{false, false})) << "job " << i;
  auto s = ex.snapshot();
  EXPECT_EQ(s.committed_jobs, 6u);
  EXPECT_EQ(s.rerun_batches, 0u);
  EXPECT_EQ(s.committed_batches, 2u) << "the first job alone, then the five queued behind it";
  ex.stop();
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM conversations"), 6);
}

TEST(store_actor, answers_after_commit) {
  live_store live;
  auto& t = live.t;
  auto& sys = live.sys;
  auto& store = live.store;
  ASSERT_TRUE(store) << sys.render(store.error());
  caf::scoped_actor self{sys};
  turn_opened opened;
  self->request(*store, std::chrono::seconds(10), atom::begin_turn_v, std::string{"u"},
                std::string{"s"}, std::string{"question"}, std::string{"r1"})
      .receive([&](turn_opened& x) { opened = x; },
               [&](caf::error& err) { FAIL() << sys.render(err); });
  // Acknowledged means committed: a separate connection sees the row.
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages WHERE request_id='r1'"), 1);
  stored_message m;
  m.conversation_id = opened.conversation_id;
  m.content = "answer";
  m.request_id = "r1";
  self->request(*store, std::chrono::seconds(10), atom::finish_turn_v, m)
      .receive([&](std::string& id) { EXPECT_FALSE(id.empty()); },
               [&](caf::error& err) { FAIL() << sys.render(err); });
  self->request(*store, std::chrono::seconds(10), atom::history_v, opened.conversation_id,
                int32_t{10})
      .receive(
          [&](std::vector<stored_message>& h) {
            ASSERT_EQ(h.size(), 2u);
            EXPECT_EQ(h[1].content, "answer");
          },
          [&](caf::error& err) { FAIL() << sys.render(err); });
  // A write that fails is reported as unavailable, not acknowledged.
  stored_message bad;
  bad.conversation_id = "missing";
  self->request(*store, std::chrono::seconds(10), atom::finish_turn_v, bad)
      .receive([&](std::string&) { FAIL() << "a failed write was acknowledged"; },
               [&](caf::error& err) { EXPECT_EQ(code_of(err), errc::unavailable); });
  self->send_exit(*store, caf::exit_reason::user_shutdown);
}

// A completed turn's episode and memories are written in the answer's own
// job: committed when the answer is acknowledged, and a failure of one of
// them (here an episode id that is taken) leaves the answer and the other
// stored.
TEST(store_actor, an_answer_keeps_its_episode_and_memories_in_its_own_write) {
  live_store live;
  auto& t = live.t;
  auto& sys = live.sys;
  auto& store = live.store;
  ASSERT_TRUE(store) << sys.render(store.error());
  caf::scoped_actor self{sys};
  auto turn = [&](const std::string& request_id, const std::string& episode_id,
                  const std::string& memory) {
    turn_opened opened;
    self->request(*store, std::chrono::seconds(10), atom::begin_turn_v, std::string{"u"},
                  std::string{"s"}, std::string{"I prefer " + memory}, request_id)
        .receive([&](turn_opened& x) { opened = x; },
                 [&](caf::error& err) { FAIL() << sys.render(err); });
    stored_message answer;
    answer.conversation_id = opened.conversation_id;
    answer.content = "noted";
    answer.request_id = request_id;
    episode_record ep;
    ep.id = episode_id;
    ep.conversation_id = opened.conversation_id;
    ep.user_id = "u";
    ep.seq = opened.seq + 1;
    ep.text = "I prefer " + memory + " / noted";
    ep.created_at = 1000;
    memory_record m;
    m.user_id = "u";
    m.kind = "preference";
    m.content = "I prefer " + memory;
    m.source_message_id = opened.message_id;
    m.created_at = 1000;
    std::string id;
    self->request(*store, std::chrono::seconds(10), atom::finish_turn_v, answer,
                  std::vector<episode_record>{ep}, std::vector<memory_record>{m})
        .receive([&](std::string& x) { id = x; },
                 [&](caf::error& err) { FAIL() << sys.render(err); });
    return id;
  };
  EXPECT_FALSE(turn("r1", "ep-1", "green tea").empty());
  // Acknowledged means committed, for all three: another connection sees them.
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages WHERE role='assistant'"), 1);
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM episodes WHERE id='ep-1' AND seq=2"), 1);
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM memories"), 1);
  EXPECT_EQ(count_rows(t.file(),
                       "SELECT COUNT(*) FROM episodes WHERE id='ep-1' AND length(embedding) > 0"),
            1)
      << "embedded by the store";
  // The episode's insert fails (the id is taken): the answer and the memory
  // are stored all the same.
  EXPECT_FALSE(turn("r2", "ep-1", "black coffee").empty());
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM messages WHERE role='assistant'"), 2);
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM episodes"), 1);
  EXPECT_EQ(count_rows(t.file(), "SELECT COUNT(*) FROM memories"), 2);
  self->send_exit(*store, caf::exit_reason::user_shutdown);
}

// Regression: requests whose jobs were queued when the store exited were
// never answered (their store_done could no longer arrive), so requesters
// waited for their own timeouts.
TEST(store_actor, answers_every_queued_request_when_it_exits) {
  live_store live;
  auto& t = live.t;
  auto& sys = live.sys;
  auto& store = live.store;
  ASSERT_TRUE(store) << sys.render(store.error());
  caf::scoped_actor self{sys};
  constexpr int n = 200;
  auto ask = [&](int i) {
    return self->request(*store, std::chrono::seconds(30), atom::begin_turn_v, std::string{"u"},
                         "s" + std::to_string(i), std::string{"q"}, std::string{});
  };
  std::vector<decltype(ask(0))> replies;
  for (int i = 0; i < n; ++i)
    replies.push_back(ask(i));
  self->send_exit(*store, caf::exit_reason::user_shutdown);
  auto start = std::chrono::steady_clock::now();
  int answered = 0;
  int acked = 0;
  for (auto& r : replies)
    r.receive(
        [&](turn_opened&) {
          ++answered;
          ++acked;
        },
        [&](caf::error& err) {
          // Refused after exit is fine; only a timeout is the bug.
          EXPECT_NE(err, caf::make_error(caf::sec::request_timeout));
          ++answered;
        });
  EXPECT_EQ(answered, n);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Whatever was acknowledged is committed.
  EXPECT_GE(count_rows(t.file(), "SELECT COUNT(*) FROM messages"), acked);
}

TEST(store_actor, refuses_an_unopenable_database_clearly) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  store_options opts;
  opts.sqlite_path = "/proc/forbidden/ragtor.db";
  auto store = spawn_store(sys, opts);
  ASSERT_FALSE(store);
  EXPECT_EQ(code_of(store.error()), errc::unavailable);
  EXPECT_NE(error_message(store.error()).find("/proc/forbidden"), std::string::npos);
}
