// Retrieval quality and speed on real data with relevance judgments
// (../shared/data: SciFact, English; CMRC2018, Chinese). For the BM25 leg and
// every agent it prints nDCG@10, Recall@100 and per-query latency p50/p99;
// for each dataset the index build time and memory. Documents are chunked
// exactly as ingestion does; a document's rank is that of its best chunk.
// Numbers only, no assertions.
//
// Queries are split deterministically by a hash of their id into a dev part
// (70%, what defaults were tuned on) and a held-out part (30%), and nDCG@10
// is printed for both and for all. With --typos the Latin queries are run
// again with one typo each (one word of >= 5 letters, the longest, gets a
// deletion, swap, substitution or doubled letter chosen by the id's hash;
// never its first or last letter).
// Agents: every agent_type, plus "bm25" (the index alone), "bm25_typo"
// (the index with typo expansion of unknown terms) and deep research with a
// stand-in model that always answers the same way, through the same
// verdict code as the retrieval worker: "deep_research_agent+sufficient"
// ({"sufficient": true}: round one only), "deep_research_agent+unusable"
// (no JSON: RM3 from round two) and "deep_research_agent+rewrite" (not
// sufficient; the next query is the question's longest words). This proves
// the wiring and what it costs, not what a real model would gain.
//
//   build/bench/bench_retrieval_eval [--data DIR] [--dataset scifact|cmrc2018|all]
//       [--agents bm25,naive_rag_agent,...] [--max-queries N] [--vector-weight W]
//       [--keyword-weight W] [--fusion auto|rrf|convex] [--no-typo-tolerance]
//       [--typos] [--chunk-chars N]
//       [--scale N]  (BM25 over N synthetic chunks instead)
//       [--vector-scale N,N...]  (the vector index's three kinds over N
//                                 chunks of SciFact's sentences each,
//                                 instead)
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "bench/bench_util.hpp"
#include "llm/research_judge.hpp"
#include "retrieval/agents.hpp"
#include "retrieval/fusion_policy.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/typo_expansion.hpp"

using namespace ragtor;
using bench::percentile;
using bench::read_tsv;
using bench::rss_bytes;
using steady = std::chrono::steady_clock;

namespace {

struct run_options {
  std::vector<std::string> agents;
  size_t max_queries = 0;
  double vector_weight = -1;   // < 0: the KB default
  double keyword_weight = -1;  // < 0: the KB default
  std::string fusion = "auto";
  bool typo_tolerance = true;
  bool typos = false;
  size_t chunk_chars = 0;  // 0: the ingestion default
};

// FNV-1a 64: the same split on every machine and run.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool held_out(const std::string& query_id) {
  return fnv1a(query_id) % 10 >= 7;
}

// One typo in the longest ASCII word of >= 5 letters (the first of equal
// length); the query unchanged when it has none.
std::string with_typo(const std::string& id, const std::string& text) {
  size_t best_pos = 0, best_len = 0;
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j])))
      ++j;
    if (j - i > best_len) {
      best_len = j - i;
      best_pos = i;
    }
    i = j == i ? i + 1 : j;
  }
  if (best_len < 5)
    return text;
  auto h = fnv1a(id + "#typo");
  auto at = best_pos + 1 + (h >> 8) % (best_len - 2);  // not the first or last letter
  auto out = text;
  switch (h % 4) {
    case 0:  // deletion
      out.erase(at, 1);
      break;
    case 1:  // swap with the next letter
      std::swap(out[at], out[at + 1 < best_pos + best_len ? at + 1 : at - 1]);
      break;
    case 2:  // substitution by the next letter of the alphabet
      out[at] = static_cast<char>(std::islower(static_cast<unsigned char>(out[at]))
                                      ? 'a' + (out[at] - 'a' + 1) % 26
                                      : 'A' + (out[at] - 'A' + 1) % 26);
      break;
    default:  // a doubled letter
      out.insert(at, 1, out[at]);
  }
  return out;
}

