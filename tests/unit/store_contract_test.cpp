// One contract suite for every store backend (DESIGN §9): SQLite always,
// PostgreSQL when RAGTOR_TEST_POSTGRES_DSN names a throwaway database
// (scripts/test starts one). With RAGTOR_REQUIRE_POSTGRES=1 (make test, CI)
// a missing DSN fails instead of skipping.
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"
#include "persistence/migrations.hpp"
#include "persistence/postgres/pg_backend.hpp"
#include "persistence/recall_index.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "tests/support/id_checks.hpp"
#include "tests/support/pg_scratch.hpp"

using namespace ragtor;

namespace {

class store_contract : public testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      dir_ = std::filesystem::temp_directory_path() / ("ragtor-contract-" + new_id());
      std::filesystem::create_directories(dir_);
      db_ = std::make_unique<sqlite_backend>(dir_ / "c.db");
    } else {
      auto dsn = test::test_postgres_dsn();
      if (dsn.empty()) {
        if (auto* req = std::getenv("RAGTOR_REQUIRE_POSTGRES"); req && std::string{req} == "1")
          FAIL() << "RAGTOR_REQUIRE_POSTGRES=1 but RAGTOR_TEST_POSTGRES_DSN is not set";
        GTEST_SKIP() << "set RAGTOR_TEST_POSTGRES_DSN to run the PostgreSQL contract";
      }
      // A database of its own: tests run in parallel processes.
      scratch_ = std::make_unique<test::scratch_database>(dsn);
      db_ = std::make_unique<pg_backend>(scratch_->dsn(), prepared());
    }
    apply_migrations(*db_, embedded_migrations());
  }

  void TearDown() override {
    db_.reset();
    scratch_.reset();
    if (!dir_.empty())
      std::filesystem::remove_all(dir_);
  }

  // A second connection to the same database (the store's readers).
  std::unique_ptr<store_backend> open_again() {
    if (GetParam() == "sqlite")
      return std::make_unique<sqlite_backend>(dir_ / "c.db");
    return std::make_unique<pg_backend>(scratch_->dsn(), prepared());
  }

  // PostgreSQL with prepared statements (the default) or without
  // (`[store] postgres_prepared_statements = false`).
  bool prepared() const { return GetParam() == "postgres"; }

  // Runs `f` in one committed transaction.
  template <class F>
  auto tx(F f) {
    db_->begin();
    auto result = f(*db_);
    db_->commit();
    return result;
  }

  turn_opened user_turn(const std::string& user, const std::string& session,
                        const std::string& text, const std::string& request_id, int64_t t) {
    return tx([&](store_backend& db) { return db.begin_turn(user, session, text, request_id, t); });
  }

  // The episode of turn `t` (at the answer's seq) with `text` as given and
  // no embedding (episode_of builds one as the store keeps it), committed
  // on its own.
  episode_record keep_episode(const turn_opened& t, const std::string& user, std::string text,
                              int64_t at, std::string id = "") {
    episode_record e;
    e.id = std::move(id);
    e.conversation_id = t.conversation_id;
    e.user_id = user;
    e.seq = t.seq + 1;
    e.text = std::move(text);
    e.created_at = at;
    tx([&](store_backend& db) {
      db.add_episode(e);
      return 0;
    });
    return e;
  }

  // Two turns about tea by `user` (the second not answered yet), with a
  // core memory, `memories` (id, content, created_at), the first turn's
  // episode and a summary of seq 1: what a turn's context reads. Returns
  // the second turn.
  turn_opened tea_talk(const std::string& user,
                       const std::vector<std::tuple<std::string, std::string, int64_t>>& memories) {
    auto t1 = user_turn(user, "s1", "How long should green tea steep?", "r1", 10);
    assistant_turn(t1.conversation_id, "About ninety seconds.", "r1", 11);
    auto t2 = user_turn(user, "s1", "And how hot should the water be?", "r2", 20);
    tx([&](store_backend& db) {
      db.set_core_memory(user, R"({"name":")" + user + R"("})", 12);
      for (auto& [id, content, at] : memories) {
        memory_record m;
        m.id = id;
        m.user_id = user;
        m.kind = "preference";
        m.content = content;
        m.created_at = at;
        db.add_memory(m);
      }
      db.add_episode(episode_of(t1.conversation_id, user, 2, "How long should green tea steep?",
                                "About ninety seconds.", 11));
      summary_record s;
      s.conversation_id = t1.conversation_id;
      s.summary = "They talk about tea.";
      s.covered_seq = 1;
      db.save_summary(s, 0, 13);
      return 0;
    });
    return t2;
  }

  std::string assistant_turn(const std::string& conversation, const std::string& text,
                             const std::string& request_id, int64_t t, bool completed = true) {
    stored_message m;
    m.conversation_id = conversation;
    m.content = text;
    m.request_id = request_id;
    m.completed = completed;
    return tx([&](store_backend& db) { return db.finish_turn(m, t); });
  }

  // An episode of one turn, with its recall embedding, as the store keeps it.
  static episode_record episode_of(const std::string& conversation, const std::string& user,
                                   int64_t seq, const std::string& question,
                                   const std::string& answer, int64_t created_at) {
    episode_record e;
    e.conversation_id = conversation;
    e.user_id = user;
    e.seq = seq;
    e.text = episode_text(question, answer);
    e.created_at = created_at;
    e.embedding = episode_embedding(e.text);
    return e;
  }

  std::filesystem::path dir_;
  std::unique_ptr<test::scratch_database> scratch_;
  std::unique_ptr<store_backend> db_;
};

}  // namespace

// Migration 12 makes the messages table again, keyed (request_id, role,
// conversation_id) instead of (conversation_id, request_id, role): a
// database made before it keeps every message, field by field, and the
// uniqueness it enforced (one user and one assistant message per request in
// a conversation; the same client request id in another conversation).
TEST_P(store_contract, messages_stored_before_the_request_key_change_keep_through_it) {
  std::unique_ptr<test::scratch_database> scratch;
  std::unique_ptr<store_backend> old;
  if (GetParam() == "sqlite") {
    old = std::make_unique<sqlite_backend>(dir_ / "before-12.db");
  } else {
    scratch = std::make_unique<test::scratch_database>(test::test_postgres_dsn());
    old = std::make_unique<pg_backend>(scratch->dsn());
  }
  std::vector<migration> before;
  for (auto& m : embedded_migrations())
    if (m.version < 12)
      before.push_back(m);
  apply_migrations(*old, before);
  auto in_tx = [&](auto f) {
    old->begin();
    auto r = f(*old);
    old->commit();
    return r;
  };
  auto a = in_tx([](store_backend& db) { return db.begin_turn("u1", "s1", "tea?", "req-client", 1000); });
  stored_message answer;
  answer.conversation_id = a.conversation_id;
  answer.content = "Green [1]";
  answer.citations_json = R"([{"doc_id":"d1"}])";
  answer.request_id = "req-client";
  answer.completed = false;
  in_tx([&](store_backend& db) { return db.finish_turn(answer, 1001); });
  auto b = in_tx([](store_backend& db) { return db.begin_turn("u2", "s1", "coffee?", "req-client", 1002); });
  in_tx([&](store_backend& db) { return db.begin_turn("u1", "s1", "and milk?", "", 1003); });
  auto before_a = old->history(a.conversation_id, 10);
  auto before_b = old->history(b.conversation_id, 10);
  ASSERT_EQ(before_a.size(), 3u);

  EXPECT_GE(apply_migrations(*old, embedded_migrations()), 1);
  auto after_a = old->history(a.conversation_id, 10);
  auto after_b = old->history(b.conversation_id, 10);
  auto same = [](const std::vector<stored_message>& x, const std::vector<stored_message>& y) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].message_id, y[i].message_id);
      EXPECT_EQ(x[i].seq, y[i].seq);
      EXPECT_EQ(x[i].role, y[i].role);
      EXPECT_EQ(x[i].content, y[i].content);
      EXPECT_EQ(x[i].citations_json, y[i].citations_json);
      EXPECT_EQ(x[i].completed, y[i].completed);
      EXPECT_EQ(x[i].request_id, y[i].request_id);
      EXPECT_EQ(x[i].created_at_ms, y[i].created_at_ms);
    }
  };
  same(before_a, after_a);
  same(before_b, after_b);
  stored_message found;
  ASSERT_TRUE(old->find_turn("req-client", "u1", found));
  EXPECT_EQ(found.content, "Green [1]");
  EXPECT_FALSE(old->find_turn("req-client", "u2", found)) << "u2's turn has no answer yet";
  // A retried request writes nothing and reports the stored turn.
  auto again = in_tx([](store_backend& db) { return db.begin_turn("u1", "s1", "tea?", "req-client", 1004); });
  EXPECT_TRUE(again.existing);
  EXPECT_EQ(again.seq, a.seq);
  EXPECT_EQ(old->history(a.conversation_id, 10).size(), 3u);
  // A second assistant message of the request in the conversation is refused.
  old->begin();
  EXPECT_THROW(old->execute_script("INSERT INTO messages (id, conversation_id, seq, role, content, "
                                   "request_id, created_at) VALUES ('dup', '" + a.conversation_id +
                                   "', 9, 'assistant', 'x', 'req-client', 1005)"),
               store_error);
  old->rollback();
  old.reset();
}

