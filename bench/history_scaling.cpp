// Does a turn's context cost grow with the user's history? (issue 20,
// target 5). Users with 0, 200, 10,000 and 100,000 stored turns — each
// turn a user and an assistant message, an episode and a stated memory,
// spread over conversations of 100 turns — and for each the time to build
// one turn's context exactly as the stream actor asks the store actor for
// it: the recent window, the summary, the core memory, the memories
// related to the question and the recalled episodes. SQLite on disk; the
// histories are written once in one transaction straight through the
// backend (set-up, not measured). Prints p50/p99 per user and the ratio to
// the user with no history; then what the writer's group commit of 11
// turns costs as the database grows. Never asserts.
//
//   build/bench/bench_history_scaling [--turns 100000] [--samples 300] [--recall-cache-mb 16]
//       [--recall-index-mb 16] [--postgres DSN]
//
// --postgres runs it on PostgreSQL instead (migrations applied; the users'
// names carry a run id, so a database used before does not mix in):
// tests/fixtures/pg_cluster start DIR PORT prints a DSN.
//
// --recall-cache-mb is the server's `[memory] recall_cache_mb` (0: recall
// tokenises memories and decodes episode vectors on every turn);
// --recall-index-mb its `[memory] recall_index_mb` (0: each turn reads the
// user's memories and episode keys whole; persistence/recall_index.hpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/store/store_actor.hpp"
#include "bench/bench_util.hpp"
#include "memory/long_term.hpp"
#include "memory/recall_cache.hpp"
#include "persistence/migrations.hpp"
#include "persistence/recall_index.hpp"
#include "persistence/postgres/pg_backend.hpp"
#include "persistence/sqlite/sqlite_backend.hpp"
#include "persistence/store_backend.hpp"
#include "protocol/type_ids.hpp"

using namespace ragtor;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr int window = 6;
constexpr int turns_per_conversation = 100;

// Varied, realistic-length turns: the question names a topic, the answer
// says something about it.
const char* topics[] = {"battery life of the K7 lock", "replacing the door sensor",
                        "firmware updates over Bluetooth", "the lighthouse of Port Quellin",
                        "green tea brewing temperature", "travel insurance for Norway",
                        "the schooner Marigold's cargo", "resetting a forgotten PIN"};

std::string question_of(size_t i) {
  return "Question " + std::to_string(i) + ": what should I know about "
         + topics[i % std::size(topics)] + "?";
}

std::string answer_of(size_t i) {
  std::string a = "About " + std::string{topics[i % std::size(topics)]} + ": ";
  for (int s = 0; s < 6; ++s)
    a += "Sentence " + std::to_string(s) + " of answer " + std::to_string(i)
         + " explains one more detail at some length. ";
  return a;
}

// What a finished turn leaves for recall: its episode (with the vector the
// store actor computes) and a stated memory, stamped `at`. Returns the
// episode's id.
std::string add_turn_rows(store_backend& db, const std::string& user,
                          const std::string& conversation, int64_t seq, const std::string& text,
                          const std::string& memory, int64_t at) {
  episode_record e;
  e.id = new_id();
  e.conversation_id = conversation;
  e.user_id = user;
  e.seq = seq;
  e.text = text;
  e.created_at = at;
  e.embedding = episode_embedding(e.text);
  db.add_episode(e);
  remember_episode_embedding(e.id, e.embedding);  // as the store actor does
  memory_record mem;
  mem.user_id = user;
  mem.kind = "preference";
  mem.content = memory;
  mem.created_at = at;
  db.add_memory(mem);
  return e.id;
}

// One whole turn as the store writes it: the user's message, the answer
// (request id `request`), then its episode and `memory`, stamped `at`.
void write_turn(store_backend& db, const std::string& user, const std::string& session,
                size_t i, const std::string& request, const std::string& memory, int64_t at) {
  auto q = question_of(i), a = answer_of(i);
  auto opened = db.begin_turn(user, session, q, request, at);
  stored_message m;
  m.conversation_id = opened.conversation_id;
  m.seq = opened.seq + 1;
  m.role = "assistant";
  m.content = a;
  m.request_id = request;
  m.created_at_ms = at;
  db.finish_turn(m, at);
  add_turn_rows(db, user, opened.conversation_id, opened.seq + 1, episode_text(q, a), memory, at);
}