// Ranked doc ids (deduplicated by best chunk) -> metrics against qrels.
void score_query(const std::vector<std::string>& ranked, const std::map<std::string, int>& relevant,
                 double& ndcg, double& recall) {
  double dcg = 0;
  for (size_t i = 0; i < ranked.size() && i < 10; ++i)
    if (auto it = relevant.find(ranked[i]); it != relevant.end())
      dcg += (std::pow(2.0, it->second) - 1) / std::log2(static_cast<double>(i) + 2);
  std::vector<int> gains;
  for (auto& [d, g] : relevant)
    gains.push_back(g);
  std::sort(gains.rbegin(), gains.rend());
  double idcg = 0;
  for (size_t i = 0; i < gains.size() && i < 10; ++i)
    idcg += (std::pow(2.0, gains[i]) - 1) / std::log2(static_cast<double>(i) + 2);
  ndcg = idcg > 0 ? dcg / idcg : 0;
  size_t found = 0;
  for (size_t i = 0; i < ranked.size() && i < 100; ++i)
    found += relevant.count(ranked[i]);
  recall = relevant.empty() ? 0 : static_cast<double>(found) / static_cast<double>(relevant.size());
}

std::vector<std::string> dedupe_docs(const kb_snapshot& snap,
                                     const std::vector<std::pair<uint32_t, double>>& hits) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& [idx, s] : hits)
    if (seen.insert(snap.chunks[idx].doc_id).second)
      out.push_back(snap.chunks[idx].doc_id);
  return out;
}

// The stand-in model's reply to a verdict request about `question`.
std::string stand_in_reply(std::string_view mode, const std::string& question) {
  if (mode == "sufficient")
    return R"({"sufficient": true})";
  if (mode == "unusable")
    return "I cannot say.";
  // The four longest words of the question, in their order.
  std::vector<std::string> words;
  std::stringstream ss{question};
  for (std::string w; ss >> w;)
    words.push_back(w);
  auto sorted = words;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](auto& a, auto& b) { return a.size() > b.size(); });
  if (sorted.size() > 4)
    sorted.resize(4);
  std::string q;
  for (auto& w : words)
    if (std::find(sorted.begin(), sorted.end(), w) != sorted.end())
      q += (q.empty() ? "" : " ") + w;
  return R"({"sufficient": false, "query": ")" + q + "\"}";
}

// Deep research as the retrieval worker runs it with a model, the model
// answering stand_in_reply(mode).
retrieval_result research_with_stand_in(const kb_snapshot& snap, std::string_view mode,
                                        const std::string& question, size_t k) {
  auto st = research_first_round(snap, question, embed_query(snap, question), k);
  std::vector<std::string> queries{question};
  while (st.round < research_max_rounds) {
    auto req = llm::research_judge_request(question, queries,
                                           research_evidence(snap, st, research_feedback_chunks));
    (void)req;  // what would be sent
    auto next = llm::apply_research_verdict(snap, st, queries, stand_in_reply(mode, question), 0);
    if (next != llm::research_next::ask_again)
      break;
  }
  auto r = research_result(snap, std::move(st));
  finish_result(snap, r);
  return r;
}

std::vector<std::string> dedupe_items(const retrieval_result& r) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& item : r.retrieval_results)
    if (seen.insert(item.doc_id).second)
      out.push_back(item.doc_id);
  return out;
}