TEST_P(store_contract, migrations_apply_exactly_once) {
  EXPECT_EQ(apply_migrations(*db_, embedded_migrations()), 0);
  auto applied = db_->applied_migrations();
  ASSERT_EQ(applied.size(), embedded_migrations().size());
  EXPECT_EQ(applied.front(), 1);
}

TEST_P(store_contract, core_memory_is_per_user_and_replaced_whole) {
  EXPECT_EQ(db_->core_memory("nobody"), "{}");
  tx([&](store_backend& db) {
    db.set_core_memory("ann", R"({"name":"Ann","likes":["tea"]})", 1);
    return 0;
  });
  tx([&](store_backend& db) {
    db.set_core_memory("bob", R"({"city":"Quellin"})", 2);
    return 0;
  });
  EXPECT_EQ(open_again()->core_memory("ann"), R"({"name":"Ann","likes":["tea"]})");
  tx([&](store_backend& db) {
    db.set_core_memory("ann", R"({"name":"Ann B."})", 3);
    return 0;
  });
  EXPECT_EQ(db_->core_memory("ann"), R"({"name":"Ann B."})");
  EXPECT_EQ(db_->core_memory("bob"), R"({"city":"Quellin"})");
}

TEST_P(store_contract, long_term_memories_dedupe_expire_and_delete) {
  auto mem = [](std::string user, std::string content, int64_t created, int64_t expires) {
    memory_record m;
    m.user_id = std::move(user);
    m.kind = "preference";
    m.content = std::move(content);
    m.created_at = created;
    m.expires_at = expires;
    return m;
  };
  EXPECT_TRUE(
      tx([&](store_backend& db) { return db.add_memory(mem("ann", "I like tea", 1, 100)); }));
  EXPECT_FALSE(tx([&](store_backend& db) {
    return db.add_memory(mem("ann", "I like tea", 2, 500));
  })) << "the same fact again refreshes its lifetime";
  EXPECT_TRUE(
      tx([&](store_backend& db) { return db.add_memory(mem("ann", "I hate rain", 3, 50)); }));
  EXPECT_TRUE(tx([&](store_backend& db) { return db.add_memory(mem("bob", "I like tea", 4, 0)); }));
  auto now60 = db_->list_memories("ann", 60);
  ASSERT_EQ(now60.size(), 1u) << "expired ones are not listed";
  EXPECT_EQ(now60[0].content, "I like tea");
  EXPECT_EQ(now60[0].expires_at, 500);
  ASSERT_EQ(db_->list_memories("ann", 10).size(), 2u);
  EXPECT_EQ(db_->list_memories("ann", 10)[0].content, "I hate rain") << "newest first";
  EXPECT_EQ(db_->list_memories("bob", 1000000).size(), 1u) << "0 = never expires";
  auto id = now60[0].id;
  EXPECT_EQ(tx([&](store_backend& db) { return db.delete_memories("bob", id); }), 0)
      << "only the owner's";
  EXPECT_EQ(tx([&](store_backend& db) { return db.delete_memories("ann", id); }), 1);
  EXPECT_EQ(tx([&](store_backend& db) { return db.delete_memories("ann", ""); }), 1);
  EXPECT_TRUE(db_->list_memories("ann", 0).empty());
  EXPECT_EQ(db_->list_memories("bob", 0).size(), 1u);
}

TEST_P(store_contract, episodes_are_kept_per_user_newest_first_and_cleared) {
  auto a = user_turn("ann", "s1", "q1", "r1", 1);
  auto b = user_turn("bob", "s1", "q2", "r2", 2);
  keep_episode(a, "ann", "first", 10);
  keep_episode(a, "ann", "second", 20);
  keep_episode(b, "bob", "other", 30);
  auto eps = open_again()->recent_episodes("ann", 10);
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].text, "second");
  EXPECT_EQ(eps[0].seq, 2);
  // Texts by id, at once: in the order asked, "" for an id not there, and
  // an id with a quote and a backslash read as written.
  auto odd = keep_episode(b, "bob", "odd one", 40, R"(we"ird\id)");
  EXPECT_EQ(db_->episode_texts({eps[1].id, "no-such-episode", odd.id, eps[0].id}),
            (std::vector<std::string>{"first", "", "odd one", "second"}));
  EXPECT_TRUE(db_->episode_texts({}).empty());
  EXPECT_EQ(db_->recent_episodes("ann", 1).size(), 1u);
  tx([&](store_backend& db) { return db.clear_conversation("ann", "s1"); });
  EXPECT_TRUE(db_->recent_episodes("ann", 10).empty()) << "clear drops the episodes";
  EXPECT_EQ(db_->recent_episodes("bob", 10).size(), 2u);
}

// A savepoint inside a job's savepoint takes back only its own writes: the
// store writes a turn's episode and memories this way inside the answer's
// job, so one that fails (here an episode id that is taken; on PostgreSQL
// the failed statement aborts the transaction until the rollback) leaves
// the answer and the other stored.
TEST_P(store_contract, a_savepoint_inside_a_job_takes_back_only_its_own_writes) {
  auto t = user_turn("ann", "s1", "I prefer tea", "r1", 1);
  auto e = keep_episode(t, "ann", "first", 10, "ep-taken");
  stored_message answer;
  answer.conversation_id = t.conversation_id;
  answer.content = "noted";
  answer.request_id = "r1";
  memory_record m;
  m.user_id = "ann";
  m.kind = "preference";
  m.content = "I prefer tea";
  m.created_at = 20;
  db_->begin();
  db_->savepoint();  // the job's
  db_->finish_turn(answer, 20);
  db_->savepoint();  // the episode's
  e.text = "second, same id";
  EXPECT_ANY_THROW(db_->add_episode(e));
  db_->rollback_to_savepoint();
  db_->savepoint();  // the memories'
  db_->add_memory(m);
  db_->release_savepoint();
  db_->release_savepoint();  // the job's
  db_->commit();
  auto other = open_again();
  auto msgs = other->history(t.conversation_id, 10);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[1].content, "noted");
  auto eps = other->recent_episodes("ann", 10);
  ASSERT_EQ(eps.size(), 1u);
  EXPECT_EQ(eps[0].text, "first");
  EXPECT_EQ(other->list_memories("ann", 30).size(), 1u);
}

// Recall by index (recent episodes ranked by stored embeddings, then a few
// texts read) returns the same items as the old full read of the newest
// episodes' texts, also when older episodes have no stored embedding.
TEST_P(store_contract, recall_by_index_matches_the_full_read) {
  auto a = user_turn("ann", "s1", "q1", "r1", 1);
  auto b = user_turn("ann", "s2", "q2", "r2", 2);
  const char* topics[] = {"green tea steeping time", "the northern lighthouse",
                          "replacing a door sensor", "battery life of the K7 lock"};
  tx([&](store_backend& db) {
    for (int i = 0; i < 60; ++i) {
      episode_record e;
      e.conversation_id = i % 2 ? a.conversation_id : b.conversation_id;
      e.user_id = "ann";
      e.seq = i + 1;
      e.text = episode_text("Question " + std::to_string(i) + " about " + topics[i % 4] + "?",
                            std::string{"An answer about "} + topics[(i + i / 4) % 4] + ".");
      e.created_at = 1000 + i;
      if (i >= 20)  // the first twenty were stored before embeddings were kept
        e.embedding = episode_embedding(e.text);
      db.add_episode(e);
    }
    return 0;
  });
  auto stored = db_->recent_episodes("ann", 200);
  ASSERT_EQ(stored.size(), 60u);
  EXPECT_EQ(stored.front().embedding.size(), 256u) << "the newest keep their vector";
  EXPECT_TRUE(stored.back().embedding.empty());
  auto light = db_->recent_episodes("ann", 200, false);
  EXPECT_TRUE(light.front().text.empty()) << "texts of embedded episodes are not read";
  EXPECT_FALSE(light.back().text.empty()) << "texts of episodes without a vector are";
  for (auto* q : {"How long does green tea steep?", "lighthouse", "door sensor battery"})
    for (int64_t window_start : {int64_t{0}, int64_t{50}}) {
      auto full = db_->recent_episodes("ann", 200);
      auto want = recall_episodes(q, full, b.conversation_id, window_start, 3, 0.1);
      ASSERT_FALSE(want.empty()) << q;
      EXPECT_EQ(recall_episodes_from(*db_, "ann", q, b.conversation_id, window_start, 3, 0.1),
                want)
          << q << " window " << window_start;
    }
}

