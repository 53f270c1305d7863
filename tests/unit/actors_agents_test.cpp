// Retrieval agents under concurrent load, on a real actor system with
// several scheduler threads: many queries in flight on one (KB, agent type)
// answer exactly what the same queries answer one at a time; an ingest (a
// snapshot swap) during a query storm never yields an answer mixing old and
// new indexes; and a worker waiting for a remote embedding model keeps
// accepting queries (the model answers on a foreign thread). Deep research
// with a model follows the model's verdicts and falls back to RM3 when the
// model fails or answers nonsense. No sleeps and no timing assertions:
// every wait is for a message or a condition.
#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>
#include <utility>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/agents/agent_pool.hpp"
#include "llm/research_judge.hpp"
#include "protocol/errc.hpp"
#include "protocol/type_ids.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/agents.hpp"
#include "retrieval/kb_catalog.hpp"

using namespace ragtor;
namespace fs = std::filesystem;

namespace {

// A hang guard only: every request here is answered long before.
constexpr auto reply_timeout = std::chrono::seconds(120);

caf::actor_system_config& threaded_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", size_t{4});
  register_types(cfg);
  return cfg;
}

// The shipped demo KB's documents, `suffix` appended to each text (so a
// second version ranks differently).
std::vector<document> demo_documents(const std::string& suffix = "") {
  auto dir = fs::path{RAGTOR_SOURCE_DIR} / "examples/kb";
  std::vector<document> docs;
  for (auto& entry : fs::directory_iterator{dir}) {
    std::ifstream in{entry.path()};
    std::stringstream text;
    text << in.rdbuf();
    auto id = entry.path().stem().string();
    docs.push_back({id, id, text.str() + suffix, entry.path().string()});
  }
  std::sort(docs.begin(), docs.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return docs;
}

// Random queries made of 2 to 6 consecutive words of the KB's own chunks
// (seeded: the same queries every run).
std::vector<std::string> queries_from(const kb_snapshot& snap, size_t n, uint32_t seed) {
  std::mt19937 rng{seed};
  std::vector<std::string> out;
  while (out.size() < n) {
    auto& text = snap.chunks[rng() % snap.chunks.size()].text;
    std::istringstream words_in{text};
    std::vector<std::string> words{std::istream_iterator<std::string>{words_in}, {}};
    if (words.size() < 6)
      continue;
    auto len = 2 + rng() % 5;
    auto at = rng() % (words.size() - len);
    std::string q;
    for (size_t i = at; i < at + len; ++i)
      q += (q.empty() ? "" : " ") + words[i];
    out.push_back(q);
  }
  return out;
}

// A ranked list, id by id, with scores.
using ranked = std::vector<std::pair<std::string, double>>;

ranked ranked_of(const retrieval_result& r) {
  ranked out;
  for (auto& item : r.retrieval_results)
    out.emplace_back(item.result_id, item.score);
  return out;
}

std::string show(const ranked& r) {
  std::string out;
  for (auto& [id, score] : r)
    out += id + "=" + std::to_string(score) + " ";
  return out;
}

class agent_concurrency : public testing::Test {
protected:
  agent_concurrency() : sys(threaded_config(cfg)), self(sys) {}

  ~agent_concurrency() override {
    for (auto& a : agents)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  retrieval_agent_actor spawn_agent(std::shared_ptr<kb_catalog> catalog, std::string type,
                                    size_t workers) {
    auto agent = spawn_retrieval_agent(sys, std::move(catalog), "kb", std::move(type), workers);
    agents.push_back(agent);
    return agent;
  }

  // Sends every query before reading any answer, so all are in flight at
  // once; answers in query order (errors as their rendering).
  std::vector<caf::expected<retrieval_result>> storm(
      retrieval_agent_actor agent, const std::vector<std::string>& queries,
      const std::function<void(size_t)>& after = {}) {
    using handle = decltype(self->request(agent, reply_timeout, atom::retrieve_v, std::string{},
                                          std::string{}, retrieve_options{}));
    std::vector<handle> pending;
    for (size_t i = 0; i < queries.size(); ++i) {
      pending.push_back(self->request(agent, reply_timeout, atom::retrieve_v, queries[i],
                                      std::string{"t"}, retrieve_options{}));
      if (after)
        after(i);
    }
    std::vector<caf::expected<retrieval_result>> out;
    for (auto& h : pending)
      h.receive([&](retrieval_result& r) { out.emplace_back(std::move(r)); },
                [&](caf::error& err) { out.emplace_back(std::move(err)); });
    return out;
  }

  // One query at a time.
  caf::expected<retrieval_result> one(retrieval_agent_actor agent, const std::string& query) {
    return std::move(storm(agent, {query}).front());
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::vector<retrieval_agent_actor> agents;
};

TEST_F(agent_concurrency, concurrent_searches_answer_like_sequential_ones) {
  auto catalog = std::make_shared<kb_catalog>();
  catalog->put(kb_catalog::build_snapshot("kb", demo_documents(), {}));
  auto snap = catalog->get("kb");
  ASSERT_GT(snap->chunks.size(), 10u);
  auto queries = queries_from(*snap, 48, 7);
  for (auto type :
       {"hybrid_agent", "naive_rag_agent", "graph_agent", "deep_research_agent", "fusion_agent"}) {
    SCOPED_TRACE(type);
    auto agent = spawn_agent(catalog, type, 4);
    std::vector<ranked> sequential;
    for (auto& q : queries) {
      auto r = one(agent, q);
      ASSERT_TRUE(r) << sys.render(r.error());
      sequential.push_back(ranked_of(*r));
      // The plain function over the same snapshot agrees too.
      EXPECT_EQ(sequential.back(), ranked_of(run_agent(*snap, type, q, 5))) << q;
    }
    auto concurrent = storm(agent, queries);
    ASSERT_EQ(concurrent.size(), queries.size());
    size_t non_empty = 0;
    for (size_t i = 0; i < queries.size(); ++i) {
      ASSERT_TRUE(concurrent[i]) << sys.render(concurrent[i].error());
      auto got = ranked_of(*concurrent[i]);
      EXPECT_EQ(got, sequential[i]) << queries[i] << "\n concurrent: " << show(got)
                                    << "\n sequential: " << show(sequential[i]);
      non_empty += !got.empty();
    }
    EXPECT_GT(non_empty, queries.size() / 2) << "the queries should find something";
  }
  // status counts workers and what they served.
  std::string status;
  self->request(agents.front(), reply_timeout, atom::status_v)
      .receive([&](std::string& s) { status = s; },
               [&](caf::error& err) { FAIL() << sys.render(err); });
  EXPECT_NE(status.find("\"workers\":4"), std::string::npos) << status;
  EXPECT_NE(status.find("\"in_flight\":0"), std::string::npos) << status;
  EXPECT_NE(status.find("\"processed\":96"), std::string::npos) << status;
}

TEST_F(agent_concurrency, an_ingest_during_a_query_storm_swaps_the_snapshot_whole) {
  auto catalog = std::make_shared<kb_catalog>();
  catalog->put(kb_catalog::build_snapshot("kb", demo_documents(), {}));
  auto v1 = catalog->get("kb");
  // The ingest's new version: every document changed, one added; built
  // as kb_admin does (reusing the old snapshot's vectors where it can).
  auto docs = demo_documents("\n\nAppendix: ingest storms, snapshot swaps and agent workers.");
  docs.push_back({"extra", "Extra", "Agent workers search snapshots. " + docs[0].text, ""});
  auto v2 = kb_catalog::build_snapshot(v1->settings, docs, {}, v1.get());
  auto queries = queries_from(*v1, 32, 11);
  for (auto& q : queries_from(*v2, 32, 12))
    queries.push_back(q);
  for (auto type : {"hybrid_agent", "graph_agent", "deep_research_agent"}) {
    SCOPED_TRACE(type);
    std::vector<ranked> old_answers, new_answers;
    size_t differing = 0;
    for (auto& q : queries) {
      old_answers.push_back(ranked_of(run_agent(*v1, type, q, 5)));
      new_answers.push_back(ranked_of(run_agent(*v2, type, q, 5)));
      differing += old_answers.back() != new_answers.back();
    }
    ASSERT_GT(differing, queries.size() / 4) << "the versions must be told apart";
    catalog->put(v1);
    auto agent = spawn_agent(catalog, type, 4);
    // Three rounds of the storm; the swap happens in the middle of each
    // (while earlier queries are being searched).
    for (int round = 0; round < 3; ++round) {
      catalog->put(v1);
      size_t swap_at = queries.size() / 2;
      auto answers = storm(agent, queries, [&](size_t i) {
        if (i == swap_at)
          catalog->put(v2);
      });
      for (size_t i = 0; i < queries.size(); ++i) {
        ASSERT_TRUE(answers[i]) << sys.render(answers[i].error());
        auto got = ranked_of(*answers[i]);
        if (i > swap_at)  // sent after the swap: only the new version
          EXPECT_EQ(got, new_answers[i]) << queries[i];
        else
          EXPECT_TRUE(got == old_answers[i] || got == new_answers[i])
              << queries[i] << "\n got: " << show(got) << "\n old: " << show(old_answers[i])
              << "\n new: " << show(new_answers[i]);
      }
    }
  }
}

// An embedding model on the network, stood in for: embed() answers at once
// (index building), embed_async() holds each query until the test answers
// it from its own thread, as the HTTP client's thread would.
class held_embedder final : public embedder {
public:
  using callback = std::function<void(std::variant<embedding_batch, std::string>)>;
  std::string name() const override { return inner_->name(); }
  size_t dims() const override { return inner_->dims(); }
  std::variant<embedding_batch, std::string> embed(const std::vector<std::string>& t) override {
    return inner_->embed(t);
  }
  bool remote() const override { return true; }
  void embed_async(std::vector<std::string> texts, callback done) override {
    std::lock_guard lock{mx_};
    held_.emplace_back(std::move(texts), std::move(done));
    cv_.notify_all();
  }
  // Waits until `n` queries wait for their embedding; takes them.
  std::vector<std::pair<std::vector<std::string>, callback>> take(size_t n) {
    std::unique_lock lock{mx_};
    cv_.wait(lock, [&] { return held_.size() >= n; });
    return std::exchange(held_, {});
  }
  embedder& inner() { return *inner_; }

private:
  std::shared_ptr<embedder> inner_ = make_hashed_embedder();
  std::mutex mx_;
  std::condition_variable cv_;
  std::vector<std::pair<std::vector<std::string>, callback>> held_;
};

TEST_F(agent_concurrency, a_worker_waiting_for_a_remote_embedding_serves_other_queries) {
  auto held = std::make_shared<held_embedder>();
  kb_build_options opts;
  opts.embed = held;
  auto catalog = std::make_shared<kb_catalog>();
  catalog->put(kb_catalog::build_snapshot("kb", demo_documents(), opts));
  auto snap = catalog->get("kb");
  auto queries = queries_from(*snap, 16, 5);
  for (bool model_fails : {false, true}) {
    for (auto type : {"hybrid_agent", "naive_rag_agent"}) {
      SCOPED_TRACE(std::string{type} + (model_fails ? " (model fails)" : ""));
      // One worker: every query waits for the model at the same time, so
      // the worker cannot have blocked on any of them.
      auto agent = spawn_agent(catalog, type, 1);
      using handle = decltype(self->request(agent, reply_timeout, atom::retrieve_v, std::string{},
                                            std::string{}, retrieve_options{}));
      std::vector<handle> pending;
      for (auto& q : queries)
        pending.push_back(self->request(agent, reply_timeout, atom::retrieve_v, q, std::string{"t"},
                                        retrieve_options{}));
      auto waiting = held->take(queries.size());
      ASSERT_EQ(waiting.size(), queries.size());
      // The model answers in reverse order, from this (foreign) thread.
      for (auto i = waiting.rbegin(); i != waiting.rend(); ++i) {
        if (model_fails)
          i->second(std::string{"embedding model failed: HTTP 500"});
        else
          i->second(held->inner().embed(i->first));
      }
      for (size_t i = 0; i < queries.size(); ++i) {
        pending[i].receive(
            [&](retrieval_result& r) {
              if (model_fails) {
                EXPECT_STREQ(type, "hybrid_agent") << "the vector-only agent must fail";
                bool noted = false;
                for (auto& step : r.trace)
                  noted |= step.detail.find("vector failed: embedding model failed: HTTP 500")
                           != std::string::npos;
                EXPECT_TRUE(noted) << queries[i];
              } else {
                EXPECT_EQ(ranked_of(r), ranked_of(run_agent(*snap, type, queries[i], 5)))
                    << queries[i];
              }
            },
            [&](caf::error& err) {
              EXPECT_TRUE(model_fails && std::string{type} == "naive_rag_agent") << sys.render(err);
              EXPECT_NE(error_message(err).find("HTTP 500"), std::string::npos) << sys.render(err);
            });
      }
    }
  }
}

// A frontend-only pool (no agents of its own) with one retrieval node's
// pool as its KB's only replica, as the cluster actor wires them: both
// real pools in one actor system, the cluster's peer_up / peer_down sent
// by hand. A lost connection is dialled again a heartbeat later, so a
// query with no replica left waits for the lost node to come back rather
// than answering at once with no documents.
class pool_replicas : public agent_concurrency {
protected:
  pool_replicas() {
    catalog->put(kb_catalog::build_snapshot("kb", demo_documents(), {}));
    query = queries_from(*catalog->get("kb"), 1, 3).front();
  }

  ~pool_replicas() override {
    for (auto& p : pools)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }

  agent_pool_actor spawn_pool(const std::string& node, bool retrieval,
                              caf::timespan replica_wait = std::chrono::seconds(60)) {
    pool_cluster_settings pcs;
    pcs.node = node;
    pcs.retrieval = retrieval;
    pcs.replica_wait = replica_wait;
    auto p = spawn_agent_pool(sys, catalog, 1, {}, pcs);
    pools.push_back(p);
    return p;
  }

  void up(agent_pool_actor fe, agent_pool_actor node_pool) {
    self->send(fe, atom::peer_up_v, std::string{"r1"}, caf::actor_cast<caf::actor>(node_pool),
               std::string{"*"});
  }

  auto search(agent_pool_actor fe) {
    return self->request(fe, reply_timeout, atom::retrieve_v,
                         format_worker_name("kb", "hybrid_agent"), query, std::string{"t"},
                         retrieve_options{});
  }

  // The node that served a search through `fe`, or the error's text.
  template <class Handle>
  std::string served(Handle&& h) {
    std::string out;
    h.receive(
        [&](retrieval_result& r) {
          out = r.retrieval_results.empty() ? "(no documents)" : "(nobody)";
          for (auto& step : r.trace)
            if (step.step == "served_by")
              out = step.detail;
        },
        [&](caf::error& err) { out = "error: " + error_message(err); });
    return out;
  }

  std::string status(agent_pool_actor p) {
    std::string out;
    self->request(p, reply_timeout, atom::status_v)
        .receive([&](std::string& s) { out = s; },
                 [&](caf::error& err) { out = sys.render(err); });
    return out;
  }

  // Until `n` queries of `p` wait for a replica (its status, asked
  // again as soon as it answers; a hang guard of 60 s).
  void until_waiting(agent_pool_actor p, int n) {
    auto want = "\"waiting\":" + std::to_string(n) + ",";
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (status(p).find(want) == std::string::npos
           && std::chrono::steady_clock::now() < until) {
    }
    ASSERT_NE(status(p).find(want), std::string::npos) << status(p);
  }

  // A pool of node r1 whose actor is gone, as a proxy is once its
  // connection drops.
  agent_pool_actor dead_pool() {
    auto p = spawn_pool("r1", true);
    self->monitor(p);
    caf::anon_send_exit(p, caf::exit_reason::kill);
    self->receive([](caf::down_msg&) {});
    return p;
  }

  std::shared_ptr<kb_catalog> catalog = std::make_shared<kb_catalog>();
  std::string query;
  std::vector<agent_pool_actor> pools;
};

TEST_F(pool_replicas, a_query_waits_for_its_kbs_lost_node_to_come_back) {
  auto fe = spawn_pool("fe", false);
  auto r1 = spawn_pool("r1", true);
  up(fe, r1);
  EXPECT_EQ(served(search(fe)), "r1");
  // The connection is lost: the cluster withdraws r1. A search sent now
  // has no replica; it waits. r1 is announced again (a new connection,
  // here the same pool) after the search, from the same sender, so the
  // search is in the pool before it.
  self->send(fe, atom::peer_down_v, std::string{"r1"});
  auto pending = search(fe);
  up(fe, r1);
  EXPECT_EQ(served(std::move(pending)), "r1");
  EXPECT_NE(status(fe).find("\"waited_for_replica\":1"), std::string::npos) << status(fe);
}

TEST_F(pool_replicas, a_dead_proxy_makes_the_query_wait_before_the_node_is_withdrawn) {
  // The node's pool is gone (as a proxy is killed when its connection
  // drops) before the cluster's peer_down reaches the frontend's pool:
  // the attempt fails with request_receiver_down and the query waits for
  // the node to come back, here restarted with a new pool.
  auto fe = spawn_pool("fe", false);
  up(fe, dead_pool());
  auto pending = search(fe);
  until_waiting(fe, 1);
  up(fe, spawn_pool("r1", true));
  EXPECT_EQ(served(std::move(pending)), "r1");
  // Announced again before the failed attempt's answer arrives: the node
  // is tried again at once with its new handles.
  up(fe, dead_pool());
  pending = search(fe);
  up(fe, spawn_pool("r1", true));
  EXPECT_EQ(served(std::move(pending)), "r1");
}

TEST_F(pool_replicas, without_a_node_back_in_time_the_query_fails_and_retries_are_bounded) {
  // Waits are bounded by replica_wait after the loss...
  auto fe = spawn_pool("fe", false, std::chrono::milliseconds(100));
  auto r1 = spawn_pool("r1", true);
  up(fe, r1);
  EXPECT_EQ(served(search(fe)), "r1");
  self->send(fe, atom::peer_down_v, std::string{"r1"});
  EXPECT_EQ(served(search(fe)),
            "error: no node serving knowledge base \"kb\" came back within 100 ms");
  // ... and a node that was never lost is not waited for (0 = fail at once).
  auto at_once = spawn_pool("fe2", false, caf::timespan{0});
  up(at_once, r1);
  self->send(at_once, atom::peer_down_v, std::string{"r1"});
  EXPECT_EQ(served(search(at_once)),
            "error: no node serving knowledge base \"kb\" is reachable");
  // A node that keeps coming back and failing is tried at most 3 times:
  // its proxy dead each time (a pool that was killed).
  auto fe3 = spawn_pool("fe3", false);
  up(fe3, dead_pool());
  auto pending = search(fe3);
  for (int i = 0; i < 2; ++i) {
    until_waiting(fe3, 1);
    up(fe3, dead_pool());
  }
  auto answer = served(std::move(pending));
  EXPECT_EQ(answer.rfind("error: ", 0), 0u) << answer;
  auto st = status(fe3);
  EXPECT_NE(st.find("\"attempts\":3,"), std::string::npos) << st;
  EXPECT_NE(st.find("\"waiting\":0,"), std::string::npos) << st;
}

// A language model that answers deep research's verdict requests from a
// script (one reply per call, the last one repeated; "" = fail the call)
// and records what it was asked.
struct scripted_judge {
  std::mutex mx;
  std::vector<std::string> script;
  std::vector<completion_request> asked;
};

llm_actor spawn_judge(caf::actor_system& sys, std::shared_ptr<scripted_judge> j) {
  return sys.spawn([j](llm_actor::pointer) -> llm_actor::behavior_type {
    return {
        [](atom::generate, generation_request&, token_sink_actor) -> generation_result {
          return {};
        },
        [](atom::cancel, const std::string&) {},
        [j](atom::complete, completion_request& req) -> caf::result<completion_result> {
          std::lock_guard lock{j->mx};
          auto n = j->asked.size();
          j->asked.push_back(req);
          auto& reply = j->script[std::min(n, j->script.size() - 1)];
          if (reply.empty())
            return make_error(errc::unavailable, "scripted model failure");
          completion_result r;
          r.text = reply;
          return r;
        },
        [](atom::tick, const std::string&) {},
        [](atom::upstream, const std::string&, upstream_event&) {},
        [](atom::status) { return std::string{"{}"}; },
    };
  });
}

bool trace_has(const retrieval_result& r, std::string_view text) {
  for (auto& s : r.trace)
    if (s.detail.find(text) != std::string::npos)
      return true;
  return false;
}

TEST(research_verdict, parses_the_verdict_and_refuses_unusable_replies) {
  std::vector<std::string> searched{"Where is the Marigold moored?"};
  auto yes = llm::parse_research_verdict("```json\n{\"sufficient\": true}\n```", searched);
  ASSERT_TRUE(yes);
  EXPECT_TRUE(yes->sufficient);
  auto next = llm::parse_research_verdict(
      R"(Sure! {"sufficient": "no", "query": "Marigold harbour mooring"})", searched);
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->sufficient);
  EXPECT_EQ(next->query, "Marigold harbour mooring");
  for (auto bad : {"", "no JSON here", R"({"query": "x"})", R"({"sufficient": "maybe"})",
                   R"({"sufficient": false})", R"({"sufficient": false, "query": "  "})",
                   R"({"sufficient": false, "query": " where is the MARIGOLD moored? "})"})
    EXPECT_FALSE(llm::parse_research_verdict(bad, searched)) << bad;
  auto req = llm::research_judge_request("q?", searched, {"passage one", "passage two"});
  EXPECT_EQ(req.purpose, "research");
  ASSERT_EQ(req.messages.size(), 2u);
  EXPECT_NE(req.messages[1].content.find("[2] passage two"), std::string::npos);
  EXPECT_NE(req.messages[1].content.find("- Where is the Marigold moored?"), std::string::npos);
}

class research_with_model : public agent_concurrency {
protected:
  research_with_model() {
    catalog->put(kb_catalog::build_snapshot("kb", demo_documents(), kb_build_options{}));
    snap = catalog->get("kb");
  }

  retrieval_agent_actor spawn_with(std::vector<std::string> script) {
    judge = std::make_shared<scripted_judge>();
    judge->script = std::move(script);
    reranker rr;
    rr.model = spawn_judge(sys, judge);
    models.push_back(rr.model);
    auto agent = spawn_retrieval_agent(sys, catalog, "kb", "deep_research_agent", 1, rr);
    agents.push_back(agent);
    return agent;
  }

  size_t calls() {
    std::lock_guard lock{judge->mx};
    return judge->asked.size();
  }

  ~research_with_model() override {
    for (auto& m : models)
      caf::anon_send_exit(m, caf::exit_reason::user_shutdown);
  }

  std::shared_ptr<kb_catalog> catalog = std::make_shared<kb_catalog>();
  std::shared_ptr<const kb_snapshot> snap;
  std::shared_ptr<scripted_judge> judge;
  std::vector<llm_actor> models;
  const std::string question = "How are retrieval agents pooled and reused?";
};

TEST_F(research_with_model, unusable_or_failed_verdicts_fall_back_to_pseudo_relevance_feedback) {
  auto offline = ranked_of(run_agent(*snap, "deep_research_agent", question, 5));
  ASSERT_FALSE(offline.empty());
  for (auto reply :
       {std::string{"I think the passages are fine."}, std::string{R"({"sufficient": "perhaps"})"},
        std::string{R"({"sufficient": false})"},
        std::string{R"({"sufficient": false, "query": ")"} + question + R"("})", std::string{}}) {
    SCOPED_TRACE(reply.empty() ? "model fails" : reply);
    auto r = one(spawn_with({reply}), question);
    ASSERT_TRUE(r) << sys.render(r.error());
    EXPECT_EQ(calls(), 1u) << "one bad verdict ends the model's part";
    EXPECT_EQ(ranked_of(*r), offline) << "the same answer as without a model";
    EXPECT_TRUE(trace_has(*r, "pseudo-relevance feedback from here"));
    EXPECT_TRUE(trace_has(*r, reply.empty() ? "model failed" : "verdict was unusable"));
  }
}

TEST_F(research_with_model, a_sufficient_verdict_ends_the_research_after_round_one) {
  auto r = one(spawn_with({R"({"sufficient": true})"}), question);
  ASSERT_TRUE(r) << sys.render(r.error());
  EXPECT_EQ(calls(), 1u);
  auto st = research_first_round(*snap, question, embed_query(*snap, question), 5);
  auto expected = research_result(*snap, st);
  EXPECT_EQ(ranked_of(*r), ranked_of(expected));
  EXPECT_TRUE(trace_has(*r, "model: the evidence answers the question"));
  EXPECT_FALSE(trace_has(*r, "rewrite="));
  std::lock_guard lock{judge->mx};
  auto& prompt = judge->asked.front().messages.back().content;
  EXPECT_NE(prompt.find(question), std::string::npos);
  EXPECT_NE(prompt.find("[1] "), std::string::npos) << "the evidence is shown to the model";
}

TEST_F(research_with_model, rewritten_queries_are_searched_and_rounds_are_bounded) {
  // A model that is never satisfied and always has a new query.
  auto agent = spawn_with({R"({"sufficient": false, "query": "SSE heartbeat ping"})",
                           R"({"sufficient": false, "query": "postgres store durability"})",
                           R"({"sufficient": false, "query": "one query too many"})"});
  auto r = one(agent, question);
  ASSERT_TRUE(r) << sys.render(r.error());
  EXPECT_EQ(calls(), static_cast<size_t>(research_max_rounds - 1))
      << "no verdict is asked after the last round";
  EXPECT_TRUE(trace_has(*r, "model rewrite=[SSE heartbeat ping]"));
  EXPECT_TRUE(trace_has(*r, "model rewrite=[postgres store durability]"));
  EXPECT_FALSE(trace_has(*r, "one query too many"));
  {
    std::lock_guard lock{judge->mx};
    EXPECT_NE(judge->asked[1].messages.back().content.find("- SSE heartbeat ping"),
              std::string::npos)
        << "the model sees what was searched";
  }
  // The rewritten queries' results are fused in: the result differs from
  // round one alone.
  auto st = research_first_round(*snap, question, embed_query(*snap, question), 5);
  EXPECT_NE(ranked_of(*r), ranked_of(research_result(*snap, st)));
  EXPECT_LE(r->retrieval_results.size(), 5u);
}

}  // namespace