void run_dataset(const std::string& dir, const std::string& name, const run_options& ro) {
  auto& agents = ro.agents;
  auto max_queries = ro.max_queries;
  auto chunk_chars = ro.chunk_chars;
  auto corpus = read_tsv(dir + "/corpus.tsv", false);
  auto queries = read_tsv(dir + "/queries_test.tsv", false);
  auto qrels_rows = read_tsv(dir + "/qrels_test.tsv", true);
  std::map<std::string, std::map<std::string, int>> qrels;
  for (auto& r : qrels_rows)
    if (r.size() >= 3)
      qrels[r[0]][r[1]] = std::stoi(r[2]);
  std::vector<document> docs;
  for (auto& r : corpus)
    if (r.size() >= 3)
      docs.push_back({r[0], r[1], r[2], ""});
  std::erase_if(queries, [&](auto& q) { return q.size() < 2 || !qrels.count(q[0]); });
  if (max_queries && queries.size() > max_queries)
    queries.resize(max_queries);

  auto rss0 = rss_bytes();
  auto t0 = steady::now();
  kb_build_options opts;
  if (chunk_chars > 0) {
    opts.chunking.max_chars = chunk_chars;
    opts.chunking.overlap_chars = std::min(opts.chunking.overlap_chars, chunk_chars / 2);
  }
  kb_settings settings;
  settings.name = name;
  settings.vector_weight = ro.vector_weight;
  settings.keyword_weight = ro.keyword_weight;
  settings.fusion = ro.fusion;
  settings.typo_tolerance = ro.typo_tolerance;
  auto snap = kb_catalog::build_snapshot(settings, docs, opts);
  auto build_s = std::chrono::duration<double>(steady::now() - t0).count();
  auto rss1 = rss_bytes();
  std::printf("\n## %s: %zu documents, %zu chunks (max %zu chars), %zu queries\n", name.c_str(),
              docs.size(), snap->chunks.size(), opts.chunking.max_chars, queries.size());
  std::printf(
      "index build %.2f s (BM25 + %s vectors%s + entity graph: %zu entities, %zu "
      "relations); RSS +%.0f MiB; BM25 index ~%.0f MiB, vectors ~%.0f MiB\n",
      build_s, snap->embed ? snap->embed->name().c_str() : "no",
      snap->vectors.uses_hnsw() ? " in HNSW" : " exact", snap->graph.entity_count(),
      snap->graph.relation_count(), (double(rss1) - double(rss0)) / (1 << 20),
      double(snap->index.memory_bytes()) / (1 << 20),
      double(snap->vectors.memory_bytes()) / (1 << 20));
  {
    // The graph alone, built again from the same chunks and index (median
    // and fastest of 5; on a shared machine the fastest moves least): what
    // every ingest pays for it.
    std::vector<double> runs;
    for (int i = 0; i < 5; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto again = entity_graph::build(snap->chunks, snap->index, opts.graph);
      runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    // And built again as an ingest builds it, from the graph before with
    // every chunk kept (its named phrases taken from it): what an ingest
    // of one document into this KB pays for the graph.
    std::vector<int64_t> same_rows(snap->chunks.size());
    std::iota(same_rows.begin(), same_rows.end(), int64_t{0});
    std::vector<double> again_runs;
    bool same = true;
    for (int i = 0; i < 5; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto again =
          entity_graph::build(snap->chunks, snap->index, opts.graph, &snap->graph, same_rows);
      again_runs.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      same = same && again.serialize() == snap->graph.serialize();
    }
    std::sort(again_runs.begin(), again_runs.end());
    std::printf(
        "entity graph rows' signature %s (%zu topics); the graph alone built in %.3f s "
        "(fastest %.3f s), from the graph before in %.3f s (fastest %.3f s; %s)\n",
        snap->graph.rows(name, snap->chunks).signature.c_str(), snap->graph.topic_count(), runs[2],
        runs[0], again_runs[2], again_runs[0], same ? "the same graph" : "ANOTHER GRAPH");
  }
  {
    // Ingesting one more document reuses the indexed chunks' terms and
    // vectors (kb_admin passes the current snapshot).
    auto more = docs;
    more.push_back(
        {"bench-extra", "An extra document", "One more document about index reuse.", ""});
    auto t1 = steady::now();
    auto next = kb_catalog::build_snapshot(settings, more, opts, snap.get());
    std::printf("adding 1 document: %.2f s incremental (vs %.2f s for the full build)\n",
                std::chrono::duration<double>(steady::now() - t1).count(), build_s);
    // Then the rows of the entities and relations tables that changed
    // (what kb_admin writes to the store), median and fastest of 5: with
    // the previous graph's signature computed again, and known (as the
    // KB admin has it from the previous ingest).
    for (bool known : {false, true}) {
      std::vector<double> runs;
      size_t changed = 0;
      for (int i = 0; i < 5; ++i) {
        auto t = steady::now();
        auto rows =
            next->graph.rows_since(snap->graph, snap->chunks, name, next->chunks,
                                   known ? std::string_view{snap->graph_rows_signature()} : "");
        runs.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
        changed = rows.entities.size() + rows.relations.size() + rows.removed_entities.size()
                  + rows.removed_relations.size();
      }
      std::sort(runs.begin(), runs.end());
      std::printf(
          "  its graph's changed rows (%zu), the previous signature %s: %.1f ms (fastest %.1f)\n",
          changed, known ? "known" : "computed", runs[2], runs[0]);
    }
  }
  std::printf("fusion: %s; typo tolerance %s\n", snap->fusion().reason.c_str(),
              snap->settings.typo_tolerance ? "on" : "off");
  size_t n_held = 0;
  for (auto& q : queries)
    n_held += held_out(q[0]);
  auto run_queries = [&](const std::vector<std::vector<std::string>>& qs) {
    std::printf(
        "| leg / agent | nDCG@10 dev (%zu) | nDCG@10 held-out (%zu) | nDCG@10 all | Recall@100 | "
        "p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n",
        qs.size() - n_held, n_held);
    for (auto& agent : agents) {
      std::vector<double> lat;
      double ndcg[2] = {0, 0}, recall_sum = 0;
      for (auto& q : qs) {
        auto t = steady::now();
        std::vector<std::string> ranked;
        if (agent == "bm25" || agent == "bm25_typo") {
          std::vector<bm25_index::hit> hits;
          if (agent == "bm25_typo") {
            auto e = expand_typos(snap->index, q[1]);
            hits = e.expansions.empty() ? snap->index.search(q[1], 1000)
                                        : snap->index.search_terms(e.terms, 1000);
          } else {
            hits = snap->index.search(q[1], 1000);
          }
          lat.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
          ranked = dedupe_docs(*snap, hits);
        } else if (auto plus = agent.find('+'); plus != std::string::npos) {
          auto r =
              research_with_stand_in(*snap, std::string_view{agent}.substr(plus + 1), q[1], 100);
          lat.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
          ranked = dedupe_items(r);
        } else {
          auto r = run_agent(*snap, agent, q[1], 100);
          lat.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
          ranked = dedupe_items(r);
        }
        double nd, rc;
        score_query(ranked, qrels[q[0]], nd, rc);
        ndcg[held_out(q[0])] += nd;
        recall_sum += rc;
      }
      auto n = static_cast<double>(qs.size());
      auto nh = static_cast<double>(n_held);
      std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |\n", agent.c_str(),
                  ndcg[0] / (n - nh), nh > 0 ? ndcg[1] / nh : 0.0, (ndcg[0] + ndcg[1]) / n,
                  recall_sum / n, percentile(lat, 0.5), percentile(lat, 0.99));
      std::fflush(stdout);
    }
  };
  run_queries(queries);
  if (ro.typos) {
    auto typod = queries;
    size_t changed = 0;
    for (auto& q : typod) {
      auto t = with_typo(q[0], q[1]);
      changed += t != q[1];
      q[1] = std::move(t);
    }
    std::printf("\n### %s with one typo per query (%zu of %zu queries changed)\n", name.c_str(),
                changed, typod.size());
    if (changed > 0)
      run_queries(typod);
  }
}