// Recall remembers episodes' vectors by id; the episodes it ranks still
// come from the store each turn, so a deleted conversation's turns are no
// longer recalled and a new turn is, remembered vectors or not.
TEST_P(store_contract, remembered_vectors_follow_what_the_store_holds) {
  auto a = user_turn("bo", "s1", "q1", "r1", 1);
  auto b = user_turn("bo", "s2", "q2", "r2", 2);
  auto add = [&](const turn_opened& t, int64_t seq, const std::string& q, const std::string& ans) {
    tx([&](store_backend& db) {
      db.add_episode(episode_of(t.conversation_id, "bo", seq, q, ans, 1000 + seq));
      return 0;
    });
  };
  add(a, 2, "How long should green tea steep?", "About ninety seconds.");
  add(b, 3, "Where is the northern lighthouse?", "On the cape.");
  add(b, 4, "How hot should water be for green tea?", "About 75 degrees.");
  auto recall = [&](const char* q) {
    return recall_episodes_from(*db_, "bo", q, "elsewhere", 0, 3, 0.1);
  };
  auto full = [&](const char* q) {
    return recall_episodes(q, db_->recent_episodes("bo", 200), "elsewhere", 0, 3, 0.1);
  };
  auto cold = recall("green tea");
  ASSERT_EQ(cold.size(), 2u);
  EXPECT_EQ(recall("green tea"), cold) << "the vectors remembered";
  EXPECT_EQ(db_->recent_episode_keys("bo", 200).size(), 3u);
  tx([&](store_backend& db) { return db.delete_conversation(a.conversation_id); });
  auto after = recall("green tea");
  EXPECT_EQ(after, full("green tea"));
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0].find("75 degrees"), std::string::npos);
  add(b, 5, "Is green tea better with lemon?", "Some prefer it plain.");
  EXPECT_EQ(recall("green tea"), full("green tea"));
  EXPECT_EQ(recall("green tea").size(), 2u);
}

TEST_P(store_contract, a_stored_episode_vector_is_remembered_as_the_store_will_decode_it) {
  auto t = user_turn("cy", "s1", "q1", "r1", 1);
  auto e = episode_of(t.conversation_id, "cy", 2, "Which harbour has the lantern festival?",
                      "Port Quellin.", 1002);
  e.id = "ep-cy-" + std::string{GetParam()};
  set_recall_cache_budget(16u << 20);  // empties the cache
  ASSERT_EQ(remembered_episode_embedding(e.id), nullptr);
  tx([&](store_backend& db) {
    db.add_episode(e);
    return 0;
  });
  // Written, so remembered: the user's next turn reads only the keys.
  auto kept = remembered_episode_embedding(e.id);
  ASSERT_NE(kept, nullptr);
  auto stored = db_->recent_episodes("cy", 200);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(*kept, stored[0].embedding) << "the same floats the stored text decodes to";
  EXPECT_EQ(recall_episodes_from(*db_, "cy", "lantern festival harbour", "elsewhere", 0, 3, 0.1),
            recall_episodes("lantern festival harbour", stored, "elsewhere", 0, 3, 0.1));
}

TEST_P(store_contract, a_turns_context_in_one_read_is_what_the_separate_reads_give) {
  auto t2 = tea_talk("di", {{"m1", "prefers green tea", 12}});
  const std::string question = "green tea water temperature";
  // The window starts after seq 2, so the first turn's episode may be recalled.
  auto ctx = read_turn_context(*db_, t2.conversation_id, "di", question, 7, 3, false, 30);
  EXPECT_TRUE(ctx.failed.empty());
  auto history = db_->history(t2.conversation_id, 7);
  ASSERT_EQ(ctx.history.size(), history.size());
  ASSERT_EQ(ctx.history.size(), 3u);
  for (size_t i = 0; i < history.size(); ++i)
    EXPECT_EQ(ctx.history[i].message_id, history[i].message_id);
  EXPECT_EQ(ctx.summary, "They talk about tea.");
  // With the summary's state, for the stream to tell whether its turn
  // makes a refresh due.
  auto loaded = db_->load_summary(t2.conversation_id);
  EXPECT_TRUE(ctx.summary_known);
  EXPECT_EQ(ctx.summary_version, loaded.version);
  EXPECT_EQ(ctx.summary_version, 1);
  EXPECT_EQ(ctx.summary_covered_seq, 1);
  EXPECT_EQ(ctx.summary_merges, loaded.incremental_updates);
  EXPECT_EQ(ctx.core_memory, db_->core_memory("di"));
  EXPECT_EQ(ctx.memories, std::vector<std::string>{"prefers green tea"});
  EXPECT_EQ(ctx.episodes, recall_episodes_from(*db_, "di", question, t2.conversation_id, 3));
  EXPECT_EQ(ctx.episodes.size(), 1u);
  // Read as one snapshot, and the connection is left as it was: outside a
  // transaction, a write transaction can begin; inside one, the read joins
  // it and leaves it open.
  auto in_tx = tx([&](store_backend& db) {
    auto c = read_turn_context(db, t2.conversation_id, "di", question, 7, 3, false, 30);
    db.set_core_memory("di", R"({"name":"Di","tea":"green"})", 31);
    return c;
  });
  EXPECT_TRUE(in_tx.failed.empty());
  EXPECT_EQ(in_tx.memories, ctx.memories);
  EXPECT_EQ(db_->core_memory("di"), R"({"name":"Di","tea":"green"})") << "the write committed";
  // Incognito: the window only, no memory of any kind (not the summary).
  auto quiet = read_turn_context(*db_, t2.conversation_id, "di", question, 7, 3, true, 30);
  EXPECT_EQ(quiet.history.size(), 3u);
  EXPECT_TRUE(quiet.summary.empty());
  EXPECT_FALSE(quiet.summary_known);
  EXPECT_TRUE(quiet.core_memory.empty());
  EXPECT_TRUE(quiet.memories.empty());
  EXPECT_TRUE(quiet.episodes.empty());
}

// A turn's context read with the store's recall index gives what the
// calls one by one give: for a new user, for one whose rows the index
// holds, and when what the backend read ahead was not what recall then
// asked (a memory deleted since: the user's epoch moved, so the rows are
// read whole). On PostgreSQL the reads go in one pipeline: one round trip
// for the whole context, not one per read.
TEST_P(store_contract, a_turns_context_read_ahead_is_what_the_calls_give) {
  recall_index index{16u << 20};
  // The second memory far newer: recall then asks for the rows from
  // shortly before it, which leave out the first.
  auto t2 = tea_talk("fay", {{"m1", "prefers green tea", 12},
                             {"m2", "heats the water for tea to 80 degrees", 100000}});
  const std::string question = "green tea water temperature";
  auto* pg = dynamic_cast<pg_backend*>(db_.get());
  auto trips = [&] { return pg ? pg->round_trips() : 0; };
  auto read = [&](int64_t now, recall_index* with) {
    return read_turn_context(*db_, t2.conversation_id, "fay", question, 7, 3, false, now, with);
  };
  auto same = [](const turn_context& a, const turn_context& b, const char* when) {
    EXPECT_TRUE(a.failed.empty()) << when;
    ASSERT_EQ(a.history.size(), b.history.size()) << when;
    for (size_t i = 0; i < a.history.size(); ++i)
      EXPECT_EQ(a.history[i].message_id, b.history[i].message_id) << when;
    EXPECT_EQ(a.summary, b.summary) << when;
    EXPECT_EQ(a.summary_version, b.summary_version) << when;
    EXPECT_EQ(a.summary_covered_seq, b.summary_covered_seq) << when;
    EXPECT_EQ(a.core_memory, b.core_memory) << when;
    EXPECT_EQ(a.memories, b.memories) << when;
    EXPECT_EQ(a.episodes, b.episodes) << when;
  };
  auto whole = read(200000, nullptr);
  ASSERT_TRUE(whole.failed.empty());
  ASSERT_EQ(whole.history.size(), 3u);
  ASSERT_EQ(whole.summary, "They talk about tea.");
  ASSERT_EQ(whole.core_memory, R"({"name":"fay"})");
  ASSERT_EQ(whole.memories.size(), 2u);
  ASSERT_EQ(whole.episodes.size(), 1u);
  auto before = trips();
  same(read(200000, &index), whole, "a new user");
  if (pg)
    EXPECT_EQ(trips() - before, 1u) << "a new user's context in one pipeline";
  before = trips();
  same(read(200001, &index), whole, "rows held");
  if (pg)
    EXPECT_EQ(trips() - before, 1u) << "a held user's context in one pipeline";
  EXPECT_EQ(tx([&](store_backend& db) { return db.delete_memories("fay", "m2"); }), 1);
  auto after = read(200002, &index);
  same(after, read(200002, nullptr), "a memory deleted");
  EXPECT_EQ(after.memories, std::vector<std::string>{"prefers green tea"})
      << "read whole, not the newest rows read ahead";
}