// Writes `turns` turns of user `user` (set-up, one transaction).
void write_history(store_backend& db, const std::string& user, size_t turns) {
  auto now = now_ms();
  db.begin();
  for (size_t i = 0; i < turns; ++i)
    write_turn(db, user, "s" + std::to_string(i / turns_per_conversation), i,
               "r" + std::to_string(i),
               "I prefer option " + std::to_string(i) + " for " + topics[i % std::size(topics)],
               now - static_cast<int64_t>(turns - i) * 1000);
  db.commit();
}

// What the writer's group commit costs with this many rows stored: commits
// of `per_commit` whole turns (both messages, the episode with its vector,
// a memory: what the store writes for a turn) by a user of their own, each
// timed with its COMMIT (on disk: WAL + fsync). Returns ms per commit.
std::vector<double> time_commits(store_backend& db, const std::string& user, int commits,
                                 int per_commit) {
  std::vector<double> ms;
  for (int c = 0; c < commits; ++c) {
    auto t0 = steady::now();
    db.begin();
    for (int k = 0; k < per_commit; ++k) {
      auto i = static_cast<size_t>(c * per_commit + k);
      write_turn(db, user, "w" + std::to_string(k), i, "w" + std::to_string(i),
                 "I prefer plan " + std::to_string(i), now_ms());
    }
    db.commit();
    ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
  }
  return ms;
}

struct user_case {
  std::string user;
  size_t turns;
  std::string conversation;  // where the measured turn happens
  int64_t seq = 0;
};

}  // namespace