// Synthetic text: words "w0" … "w99999" drawn from a Zipf distribution;
// chunks of 20-60 words, queries of 2-6.
class zipf_text {
public:
  zipf_text() : cdf_(100000) {
    for (size_t i = 0; i < cdf_.size(); ++i)
      cdf_[i] = (total_ += 1.0 / static_cast<double>(i + 1));
  }
  std::string words(size_t n) {
    std::string out;
    for (size_t w = 0; w < n; ++w) {
      auto x = std::uniform_real_distribution<double>(0, total_)(rng_);
      auto i = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), x) - cdf_.begin());
      out += "w" + std::to_string(i) + " ";
    }
    return out;
  }
  std::string chunk() { return words(20 + rng_() % 41); }
  std::string query() { return words(2 + rng_() % 5); }

private:
  std::mt19937_64 rng_{7};
  std::vector<double> cdf_;
  double total_ = 0;
};

// N synthetic short chunks with a Zipf vocabulary: BM25 build time, memory
// and latency at scale.
void run_scale(size_t n) {
  zipf_text text;
  std::vector<chunk> chunks(n);
  for (size_t c = 0; c < n; ++c) {
    chunks[c].text = text.chunk();
    chunks[c].chunk_id = std::to_string(c);
  }
  auto rss0 = rss_bytes();
  auto t0 = steady::now();
  auto idx = bm25_index::build(chunks, {});
  auto build_s = std::chrono::duration<double>(steady::now() - t0).count();
  auto rss1 = rss_bytes();
  std::vector<double> lat;
  for (int q = 0; q < 1000; ++q) {
    auto query = text.query();
    auto t = steady::now();
    auto hits = idx.search(query, 10);
    lat.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
  }
  std::printf("\n## synthetic: %zu chunks (20-60 Zipf words, 100k vocabulary)\n", n);
  std::printf(
      "BM25 build %.1f s, RSS +%.0f MiB (index ~%.0f MiB); top-10 latency p50 %.3f ms, "
      "p99 %.3f ms over 1000 queries of 2-6 terms\n",
      build_s, (double(rss1) - double(rss0)) / (1 << 20), double(idx.memory_bytes()) / (1 << 20),
      percentile(lat, 0.5), percentile(lat, 0.99));
}