// The per-user rows a store holds between turns (persistence/recall_index)
// give what reading them whole gives after every kind of write: rows
// added (read alone), a deleted conversation, deleted memories, a memory's
// refreshed lifetime, a memory expiring, an episode written by another
// process (its vector not remembered here), a row stamped a little before
// the newest held (another node's clock).
TEST_P(store_contract, a_users_recall_rows_held_between_turns_follow_every_write) {
  recall_index index{16u << 20};
  auto a = user_turn("eve", "s1", "q", "r1", 1);
  auto b = user_turn("eve", "s2", "q", "r2", 2);
  int64_t seq = 10;
  auto episode = [&](const turn_opened& t, const std::string& q, const std::string& ans,
                     int64_t at) {
    tx([&](store_backend& db) {
      db.add_episode(episode_of(t.conversation_id, "eve", ++seq, q, ans, at));
      return 0;
    });
  };
  auto memory = [&](const std::string& content, int64_t at, int64_t expires = 0) {
    return tx([&](store_backend& db) {
      memory_record m;
      m.user_id = "eve";
      m.kind = "preference";
      m.content = content;
      m.created_at = at;
      m.expires_at = expires;
      return db.add_memory(m);
    });
  };
  // What reading the rows whole gives, against what the index gives; and
  // how the index served it.
  std::vector<std::string> topics{"green tea", "lighthouse", "door sensor", "harbour"};
  auto check = [&](int64_t now, const char* when) {
    auto before = index.stats();
    for (auto& q : topics) {
      // The index first: reading the rows whole remembers their vectors.
      auto memories = index.memories(*db_, "eve", q, now);
      auto episodes = index.episodes(*db_, "eve", q, "elsewhere", 0, now, 3, 0.1);
      std::vector<std::pair<std::string, int64_t>> all;
      for (auto& m : db_->list_memories("eve", now))
        all.emplace_back(m.content, m.created_at);
      EXPECT_EQ(memories, recall_memories(q, all, 5)) << when << ": " << q;
      EXPECT_EQ(episodes,
                recall_episodes(q, db_->recent_episodes("eve", 200), "elsewhere", 0, 3, 0.1))
          << when << ": " << q;
    }
    auto after = index.stats();
    return std::array<uint64_t, 3>{after.held - before.held, after.added - before.added,
                                   after.read - before.read};
  };
  using counts = std::array<uint64_t, 3>;  // held, added, read whole
  episode(a, "How long should green tea steep?", "About ninety seconds.", 1000);
  episode(b, "Where is the northern lighthouse?", "On the cape.", 1001);
  memory("I like green tea", 1000);
  memory("I live near the lighthouse", 1001);
  EXPECT_EQ(check(5000, "first turn"), (counts{6, 0, 2}));
  EXPECT_EQ(check(5000, "nothing new"), (counts{8, 0, 0}));

  episode(b, "Is the door sensor battery replaceable?", "Yes, a CR2032.", 1010);
  memory("I prefer short answers about the door sensor", 1010);
  EXPECT_EQ(check(6000, "rows added"), (counts{6, 2, 0}));
  auto best = index.episodes(*db_, "eve", "door sensor battery", "elsewhere", 0, 6000, 1, 0.1);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_NE(best[0].find("CR2032"), std::string::npos) << "the turn just added is recalled";

  // Stamped before the newest held, within the margin for clocks.
  episode(a, "Which harbour has the lantern festival?", "Port Quellin.", 1005);
  memory("I work at the harbour", 1005);
  EXPECT_EQ(check(6000, "a row stamped a little earlier"), (counts{6, 2, 0}));

  tx([&](store_backend& db) { return db.delete_conversation(a.conversation_id); });
  EXPECT_EQ(check(7000, "a conversation deleted"), (counts{6, 0, 2}));
  for (auto& text : index.episodes(*db_, "eve", "green tea steep", "elsewhere", 0, 7000, 3, 0.1))
    EXPECT_EQ(text.find("ninety"), std::string::npos) << "a deleted turn is not recalled";

  auto listed = db_->list_memories("eve", 7000);
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_EQ(tx([&](store_backend& db) { return db.delete_memories("eve", listed[0].id); }), 1);
  EXPECT_EQ(check(7000, "a memory deleted"), (counts{6, 0, 2}));

  EXPECT_FALSE(memory("I like green tea", 1000, 9000)) << "the same content: a refresh";
  EXPECT_EQ(check(8000, "a lifetime refreshed"), (counts{6, 0, 2}));
  EXPECT_EQ(check(9500, "a memory expired"), (counts{7, 0, 1}));
  EXPECT_EQ(db_->list_memories("eve", 9500).size(), 2u);

  // Written by another process: its vector is not remembered here.
  set_recall_cache_budget(16u << 20);  // forgets every remembered vector
  episode(b, "Does the lighthouse open at night?", "Only in summer.", 1020);
  set_recall_cache_budget(16u << 20);
  EXPECT_EQ(check(9500, "an episode written elsewhere"), (counts{7, 0, 1}));
  // Read whole apart from their keys (no vector was remembered): on a
  // store with a mark (SQLite) the index keeps one, so the next turn reads
  // only the row past it rather than its newest ten seconds again.
  auto again_before = index.stats().read_again;
  episode(b, "Is the harbour lantern lit all night?", "Until dawn.", 1021);
  EXPECT_EQ(check(9500, "a turn after a whole read"), (counts{7, 1, 0}));
  if (GetParam() == "sqlite")
    EXPECT_EQ(index.stats().read_again, again_before) << "rows held were read again";
  else
    EXPECT_GT(index.stats().read_again, again_before) << "PostgreSQL has no mark";

  // Held rows are read whole again after a while in any case.
  EXPECT_EQ(check(9500 + recall_index::reread_after_ms, "held too long"), (counts{6, 0, 2}));
  // An index that holds nothing reads the rows whole every turn.
  recall_index none{0};
  EXPECT_EQ(none.memories(*db_, "eve", "lighthouse", 9500),
            index.memories(*db_, "eve", "lighthouse", 9500));
  EXPECT_EQ(none.stats().read, 1u);
  EXPECT_EQ(none.stats().users, 0u);
  // A user with nothing stored is held too: no rows read the next turn.
  recall_index fresh{16u << 20};
  for (int turn = 0; turn < 2; ++turn) {
    EXPECT_TRUE(fresh.memories(*db_, "nobody", "green tea", 9500).empty());
    EXPECT_TRUE(fresh.episodes(*db_, "nobody", "green tea", "elsewhere", 0, 9500).empty());
  }
  EXPECT_EQ(fresh.stats().read, 2u);
  EXPECT_EQ(fresh.stats().held, 2u);
}

// A user's held episodes keep ranking as the rows read whole while turns
// keep adding one: their vectors are kept by dimension in slots that the
// added rows claim, and move to new columns whenever those fill (room for
// twice the rows held, at most 250: then every 50 turns). A vector lost or
// put in the wrong slot on the way ranks another episode first. Asked
// from one of the two conversations, the episodes in that turn's window
// (its conversation, seq from the window's start) are left out as when
// read whole: the held rows' conversations and seqs are kept in blocks
// of their own, copied from version to version.
TEST_P(store_contract, held_episodes_rank_as_read_whole_while_turns_keep_adding) {
  recall_index index{16u << 20};
  auto t = user_turn("fay", "s1", "q", "r1", 1);
  auto other = user_turn("fay", "s2", "q", "r2", 2);
  const size_t turns = 330;
  const int64_t window = 6;
  auto name = [](size_t k) { return "beacon" + std::to_string(k * 7919 % 10007); };
  for (size_t k = 0; k < turns; ++k) {
    auto seq = static_cast<int64_t>(10 + k);
    tx([&](store_backend& db) {
      db.add_episode(episode_of(k % 3 == 0 ? other.conversation_id : t.conversation_id, "fay",
                                seq, "Tell me about " + name(k), "It is the " + name(k) + " story.",
                                static_cast<int64_t>(1000 + k)));
      return 0;
    });
    // The newest, one from the middle, the oldest still held.
    for (size_t asked : {k, k / 2, k >= 200 ? k - 199 : 0}) {
      auto q = "what about " + name(asked) + "?";
      auto now = static_cast<int64_t>(5000 + k);
      auto rows = db_->recent_episodes("fay", 200);
      EXPECT_EQ(index.episodes(*db_, "fay", q, "elsewhere", 0, now, 3, 0.1),
                recall_episodes(q, rows, "elsewhere", 0, 3, 0.1))
          << "turn " << k << ": " << q;
      EXPECT_EQ(index.episodes(*db_, "fay", q, t.conversation_id, seq - window, now, 3, 0.1),
                recall_episodes(q, rows, t.conversation_id, seq - window, 3, 0.1))
          << "turn " << k << " in the window's conversation: " << q;
    }
  }
  auto served = index.stats();
  EXPECT_EQ(served.read, 1u) << "read whole only at first";
  EXPECT_EQ(served.added, turns - 1);
  EXPECT_EQ(served.held, 5 * turns);
}