int main(int argc, char** argv) {
  size_t max_turns = 100000;
  int samples = 300;
  int cache_mb = 16;
  int index_mb = 16;
  std::string dsn;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--turns")
      max_turns = std::stoul(argv[i + 1]);
    else if (a == "--samples")
      samples = std::stoi(argv[i + 1]);
    else if (a == "--recall-cache-mb")
      cache_mb = std::stoi(argv[i + 1]);
    else if (a == "--recall-index-mb")
      index_mb = std::stoi(argv[i + 1]);
    else if (a == "--postgres")
      dsn = argv[i + 1];
  }
  set_recall_cache_budget(static_cast<size_t>(cache_mb) << 20);
  auto dir = std::filesystem::temp_directory_path() / ("ragtor-bench-history-" + new_id());
  std::filesystem::create_directories(dir);
  auto path = dir / "bench.db";
  auto open = [&]() -> std::unique_ptr<store_backend> {
    if (!dsn.empty())
      return std::make_unique<pg_backend>(dsn);
    return std::make_unique<sqlite_backend>(path);
  };
  const char* backend_name = dsn.empty() ? "SQLite" : "PostgreSQL";
  auto run_id = new_id().substr(24);  // random digits (the first ones are the time)

  // The writer's commits as the database grows: 11 turns a commit is what
  // a group commit holds at 64 sustained streams (docs/performance.md).
  constexpr int commits_per_size = 40, turns_per_commit = 11;
  std::vector<std::pair<size_t, std::vector<double>>> commit_ms;
  size_t stored_turns = 0;

  std::vector<user_case> users;
  for (size_t n : {size_t{0}, size_t{200}, size_t{10000}, max_turns})
    if (n <= max_turns && (users.empty() || users.back().turns < n || n == 0))
      users.push_back({"user-" + run_id + "-" + std::to_string(n), n, "", 0});
  {
    auto db_ptr = open();
    auto& db = *db_ptr;
    apply_migrations(db, embedded_migrations());
    for (auto& u : users) {
      auto t0 = steady::now();
      write_history(db, u.user, u.turns);
      // The measured turn: a new message in the user's latest conversation.
      db.begin();
      auto session = "s" + std::to_string(u.turns / turns_per_conversation);
      auto opened = db.begin_turn(u.user, session, question_of(u.turns), "now", now_ms());
      db.commit();
      u.conversation = opened.conversation_id;
      u.seq = opened.seq;
      stored_turns += u.turns;
      commit_ms.emplace_back(stored_turns,
                             time_commits(db, "writer-" + run_id + "-" + std::to_string(u.turns),
                                          commits_per_size, turns_per_commit));
      stored_turns += commits_per_size * turns_per_commit;
      std::printf("set-up: %-12s %7zu turns written in %.1f s\n", u.user.c_str(), u.turns,
                  std::chrono::duration<double>(steady::now() - t0).count());
    }
  }

  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  store_options so;
  so.sqlite_path = path;
  so.postgres_dsn = dsn;
  so.recall_index_bytes = static_cast<size_t>(index_mb) << 20;
  auto store = *spawn_store(sys, so);
  bool failed = false;
  auto fail = [&](caf::error& e) {
    std::fprintf(stderr, "error: %s\n", sys.render(e).c_str());
    failed = true;
  };

  // One turn's context, as the stream asks for it (actors/stream/stream.cpp:
  // one turn_context request).
  auto context = [&](const user_case& u) {
    size_t items = 0;
    self->request(store, 10s, atom::history_v, u.conversation, u.user, question_of(u.turns),
                  int32_t{window + 1}, u.seq - window, false)
        .receive(
            [&](turn_context& c) {
              items = c.history.size() + c.memories.size() + c.episodes.size();
              if (!c.failed.empty()) {
                std::fprintf(stderr, "error: %s\n", c.failed.front().c_str());
                failed = true;
              }
            },
            fail);
    return items;
  };
  // The same work without the actors, on a connection of its own with its
  // own recall index, timed part by part for the breakdown: `steps` gets
  // window+summary+core, memories, episodes.
  constexpr size_t n_steps = 3;
  auto direct_db = open();
  auto& direct = *direct_db;
  recall_index index{static_cast<size_t>(index_mb) << 20}, none{0};
  auto breakdown = [&](const user_case& u, recall_index& index,
                       std::array<double, n_steps>& steps) {
    auto question = question_of(u.turns);
    size_t items = 0;
    auto now = now_ms();
    auto t = steady::now();
    auto lap = [&](size_t i) {
      auto at = steady::now();
      steps[i] = std::chrono::duration<double, std::milli>(at - t).count();
      t = at;
    };
    items += direct.history(u.conversation, window + 1).size();
    items += direct.load_summary(u.conversation).summary.size();
    items += direct.core_memory(u.user).size();
    lap(0);
    items += index.memories(direct, u.user, question, now).size();
    lap(1);
    items += index.episodes(direct, u.user, question, u.conversation, u.seq - window, now).size();
    lap(2);
    return items;
  };

  std::vector<std::vector<double>> ms(users.size());
  std::vector<std::array<std::vector<double>, n_steps>> step_ms(users.size());
  std::vector<std::vector<double>> direct_ms(users.size()), whole_ms(users.size()),
      one_read_ms(users.size());
  // The same work in the one call the store actor makes (read_turn_context:
  // on PostgreSQL its reads go in one pipeline), on the direct connection.
  auto one_read = [&](const user_case& u) {
    auto t = steady::now();
    auto c = read_turn_context(direct, u.conversation, u.user, question_of(u.turns), window + 1,
                               u.seq - window, false, now_ms(), &index);
    if (!c.failed.empty()) {
      std::fprintf(stderr, "error: %s\n", c.failed.front().c_str());
      failed = true;
    }
    return std::chrono::duration<double, std::milli>(steady::now() - t).count();
  };
  // The users in a new order each round: what ran just before (the
  // thread hand-offs of the last request, the caches the last read left)
  // changes one request's time by more than a user's history does, so no
  // user always follows the same one.
  std::vector<size_t> order(users.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937 shuffle_rng{7};
  for (int s = 0; s < samples && !failed; ++s) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (size_t i : order) {
      std::array<double, n_steps> steps{};
      auto t0 = steady::now();
      context(users[i]);
      ms[i].push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
      breakdown(users[i], index, steps);
      double sum = 0;
      for (size_t k = 0; k < n_steps; ++k) {
        step_ms[i][k].push_back(steps[k]);
        sum += steps[k];
      }
      direct_ms[i].push_back(sum);
      one_read_ms[i].push_back(one_read(users[i]));
      breakdown(users[i], none, steps);
      whole_ms[i].push_back(steps[0] + steps[1] + steps[2]);
    }
  }
  // Afterwards, the common case in service: each turn first adds the
  // previous turn's episode and memory (the vector remembered as the store
  // actor does), so the index adds rows instead of finding none new. The
  // rows are stamped as if the user's turns came 20 s apart (a turn takes
  // seconds of generation), from just after the history written above.
  // Direct, with an index of its own; not for the new user.
  recall_index adding{static_cast<size_t>(index_mb) << 20};
  std::vector<std::vector<double>> added_ms(users.size());
  auto turns_from = now_ms();
  for (int s = 0; s < samples && !failed; ++s)
    for (size_t i = 1; i < users.size(); ++i) {
      auto& u = users[i];
      // The episode lies outside the measured turn's window.
      add_turn_rows(direct, u.user, u.conversation, u.seq - window - 1,
                    episode_text(question_of(s), answer_of(s)),
                    "Lately I lean towards plan " + std::to_string(s) + " for "
                        + topics[s % std::size(topics)],
                    turns_from + (s + 1) * int64_t{20000});
      std::array<double, n_steps> steps{};
      breakdown(u, adding, steps);
      added_ms[i].push_back(steps[0] + steps[1] + steps[2]);
    }
  {
    auto c = adding.stats();
    std::printf("after a new turn, the index served %llu look-ups from what it held, %llu by "
                "adding rows, %llu by reading whole\n",
                static_cast<unsigned long long>(c.held), static_cast<unsigned long long>(c.added),
                static_cast<unsigned long long>(c.read));
  }
  std::printf("\ncontext of one turn, %d samples each (%s), recall cache %d MiB, recall "
              "index %d MiB\n",
              samples, backend_name, cache_mb, index_mb);
  std::printf(
      "(through the actor: the one request the stream sends to the store actor; direct: the "
      "same work called on a connection, with the index and part by part; in one read: the "
      "same in the one call the store actor makes; read whole: "
      "without the index; after a new turn: direct, when each turn first adds an episode and a "
      "memory, as in service)\n");
  std::printf(
      "| user's stored turns | through the actor p50 ms | p99 ms | p50 / no history | direct "
      "p50 ms | / no history | in one read p50 ms | window+summary+core | memories | episodes "
      "| read whole p50 ms | after a new turn p50 ms |\n|---|---|---|---|---|---|---|---|---|---|"
      "---|---|\n");
  double base = bench::percentile(ms[0], 0.5), direct_base = bench::percentile(direct_ms[0], 0.5);
  for (size_t i = 0; i < users.size(); ++i) {
    auto p50 = bench::percentile(ms[i], 0.5), direct_p50 = bench::percentile(direct_ms[i], 0.5);
    std::printf("| %zu | %.3f | %.3f | %.2f | %.3f | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n",
                users[i].turns, p50, bench::percentile(ms[i], 0.99), p50 / base, direct_p50,
                direct_p50 / direct_base, bench::percentile(one_read_ms[i], 0.5),
                bench::percentile(step_ms[i][0], 0.5),
                bench::percentile(step_ms[i][1], 0.5), bench::percentile(step_ms[i][2], 0.5),
                bench::percentile(whole_ms[i], 0.5),
                added_ms[i].empty() ? "—"
                                    : std::to_string(bench::percentile(added_ms[i], 0.5)).substr(0, 5)
                                          .c_str());
  }
  std::printf("\nthe writer's commits as the database grows (%s, %d commits of %d turns each, "
              "timed from BEGIN to COMMIT done)\n| turns stored | commit p50 ms | p99 ms | p50 / "
              "the first |\n|---|---|---|---|\n",
              backend_name, commits_per_size, turns_per_commit);
  for (auto& [turns, v] : commit_ms)
    std::printf("| %zu | %.2f | %.2f | %.2f |\n", turns, bench::percentile(v, 0.5),
                bench::percentile(v, 0.99),
                bench::percentile(v, 0.5) / bench::percentile(commit_ms.front().second, 0.5));
  caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(dir);
  return failed ? 1 : 0;
}