// The vector index at sizes around vector_exact_below, on text like a
// real KB's: N chunks of 3-6 sentences drawn at random from SciFact's
// abstracts, embedded by the hashed embedder (256 dimensions), searched
// with SciFact's 300 claims for the 100 and the 500 nearest by each kind
// of index: the exact scan in full precision, the exact scan in half
// precision first, and HNSW (default options). Build time, memory,
// latency p50/p99, and HNSW's recall of the exact 100.
void run_vector_scale(const std::string& scifact, const std::vector<size_t>& sizes) {
  std::vector<std::string> sentences, queries;
  for (auto& r : read_tsv(scifact + "/corpus.tsv", false))
    for (size_t from = 0; r.size() >= 3 && from < r[2].size();) {
      auto end = std::min(r[2].find(". ", from), r[2].size());
      sentences.push_back(r[2].substr(from, end - from + 1));
      from = end + 2;
    }
  for (auto& r : read_tsv(scifact + "/queries_test.tsv", false))
    if (r.size() >= 2)
      queries.push_back(r[1]);
  auto embedder = make_hashed_embedder(256);
  auto embed = [&](const std::vector<std::string>& texts, std::vector<float>& into) {
    for (size_t first = 0; first < texts.size(); first += 512) {
      std::vector<std::string> batch(
          texts.begin() + static_cast<std::ptrdiff_t>(first),
          texts.begin() + static_cast<std::ptrdiff_t>(std::min(texts.size(), first + 512)));
      auto vectors = embedder->embed(batch);
      for (auto& v : std::get<embedding_batch>(vectors))
        into.insert(into.end(), v.begin(), v.end());
    }
  };
  std::printf(
      "\n## vectors: chunks of SciFact's sentences, hashed embedder (256 dims), %zu claims\n",
      queries.size());
  std::printf(
      "| rows | index | build s | MiB | k 100: p50 ms | p99 ms | k 500: p50 ms | p99 ms "
      "| recall@100 of exact |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (auto n : sizes) {
    std::mt19937_64 rng{n};
    std::vector<std::string> chunks(n);
    for (auto& c : chunks)
      for (auto k = 3 + rng() % 4; k > 0; --k)
        c += sentences[rng() % sentences.size()] + " ";
    std::vector<float> rows, qs;
    embed(chunks, rows);
    embed(queries, qs);
    std::vector<std::vector<vector_index::hit>> exact;
    struct kind {
      const char* name;
      vector_index_options opts;
    };
    vector_index_options full, half, hnsw;
    full.exact_below = half.exact_below = n + 1;
    full.half_precision_from = SIZE_MAX;
    half.half_precision_from = 0;
    hnsw.exact_below = 0;
    for (auto& [name, opts] : {kind{"exact, full precision", full},
                               kind{"exact, half precision first", half}, kind{"HNSW", hnsw}}) {
      auto t0 = steady::now();
      auto idx = vector_index::build(rows, 256, opts);
      auto build_s = std::chrono::duration<double>(steady::now() - t0).count();
      std::vector<double> lat100, lat500;
      double found = 0, wanted = 0;
      for (size_t q = 0; q < queries.size(); ++q) {
        std::span<const float> query{qs.data() + q * 256, 256};
        auto t = steady::now();
        auto hits = idx.search(query, 100);
        lat100.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
        t = steady::now();
        idx.search(query, 500);
        lat500.push_back(std::chrono::duration<double, std::milli>(steady::now() - t).count());
        if (exact.size() < queries.size()) {
          exact.push_back(hits);
          continue;
        }
        std::set<uint32_t> truth;
        for (auto& h : exact[q])
          truth.insert(h.first);
        for (auto& h : hits)
          found += static_cast<double>(truth.count(h.first));
        wanted += static_cast<double>(truth.size());
      }
      std::printf("| %zu | %s | %.2f | %.1f | %.3f | %.3f | %.3f | %.3f | %s |\n", n, name, build_s,
                  double(idx.memory_bytes()) / (1 << 20), percentile(lat100, 0.5),
                  percentile(lat100, 0.99), percentile(lat500, 0.5), percentile(lat500, 0.99),
                  wanted > 0 ? std::to_string(found / wanted).substr(0, 5).c_str() : "(reference)");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = std::string{RAGTOR_SOURCE_DIR} + "/../shared/data";
  std::string dataset = "all";
  run_options ro;
  ro.agents = {"bm25",        "naive_rag_agent",     "hybrid_agent",
               "graph_agent", "deep_research_agent", "fusion_agent"};
  size_t scale = 0;
  std::vector<size_t> vector_scale;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string{argv[++i]} : std::string{}; };
    if (a == "--data") {
      data = next();
    } else if (a == "--dataset") {
      dataset = next();
    } else if (a == "--agents") {
      ro.agents.clear();
      std::stringstream ss{next()};
      std::string x;
      while (std::getline(ss, x, ','))
        ro.agents.push_back(x);
    } else if (a == "--max-queries") {
      ro.max_queries = std::stoul(next());
    } else if (a == "--chunk-chars") {
      ro.chunk_chars = std::stoul(next());
    } else if (a == "--vector-weight") {
      ro.vector_weight = std::stod(next());
    } else if (a == "--keyword-weight") {
      ro.keyword_weight = std::stod(next());
    } else if (a == "--fusion") {
      ro.fusion = next();
    } else if (a == "--no-typo-tolerance") {
      ro.typo_tolerance = false;
    } else if (a == "--typos") {
      ro.typos = true;
    } else if (a == "--scale") {
      scale = std::stoul(next());
    } else if (a == "--vector-scale") {
      std::stringstream ss{next()};
      std::string x;
      while (std::getline(ss, x, ','))
        vector_scale.push_back(std::stoul(x));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (scale || !vector_scale.empty()) {
    if (scale)
      run_scale(scale);
    if (!vector_scale.empty())
      run_vector_scale(data + "/scifact", vector_scale);
    return 0;
  }
  for (auto& name : {std::string{"scifact"}, std::string{"cmrc2018"}})
    if (dataset == "all" || dataset == name)
      run_dataset(data + "/" + name, name, ro);
  return 0;
}