// A user's held memories keep ranking as the rows read whole while turns
// keep adding one, long after the first ones left the newest 200: each
// version of the rows points into the batches the turns before added, and
// the rows that left are dropped once the chain holds twice the rows kept
// (they are copied into one batch). What the index holds stays bounded:
// without the cut it would grow with every turn.
TEST_P(store_contract, held_memories_rank_as_read_whole_and_stay_bounded_while_turns_keep_adding) {
  recall_index index{64u << 20};
  const size_t turns = 700;
  auto name = [](size_t k) { return "harbour" + std::to_string(k * 7919 % 10007); };
  size_t bytes_at_300 = 0, most = 0;
  for (size_t k = 0; k < turns; ++k) {
    ASSERT_TRUE(tx([&](store_backend& db) {
      memory_record m;
      m.user_id = "gil";
      m.kind = "fact";
      m.content = "I sailed from " + name(k) + " once";
      m.created_at = static_cast<int64_t>(1000 + k);
      return db.add_memory(m);
    }));
    auto now = static_cast<int64_t>(5000 + k);
    std::vector<std::pair<std::string, int64_t>> all;
    for (auto& m : db_->list_memories("gil", now))
      all.emplace_back(m.content, m.created_at);
    // The newest, one from the middle, the oldest still held.
    for (size_t asked : {k, k / 2, k >= 199 ? k - 199 : 0}) {
      auto q = "did I sail from " + name(asked) + "?";
      ASSERT_EQ(index.memories(*db_, "gil", q, now), recall_memories(q, all, 5))
          << "turn " << k << ": " << q;
    }
    if (k == 300)
      bytes_at_300 = index.stats().bytes;
    most = std::max<size_t>(most, index.stats().bytes);
  }
  EXPECT_EQ(index.stats().read, 1u) << "read whole only at first";
  EXPECT_EQ(index.stats().added, turns - 1);
  ASSERT_GT(bytes_at_300, 0u);
  EXPECT_LE(most, bytes_at_300 * 3 / 2) << "the rows that left the newest 200 are dropped";
}

// Recalled episodes' texts this process did not keep when they were
// written (another node wrote them, or they fell out of the cache) are
// read by id once and then kept: the next turn that recalls them reads
// none (on PostgreSQL each read is a round trip).
TEST_P(store_contract, recalled_texts_read_by_id_are_kept_for_the_next_turn) {
  auto t = user_turn("gus", "s1", "q", "r1", 1);
  for (int k = 0; k < 6; ++k)
    tx([&](store_backend& db) {
      auto name = "beacon" + std::to_string(k);
      db.add_episode(episode_of(t.conversation_id, "gus", 10 + k, "Tell me about " + name,
                                "It is the " + name + " story.", 1000 + k));
      return 0;
    });
  set_recall_cache_budget(16u << 20);  // forgets what was kept when they were written
  recall_index index{16u << 20};
  const std::string q = "what about beacon3 and beacon4?";
  auto first = index.episodes(*db_, "gus", q, "elsewhere", 0, 5000, 3, 0.1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, recall_episodes(q, db_->recent_episodes("gus", 200), "elsewhere", 0, 3, 0.1));
  EXPECT_EQ(index.stats().texts_read, first.size());
  auto second = index.episodes(*db_, "gus", q, "elsewhere", 0, 5001, 3, 0.1);
  EXPECT_EQ(second, first);
  EXPECT_EQ(index.stats().texts_read, first.size()) << "read by id again";
}

// A connection made again has none of the statements the one before
// prepared: after the server ended it, the next read connects again and
// prepares what it runs again (it would fail on a statement name the new
// server process does not know).
TEST_P(store_contract, a_connection_made_again_prepares_its_statements_again) {
  if (GetParam() == "sqlite")
    GTEST_SKIP() << "PostgreSQL connections only";
  auto t = user_turn("ann", "s1", "hello", "r1", 1);
  ASSERT_EQ(db_->history(t.conversation_id, 10).size(), 1u);
  ASSERT_EQ(db_->core_memory("ann"), "{}");
  auto other = open_again();
  other->execute_script(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE datname = current_database() AND pid <> pg_backend_pid()");
  auto again = db_->history(t.conversation_id, 10);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].content, "hello");
  EXPECT_EQ(db_->core_memory("ann"), "{}");
  // Writes too, in a transaction begun on the new connection.
  auto next = user_turn("ann", "s1", "again", "r2", 2);
  EXPECT_EQ(next.conversation_id, t.conversation_id);
  EXPECT_EQ(db_->history(t.conversation_id, 10).size(), 2u);
  // A turn's context, whose reads go ahead in one pipeline, on a
  // connection the server ended meanwhile: read whole on a new one.
  other->execute_script(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE datname = current_database() AND pid <> pg_backend_pid()");
  auto ctx = read_turn_context(*db_, t.conversation_id, "ann", "hello", 10, 0, false, 3);
  EXPECT_TRUE(ctx.failed.empty()) << ctx.failed.front();
  EXPECT_EQ(ctx.history.size(), 2u);
  EXPECT_EQ(ctx.core_memory, "{}");
  EXPECT_EQ(db_->history(t.conversation_id, 10).size(), 2u) << "and the connection is usable";
  // A transaction's first statement, its BEGIN riding with it, on a
  // connection the server ended: sent again, whole, on a new one.
  other->execute_script(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE datname = current_database() AND pid <> pg_backend_pid()");
  auto third = user_turn("ann", "s1", "once more", "r3", 4);
  EXPECT_EQ(third.conversation_id, t.conversation_id);
  EXPECT_FALSE(third.existing);
  EXPECT_EQ(open_again()->history(t.conversation_id, 10).size(), 3u) << "committed";
}

// A group commit as the store's writer makes it (store_executor): each
// job under a savepoint, one that fails undone alone, one that writes
// nothing, the rest committed together. On PostgreSQL BEGIN, SAVEPOINT and
// RELEASE wait for the next statement and go with it in one round trip:
// the batch costs its jobs' statements and its COMMIT, nothing more.
TEST_P(store_contract, a_group_commit_undoes_a_failing_job_alone) {
  auto* pg = dynamic_cast<pg_backend*>(db_.get());
  auto trips = [&] { return pg ? pg->round_trips() : 0; };
  auto open = [](const std::string& session) {
    return [session](store_backend& db) { db.begin_turn("gus", session, "m", "", 1); };
  };
  // The same statements outside a transaction, for their round trips.
  auto before = trips();
  open("alone-1")(*db_);
  open("alone-2")(*db_);
  auto statements = trips() - before;
  std::vector<std::string> errors;
  before = trips();
  db_->begin();
  errors.push_back(in_savepoint(*db_, [&] { open("a")(*db_); }));
  errors.push_back(in_savepoint(*db_, [&] {}));
  errors.push_back(in_savepoint(*db_, [&] { open("b")(*db_); }));
  db_->commit();
  if (pg)
    EXPECT_EQ(trips() - before, statements + 1) << "the control statements went with the jobs'";
  errors.push_back(tx([&](store_backend& db) {
    return in_savepoint(db, [&] {
      open("c")(db);
      stored_message bad;
      bad.conversation_id = "missing";
      bad.content = "x";
      db.finish_turn(bad, 1);
    });
  }));
  db_->begin();
  errors.push_back(in_savepoint(*db_, [&] { open("d")(*db_); }));
  errors.push_back(in_savepoint(*db_, [&] {
    open("e")(*db_);
    throw store_error("the job gave up");
  }));
  errors.push_back(in_savepoint(*db_, [&] { open("f")(*db_); }));
  db_->commit();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "");
  EXPECT_NE(errors[3], "");
  EXPECT_EQ(errors[4], "");
  EXPECT_EQ(errors[5], "the job gave up");
  EXPECT_EQ(errors[6], "");
  std::set<std::string> sessions;
  for (auto& c : db_->list_conversations("gus", 50, "").conversations)
    sessions.insert(c.session_id);
  EXPECT_EQ(sessions, (std::set<std::string>{"alone-1", "alone-2", "a", "b", "d", "f"}));
}

// Writers of one conversation on two connections (two nodes, or a node's
// writer and a command) take turns: each turn's two messages get the next
// two seqs, whoever writes first, and neither fails on a seq the other
// took. On PostgreSQL the conversation's row lock orders them and each
// message counts its seq in its own statement.
TEST_P(store_contract, two_writers_of_one_conversation_number_every_message_once) {
  if (GetParam() == "sqlite")
    GTEST_SKIP() << "one writer at a time by construction";
  constexpr int turns = 40;
  std::vector<std::string> errors(2);
  auto write = [&](int w) {
    try {
      auto db = open_again();
      for (int i = 0; i < turns; ++i) {
        auto request = "w" + std::to_string(w) + "-" + std::to_string(i);
        db->begin();
        auto t = db->begin_turn("pat", "s1", "question " + request, request, 1000 + i);
        stored_message m;
        m.conversation_id = t.conversation_id;
        m.role = "assistant";
        m.content = "answer " + request;
        m.request_id = request;
        db->finish_turn(m, 1000 + i);
        db->commit();
      }
    } catch (const std::exception& e) {
      errors[w] = e.what();
    }
  };
  std::thread a{write, 0}, b{write, 1};
  a.join();
  b.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  auto t = user_turn("pat", "s1", "last", "last", 5000);
  auto all = db_->history(t.conversation_id, 1000);
  ASSERT_EQ(all.size(), 2u * 2 * turns + 1);
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i].seq, static_cast<int64_t>(i + 1));
  for (size_t i = 0; i + 1 < all.size(); i += 2) {
    EXPECT_EQ(all[i].role, "user") << i;
    EXPECT_EQ(all[i + 1].role, "assistant") << i;
    EXPECT_EQ(all[i].request_id, all[i + 1].request_id) << "a turn split by another at " << i;
  }
}

// Row ids: 32 hex digits, later ones sorting later (each table's id index
// grows at its right end), distinct within one millisecond.
TEST(row_ids, are_hex_sort_by_time_and_do_not_repeat) {
  test::expect_ids_in_time_order([] { return new_id(); }, "");
}

// The mark of rows held (store_backend.hpp, `after`): on SQLite only rows
// committed past it come back, whatever their stamp, also once another
// user's newest row was deleted (its rowid is given again); on PostgreSQL
// there is no mark and every row in the time window comes back.
TEST_P(store_contract, rows_past_a_mark_are_those_committed_after_it) {
  auto eve = user_turn("eve", "s1", "q", "r1", 1);
  auto bob = user_turn("bob", "s1", "q", "r2", 2);
  auto add = [&](const turn_opened& t, const std::string& user, int64_t at) {
    return keep_episode(t, user, "turn at " + std::to_string(at), at, new_id()).id;
  };
  auto memory = [&](const std::string& user, const std::string& content, int64_t at) {
    tx([&](store_backend& db) {
      memory_record m;
      m.user_id = user;
      m.kind = "preference";
      m.content = content;
      m.created_at = at;
      return db.add_memory(m);
    });
  };
  auto first = add(eve, "eve", 1000);
  memory("eve", "I like tea", 1000);
  int64_t episodes_mark = 0, memories_mark = 0;
  ASSERT_EQ(db_->recent_episode_keys("eve", 200, store_backend::all_time, &episodes_mark).size(),
            1u);
  ASSERT_EQ(db_->list_memories("eve", 5000, store_backend::all_time, &memories_mark).size(), 1u);
  bool marked = GetParam() == "sqlite";
  EXPECT_EQ(episodes_mark > 0, marked);
  EXPECT_EQ(memories_mark > 0, marked);

  // Another user's newest rows, deleted: their rowids are given again.
  auto bobs = add(bob, "bob", 1001);
  memory("bob", "I like coffee", 1001);
  tx([&](store_backend& db) { return db.delete_conversation(bob.conversation_id); });
  EXPECT_EQ(tx([&](store_backend& db) { return db.delete_memories("bob", ""); }), 1);
  // Eve's next rows: one stamped after the held one, one before it.
  auto later = add(eve, "eve", 1002);
  auto earlier = add(eve, "eve", 999);
  memory("eve", "I like green tea", 1002);
  memory("eve", "I like black tea", 999);

  std::set<std::string> ids, contents;
  auto mark = episodes_mark;
  for (auto& k : db_->recent_episode_keys("eve", 200, 0, &mark))
    ids.insert(k.id);
  auto memory_mark = memories_mark;
  for (auto& m : db_->list_memories("eve", 5000, 0, &memory_mark))
    contents.insert(m.content);
  if (marked) {
    EXPECT_EQ(ids, (std::set<std::string>{later, earlier}));
    EXPECT_EQ(contents, (std::set<std::string>{"I like green tea", "I like black tea"}));
    EXPECT_GT(mark, episodes_mark);
    EXPECT_GT(memory_mark, memories_mark);
    // Past the new mark: nothing.
    EXPECT_TRUE(db_->recent_episode_keys("eve", 200, 0, &mark).empty());
    EXPECT_TRUE(db_->list_memories("eve", 5000, 0, &memory_mark).empty());
  } else {
    EXPECT_EQ(ids, (std::set<std::string>{first, later, earlier}));
    EXPECT_EQ(contents.size(), 3u);
    EXPECT_EQ(mark, 0);
    EXPECT_EQ(memory_mark, 0);
  }
  EXPECT_EQ(ids.count(bobs), 0u);
}

TEST_P(store_contract, summaries_are_written_only_against_the_version_they_were_computed_from) {
  turn_opened t;
  for (int i = 0; i < 5; ++i) {
    t = user_turn("ann", "s1", "question " + std::to_string(i), "r" + std::to_string(i), 10 * i);
    assistant_turn(t.conversation_id, "answer " + std::to_string(i), "r" + std::to_string(i),
                   10 * i + 1);
  }
  auto conv = t.conversation_id;
  auto none = db_->load_summary(conv);
  EXPECT_EQ(none.version, 0);
  EXPECT_TRUE(none.summary.empty());
  EXPECT_EQ(none.total_messages, 10);
  EXPECT_EQ(none.covered_messages, 0);

  summary_record s;
  s.conversation_id = conv;
  s.summary = "They asked five questions.";
  s.covered_seq = 4;
  auto save = [&](const summary_record& r, int64_t expected) {
    return tx([&](store_backend& db) { return db.save_summary(r, expected, 100); });
  };
  EXPECT_TRUE(save(s, 0));
  EXPECT_FALSE(save(s, 0)) << "a second first summary loses: one exists already";
  auto one = open_again()->load_summary(conv);
  EXPECT_EQ(one.version, 1);
  EXPECT_EQ(one.summary, "They asked five questions.");
  EXPECT_EQ(one.covered_seq, 4);
  EXPECT_EQ(one.covered_messages, 4);
  EXPECT_EQ(one.updated_at, 100);

  s.summary = "Merged.";
  s.covered_seq = 6;
  s.incremental_updates = 1;
  EXPECT_TRUE(save(s, 1));
  s.summary = "A stale writer.";
  EXPECT_FALSE(save(s, 1)) << "computed from version 1, but version 2 is stored";
  auto two = db_->load_summary(conv);
  EXPECT_EQ(two.version, 2);
  EXPECT_EQ(two.summary, "Merged.");
  EXPECT_EQ(two.incremental_updates, 1);
  EXPECT_EQ(two.covered_messages, 6);

  s.covered_seq = 99;
  EXPECT_FALSE(save(s, 2)) << "a summary must end at a stored message";

  tx([&](store_backend& db) { return db.clear_conversation("ann", "s1"); });
  auto cleared = db_->load_summary(conv);
  EXPECT_EQ(cleared.version, 0) << "clear drops the summary";
  EXPECT_EQ(cleared.total_messages, 0);
  s.covered_seq = 4;
  EXPECT_FALSE(save(s, 0)) << "a summary of cleared messages is not written";
  EXPECT_FALSE(save(s, 2));
}

TEST_P(store_contract, entity_graphs_are_replaced_per_kb_when_their_signature_changes) {
  kb_graph_rows g;
  g.kb = "science";
  g.signature = "v1";
  for (int i = 0; i < 1200; ++i) {  // more than one multi-row statement
    g.entities.push_back({"e:" + std::to_string(i), "Entity " + std::to_string(i), "named",
                          "mentioned in 1 chunk(s)"});
    g.relations.push_back({"r:" + std::to_string(i), "e:" + std::to_string(i),
                           "e:" + std::to_string((i + 1) % 1200), "co_occurs", 2.5,
                           "doc#" + std::to_string(i)});
  }
  auto other = g;
  other.kb = "cooking";
  other.entities.resize(3);
  other.relations.resize(2);
  using result = store_backend::graph_write;
  auto replace = [&](const kb_graph_rows& rows) {
    return tx([&](store_backend& db) { return db.write_graph(rows, 1); });
  };
  EXPECT_EQ(replace(g), result::written);
  EXPECT_EQ(replace(other), result::written);
  EXPECT_EQ(open_again()->graph_size("science"), (std::pair<int64_t, int64_t>{1200, 1200}));
  EXPECT_EQ(replace(g), result::unchanged) << "the same version is not rewritten";
  g.signature = "v2";
  g.entities.resize(10);
  g.relations.resize(4);
  EXPECT_EQ(replace(g), result::written);
  EXPECT_EQ(db_->graph_size("science"), (std::pair<int64_t, int64_t>{10, 4})) << "old rows gone";
  EXPECT_EQ(db_->graph_size("cooking"), (std::pair<int64_t, int64_t>{3, 2})) << "per KB";
}

// An ingest sends only what changed in the KB's graph, made against the
// graph it replaces: applied when the store holds that graph, refused
// (writing nothing) when it holds another.
TEST_P(store_contract, an_entity_graph_change_applies_only_to_the_graph_it_was_made_against) {
  using result = store_backend::graph_write;
  auto write = [&](const kb_graph_rows& rows) {
    return tx([&](store_backend& db) { return db.write_graph(rows, 1); });
  };
  auto entity = [](int i, const std::string& description) {
    return graph_entity_row{"e:" + std::to_string(i), "Entity " + std::to_string(i), "named",
                            description};
  };
  auto relation = [](int i, double weight) {
    return graph_relation_row{"r:" + std::to_string(i),
                              "e:" + std::to_string(i),
                              "e:" + std::to_string(i + 1),
                              "co_occurs",
                              weight,
                              "doc#" + std::to_string(i)};
  };
  kb_graph_rows g;
  g.kb = "science";
  g.signature = "v1";
  for (int i = 0; i < 20; ++i) {
    g.entities.push_back(entity(i, "mentioned in 1 chunk(s)"));
    g.relations.push_back(relation(i, 1));
  }
  ASSERT_EQ(write(g), result::written);

  kb_graph_rows change;
  change.kb = "science";
  change.signature = "v2";
  change.base_signature = "v0";
  change.removed_entities = {"e:3", "e:4"};
  change.removed_relations = {"r:3"};
  change.entities = {entity(5, "mentioned in 2 chunk(s)"), entity(20, "new"), entity(21, "new")};
  change.relations = {relation(5, 2), relation(20, 1)};
  change.entity_count = 20 - 2 + 2;
  change.relation_count = 20 - 1 + 1;
  EXPECT_EQ(write(change), result::stale_base);
  EXPECT_EQ(db_->graph_size("science"), (std::pair<int64_t, int64_t>{20, 20}))
      << "a change against another graph writes nothing";
  change.base_signature = "v1";
  EXPECT_EQ(write(change), result::written);
  EXPECT_EQ(open_again()->graph_size("science"), (std::pair<int64_t, int64_t>{20, 20}))
      << "two entities and a relation removed, as many added, the changed ones updated in place";
  EXPECT_EQ(write(change), result::unchanged) << "v2 is stored already";
  change.signature = "v3";
  EXPECT_EQ(write(change), result::stale_base) << "the store holds v2 now, not v1";

  // Whether the rows hold what the change said: a change against v2 that
  // removes the rows it should have updated or added finds them all.
  kb_graph_rows check;
  check.kb = "science";
  check.signature = "v3";
  check.base_signature = "v2";
  check.removed_entities = {"e:5", "e:20", "e:21"};
  check.removed_relations = {"r:5", "r:20"};
  EXPECT_EQ(write(check), result::written);
  EXPECT_EQ(db_->graph_size("science"), (std::pair<int64_t, int64_t>{17, 18}));
}

TEST_P(store_contract, turns_number_messages_per_conversation) {
  auto a = user_turn("u", "s", "hello", "r1", 1);
  auto reply = assistant_turn(a.conversation_id, "hi there", "r1", 2);
  auto b = user_turn("u", "s", "again", "r2", 3);
  auto other = user_turn("u", "s2", "elsewhere", "", 4);
  EXPECT_EQ(a.seq, 1);
  EXPECT_EQ(b.seq, 3);
  EXPECT_EQ(a.conversation_id, b.conversation_id);
  EXPECT_NE(a.conversation_id, other.conversation_id);
  EXPECT_EQ(other.seq, 1);
  auto h = db_->history(a.conversation_id, 10);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].content, "hello");
  EXPECT_EQ(h[1].message_id, reply);
  EXPECT_EQ(h[1].role, "assistant");
  EXPECT_EQ(h[2].request_id, "r2");
  auto last = db_->history(a.conversation_id, 2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].seq, 2);
  EXPECT_EQ(last[1].seq, 3);
}

TEST_P(store_contract, a_known_request_id_writes_nothing_and_reports_the_stored_turn) {
  auto first = user_turn("u", "s", "hello", "r1", 1);
  auto again = user_turn("u", "s", "hello", "r1", 2);
  EXPECT_TRUE(again.existing);
  EXPECT_FALSE(again.has_answer);
  EXPECT_EQ(again.message_id, first.message_id);
  assistant_turn(first.conversation_id, "partial", "r1", 3, false);
  auto third = user_turn("u", "s", "hello", "r1", 4);
  EXPECT_TRUE(third.has_answer);
  EXPECT_EQ(third.answer.content, "partial");
  EXPECT_FALSE(third.answer.completed);
  EXPECT_EQ(db_->history(first.conversation_id, 10).size(), 2u);
}

TEST_P(store_contract, a_failed_job_is_undone_alone_inside_a_transaction) {
  db_->begin();
  db_->savepoint();
  auto ok = db_->begin_turn("u", "s", "kept", "", 1);
  db_->release_savepoint();
  db_->savepoint();
  stored_message bad;
  bad.conversation_id = "missing";  // foreign key violation
  bad.content = "x";
  EXPECT_THROW(db_->finish_turn(bad, 2), store_error);
  db_->rollback_to_savepoint();
  db_->commit();
  EXPECT_EQ(db_->history(ok.conversation_id, 10).size(), 1u);
}

// Regression: a cached SQLite statement left on its row (a single-row
// lookup such as conversation_owner) kept its read transaction open, so the
// reader connection stayed on that snapshot and missed every later commit.
TEST_P(store_contract, a_reader_sees_commits_made_after_its_previous_reads) {
  auto reader = open_again();
  auto a = user_turn("u", "s", "one", "r1", 1);
  EXPECT_EQ(reader->conversation_owner(a.conversation_id), "u");
  EXPECT_EQ(reader->history(a.conversation_id, 10).size(), 1u);
  assistant_turn(a.conversation_id, "two", "r1", 2);
  EXPECT_EQ(reader->history(a.conversation_id, 10).size(), 2u);
  EXPECT_EQ(reader->list_conversations("u", 10, "").conversations.at(0).message_count, 2);
  auto b = user_turn("u", "s", "three", "r2", 3);
  EXPECT_EQ(reader->messages_page(b.conversation_id, 10, 0).size(), 3u);
}

TEST_P(store_contract, conversations_are_listed_newest_first_in_pages) {
  for (int i = 0; i < 5; ++i)
    user_turn("u", "s" + std::to_string(i), "question " + std::to_string(i), "", 100 + i);
  user_turn("someone_else", "s0", "not yours", "", 200);
  auto p1 = db_->list_conversations("u", 2, "");
  ASSERT_EQ(p1.conversations.size(), 2u);
  EXPECT_EQ(p1.conversations[0].session_id, "s4");
  EXPECT_EQ(p1.conversations[0].first_message, "question 4");
  EXPECT_EQ(p1.conversations[0].message_count, 1);
  EXPECT_EQ(p1.conversations[1].session_id, "s3");
  ASSERT_FALSE(p1.next_cursor.empty());
  auto p2 = db_->list_conversations("u", 2, p1.next_cursor);
  ASSERT_EQ(p2.conversations.size(), 2u);
  EXPECT_EQ(p2.conversations[0].session_id, "s2");
  auto p3 = db_->list_conversations("u", 2, p2.next_cursor);
  ASSERT_EQ(p3.conversations.size(), 1u);
  EXPECT_EQ(p3.conversations[0].session_id, "s0");
  EXPECT_TRUE(p3.next_cursor.empty());
  // Exactly `limit` left: no further page.
  auto all = db_->list_conversations("u", 5, "");
  EXPECT_EQ(all.conversations.size(), 5u);
  EXPECT_TRUE(all.next_cursor.empty());
  EXPECT_TRUE(db_->list_conversations("nobody", 10, "").conversations.empty());
}

TEST_P(store_contract, message_pages_go_backwards_and_read_oldest_first) {
  auto t = user_turn("u", "s", "m1", "", 1);
  for (int i = 2; i <= 7; ++i)
    assistant_turn(t.conversation_id, "m" + std::to_string(i), "", i);
  auto newest = db_->messages_page(t.conversation_id, 3, 0);
  ASSERT_EQ(newest.size(), 3u);
  EXPECT_EQ(newest[0].seq, 5);
  EXPECT_EQ(newest[2].seq, 7);
  auto older = db_->messages_page(t.conversation_id, 3, newest[0].seq);
  ASSERT_EQ(older.size(), 3u);
  EXPECT_EQ(older[0].seq, 2);
  EXPECT_EQ(older[2].seq, 4);
  auto oldest = db_->messages_page(t.conversation_id, 3, older[0].seq);
  ASSERT_EQ(oldest.size(), 1u);
  EXPECT_EQ(oldest[0].content, "m1");
  EXPECT_TRUE(db_->messages_page(t.conversation_id, 3, 1).empty());
  EXPECT_EQ(db_->conversation_owner(t.conversation_id), "u");
  EXPECT_EQ(db_->conversation_owner("nope"), "");
}

TEST_P(store_contract, clear_drops_messages_but_keeps_the_conversation) {
  auto t = user_turn("u", "s", "q", "", 1);
  assistant_turn(t.conversation_id, "a", "", 2);
  auto cleared = tx([&](store_backend& db) { return db.clear_conversation("u", "s"); });
  EXPECT_EQ(cleared, 2);
  EXPECT_TRUE(db_->history(t.conversation_id, 10).empty());
  EXPECT_EQ(db_->conversation_owner(t.conversation_id), "u");
  EXPECT_EQ(tx([&](store_backend& db) { return db.clear_conversation("u", "unknown"); }), 0);
  // Numbering restarts after a clear.
  EXPECT_EQ(user_turn("u", "s", "fresh", "", 3).seq, 1);
}

TEST_P(store_contract, delete_removes_everything) {
  auto t = user_turn("u", "s", "q", "", 1);
  auto a = assistant_turn(t.conversation_id, "a", "", 2);
  feedback_vote v;
  v.message_id = a;
  v.thread_id = "s";
  v.query = "q";
  tx([&](store_backend& db) { return db.toggle_feedback(v, 3); });
  EXPECT_TRUE(tx([&](store_backend& db) { return db.delete_conversation(t.conversation_id); }));
  EXPECT_EQ(db_->conversation_owner(t.conversation_id), "");
  EXPECT_TRUE(db_->history(t.conversation_id, 10).empty());
  EXPECT_FALSE(tx([&](store_backend& db) { return db.delete_conversation(t.conversation_id); }));
}

TEST_P(store_contract, feedback_toggles) {
  auto t = user_turn("u", "s", "q", "", 1);
  auto a = assistant_turn(t.conversation_id, "a", "", 2);
  feedback_vote v;
  v.message_id = a;
  v.thread_id = "s";
  v.query = "q";
  v.is_positive = true;
  auto vote = [&](bool positive) {
    v.is_positive = positive;
    return tx([&](store_backend& db) { return db.toggle_feedback(v, 3); });
  };
  EXPECT_EQ(vote(true), "positive");
  EXPECT_EQ(vote(true), "none");  // same vote again removes it
  EXPECT_EQ(vote(false), "negative");
  EXPECT_EQ(vote(true), "positive");  // the opposite vote replaces it
  v.message_id = "no_such_message";
  EXPECT_EQ(vote(true), "");
}

TEST_P(store_contract, flow_state_is_per_conversation_replaced_and_cleared) {
  auto a = user_turn("ann", "s1", "refund please", "r1", 1000);
  auto b = user_turn("ann", "s2", "hello", "r2", 1001);
  EXPECT_EQ(db_->load_flow_state(a.conversation_id), "");
  EXPECT_TRUE(tx([&](store_backend& db) {
    return db.save_flow_state(a.conversation_id, R"({"intent":"refund"})", 1002);
  }));
  EXPECT_TRUE(tx([&](store_backend& db) {
    return db.save_flow_state(a.conversation_id, R"({"intent":"refund","ask_rounds":1})", 1003);
  }));
  EXPECT_EQ(open_again()->load_flow_state(a.conversation_id),
            R"({"intent":"refund","ask_rounds":1})");
  EXPECT_EQ(db_->load_flow_state(b.conversation_id), "") << "per conversation";
  EXPECT_FALSE(tx([&](store_backend& db) {
    return db.save_flow_state("no-such-conversation", "{}", 1004);
  })) << "unknown conversations are refused";
  // "" deletes; so does clearing the conversation.
  EXPECT_TRUE(tx([&](store_backend& db) { return db.save_flow_state(a.conversation_id, "", 1005); }));
  EXPECT_EQ(db_->load_flow_state(a.conversation_id), "");
  tx([&](store_backend& db) { return db.save_flow_state(b.conversation_id, "{}", 1006); });
  tx([&](store_backend& db) { return db.clear_conversation("ann", "s2"); });
  EXPECT_EQ(db_->load_flow_state(b.conversation_id), "");
}

// -- API keys (docs/security.md) -------------------------------------------------

api_key_record key_named(const std::string& name, const std::string& hash, int64_t t) {
  api_key_record k;
  k.id = new_id();
  k.name = name;
  k.hash = hash;
  k.tenant = "acme";
  k.user_prefix = "acme:";
  k.scopes = "chat,kb:read";
  k.kbs = "handbook,faq";
  k.rate = 2.5;
  k.burst = 7;
  k.created_at_ms = t;
  return k;
}

TEST_P(store_contract, api_keys_round_trip_every_field) {
  auto k = key_named("support-bot", std::string(64, 'a'), 1000);
  EXPECT_TRUE(tx([&](store_backend& db) { return db.create_api_key(k); }));
  auto keys = open_again()->list_api_keys();
  ASSERT_EQ(keys.size(), 1u);
  auto& got = keys[0];
  EXPECT_EQ(got.id, k.id);
  EXPECT_EQ(got.name, "support-bot");
  EXPECT_EQ(got.hash, k.hash);
  EXPECT_EQ(got.tenant, "acme");
  EXPECT_EQ(got.user_prefix, "acme:");
  EXPECT_EQ(got.scopes, "chat,kb:read");
  EXPECT_EQ(got.kbs, "handbook,faq");
  EXPECT_DOUBLE_EQ(got.rate, 2.5);
  EXPECT_EQ(got.burst, 7);
  EXPECT_EQ(got.created_at_ms, 1000);
  EXPECT_EQ(got.revoked_at_ms, 0);
}

TEST_P(store_contract, api_key_names_are_unique_and_listed_in_order) {
  EXPECT_TRUE(tx([&](store_backend& db) { return db.create_api_key(key_named("b", "h1", 1)); }));
  EXPECT_TRUE(tx([&](store_backend& db) { return db.create_api_key(key_named("a", "h2", 2)); }));
  // The same name again writes nothing, the first key stays.
  EXPECT_FALSE(tx([&](store_backend& db) { return db.create_api_key(key_named("b", "h3", 3)); }));
  auto keys = db_->list_api_keys();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].name, "a");
  EXPECT_EQ(keys[1].name, "b");
  EXPECT_EQ(keys[1].hash, "h1");
}

TEST_P(store_contract, api_key_revocation_is_recorded_once) {
  tx([&](store_backend& db) { return db.create_api_key(key_named("k", "h", 1)); });
  EXPECT_FALSE(tx([&](store_backend& db) { return db.revoke_api_key("nope", 5); }));
  EXPECT_TRUE(tx([&](store_backend& db) { return db.revoke_api_key("k", 5); }));
  // Already revoked: nothing to do, the first time stays.
  EXPECT_FALSE(tx([&](store_backend& db) { return db.revoke_api_key("k", 9); }));
  auto keys = open_again()->list_api_keys();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].revoked_at_ms, 5);
  // A revoked name is not reusable: a name always means one key.
  EXPECT_FALSE(tx([&](store_backend& db) { return db.create_api_key(key_named("k", "h2", 10)); }));
}

// -- cluster membership and KB content (docs/cluster.md) ----------------------------

TEST_P(store_contract, a_member_row_is_inserted_then_replaced) {
  member_info m{"node-b", "127.0.0.1:4702", "retrieval", "*", 100, 200, "up"};
  tx([&](store_backend& db) {
    db.write_member(m);
    db.write_member(member_info{"node-a", "127.0.0.1:4701", "frontend", "", 50, 60, "up"});
    return true;
  });
  m.heartbeat_at_ms = 900;
  m.status = "left";
  m.started_at_ms = 150;  // restarted under the same name
  tx([&](store_backend& db) {
    db.write_member(m);
    return true;
  });
  auto rows = open_again()->list_members();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "node-a");
  EXPECT_EQ(rows[0].roles, "frontend");
  EXPECT_EQ(rows[1].name, "node-b");
  EXPECT_EQ(rows[1].address, "127.0.0.1:4702");
  EXPECT_EQ(rows[1].kbs, "*");
  EXPECT_EQ(rows[1].started_at_ms, 150);
  EXPECT_EQ(rows[1].heartbeat_at_ms, 900);
  EXPECT_EQ(rows[1].status, "left");
}

TEST_P(store_contract, kb_documents_are_versioned_and_read_back_by_version) {
  std::vector<document> first{{"d1", "One", "text one", "a.md"}, {"d2", "Two", "text two", ""}};
  auto v1 = tx([&](store_backend& db) {
    return db.put_kb_documents("docs", R"({"name":"docs"})", first, 10);
  });
  auto v2 = tx([&](store_backend& db) {
    return db.put_kb_documents("docs", R"({"name":"docs","top_k":3})",
                               {{"d2", "Two again", "text two, replaced", ""}}, 20);
  });
  auto other = tx([&](store_backend& db) {
    return db.put_kb_documents("faq", R"({"name":"faq"})", {}, 30);
  });
  EXPECT_EQ(v1, 1);
  EXPECT_EQ(v2, 2);
  EXPECT_EQ(other, 1);
  auto db = open_again();
  auto versions = db->list_kb_versions();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].kb, "docs");
  EXPECT_EQ(versions[0].version, 2);
  EXPECT_EQ(versions[0].settings, R"({"name":"docs","top_k":3})");
  EXPECT_EQ(versions[1].kb, "faq");
  // Everything after version 0: both documents, d2 as replaced.
  auto all = db->kb_documents_after("docs", 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "d1");
  EXPECT_EQ(all[0].text, "text one");
  EXPECT_EQ(all[0].source, "a.md");
  EXPECT_EQ(all[1].id, "d2");
  EXPECT_EQ(all[1].title, "Two again");
  // After version 1: only what version 2 wrote.
  auto newer = db->kb_documents_after("docs", 1);
  ASSERT_EQ(newer.size(), 1u);
  EXPECT_EQ(newer[0].text, "text two, replaced");
  EXPECT_TRUE(db->kb_documents_after("docs", 2).empty());
  EXPECT_TRUE(db->kb_documents_after("faq", 0).empty());
}

INSTANTIATE_TEST_SUITE_P(backends, store_contract,
                         testing::Values("sqlite", "postgres", "postgres_unprepared"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
