#include "retrieval/agents.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "protocol/elapsed.hpp"
#include "retrieval/fusion.hpp"
#include "retrieval/fusion_policy.hpp"
#include "retrieval/sparse_scores.hpp"
#include "retrieval/tokenizer.hpp"
#include "retrieval/typo_expansion.hpp"

namespace ragtor {

namespace {

using steady = std::chrono::steady_clock;

retrieval_item item_of(const kb_snapshot& snap, uint32_t idx, double score, std::string source) {
  auto& c = snap.chunks[idx];
  retrieval_item item;
  item.result_id = c.chunk_id;
  item.granularity = "chunk";
  item.evidence = c.text;
  item.evidence_tokens = c.prompt_tokens;
  item.source = std::move(source);
  item.score = score;
  item.source_id = c.chunk_id;
  item.source_type = "chunk";
  item.doc_id = c.doc_id;
  item.title = c.title;
  item.kb_prefix = snap.name;
  return item;
}

// What an agent found, by chunk row: its items (item_of) are made only
// for what it answers with (fusion fuses four agents' rows).
struct found_chunk {
  uint32_t idx;
  double score;
  std::string source;
};
struct agent_found {
  std::vector<found_chunk> chunks;
  std::vector<trace_step> trace;
  std::vector<std::string> entity_ids, relationship_ids;
};

retrieval_result result_of(const kb_snapshot& snap, agent_found found) {
  retrieval_result r;
  r.retrieval_results.reserve(found.chunks.size());
  for (auto& c : found.chunks)
    r.retrieval_results.push_back(item_of(snap, c.idx, c.score, std::move(c.source)));
  r.entity_ids = std::move(found.entity_ids);
  r.relationship_ids = std::move(found.relationship_ids);
  r.trace = std::move(found.trace);
  return r;
}

// BM25's hits for a query; unknown query terms also search their near
// spellings (typo_expansion.hpp) unless the KB turned that off.
struct bm25_found {
  std::vector<bm25_index::hit> hits;
  std::string note;       // the expansions, when there were some
  bool expanded = false;  // else `hits` are snap.index.search(query, depth)'s
};

bm25_found search_bm25(const kb_snapshot& snap, std::string_view query, size_t depth) {
  bm25_found found;
  if (snap.settings.typo_tolerance) {
    auto expanded = expand_typos(snap.index, query);
    if (!expanded.expansions.empty()) {
      found.hits = snap.index.search_terms(expanded.terms, depth);
      found.note = "typos " + describe(expanded.expansions);
      found.expanded = true;
      return found;
    }
  }
  found.hits = snap.index.search(query, depth);
  return found;
}

// One query's BM25 and vector searches, made once at the deepest depth
// fusion's four agents ask for (over_retrieve_depth of its own), each
// agent taking the first n hits it asks for: both searches rank exactly,
// ties by the smaller row, so those are what a search for n finds (for
// vectors, unless an HNSW graph answers either depth:
// vector_index::ranks_exactly). Fusion made three of each per query.
class search_memo {
public:
  search_memo(const kb_snapshot& snap, std::string_view query, const query_vector& qv, size_t depth)
      : snap_(snap), query_(query), qv_(qv), depth_(depth) {}

  // BM25's hits (as search_bm25) for `query` at `depth`, or null when the
  // memo cannot answer them.
  const bm25_found* bm25(std::string_view query, size_t depth) {
    if (query != query_ || depth > depth_)
      return nullptr;
    if (!bm25_)
      bm25_ = search_bm25(snap_, query_, depth_);
    return &*bm25_;
  }
  // snap.vectors.search(qv.values, depth)'s hits, or null.
  const std::vector<vector_index::hit>* vectors(const query_vector& qv, size_t depth) {
    if (&qv != &qv_ || depth > depth_
        || (depth != depth_
            && !(snap_.vectors.ranks_exactly(depth) && snap_.vectors.ranks_exactly(depth_))))
      return nullptr;
    if (!vectors_)
      vectors_ = snap_.vectors.search(qv_.values, depth_);
    return &*vectors_;
  }
  int searches() const { return int{bm25_.has_value()} + int{vectors_.has_value()}; }

private:
  const kb_snapshot& snap_;
  std::string_view query_;
  const query_vector& qv_;
  size_t depth_;
  std::optional<bm25_found> bm25_;
  std::optional<std::vector<vector_index::hit>> vectors_;
};

// The first `depth` of `hits` with a positive score, ids as text.
template <class Hits>
void add_hits(ranked_list& l, const Hits& hits, size_t depth) {
  for (size_t i = 0; i < hits.size() && i < depth; ++i)
    if (hits[i].second > 0)
      l.items.emplace_back(std::to_string(hits[i].first), hits[i].second);
}

// The BM25 leg, from `memo` when it can answer it.
ranked_list bm25_leg(const kb_snapshot& snap, std::string_view query, size_t depth, double weight,
                     search_memo* memo = nullptr) {
  ranked_list l;
  l.leg = "bm25";
  l.weight = weight;
  if (snap.settings.bm25_threshold > 0)
    l.min_score = snap.settings.bm25_threshold;
  bm25_found own;
  const bm25_found* found = memo ? memo->bm25(query, depth) : nullptr;
  if (!found) {
    own = search_bm25(snap, query, depth);
    found = &own;
  }
  l.note = found->note;
  add_hits(l, found->hits, depth);
  return l;
}

ranked_list bm25_terms_leg(const kb_snapshot& snap,
                           const std::vector<std::pair<std::string, double>>& terms, size_t depth,
                           double weight) {
  ranked_list l;
  l.leg = "bm25";
  l.weight = weight;
  add_hits(l, snap.index.search_terms(terms, depth), depth);
  return l;
}

ranked_list vector_leg(const kb_snapshot& snap, const query_vector& qv, size_t depth, double weight,
                       search_memo* memo = nullptr) {
  ranked_list l;
  l.leg = "vector";
  l.weight = weight;
  if (snap.settings.vector_threshold != 0)
    l.min_score = snap.settings.vector_threshold;
  if (!snap.embed || snap.vectors.size() == 0)
    return l;
  if (!qv.error.empty()) {
    l.error = qv.error;
    return l;
  }
  if (qv.values.empty())
    return l;
  if (auto* hits = memo ? memo->vectors(qv, depth) : nullptr)
    add_hits(l, *hits, depth);
  else
    add_hits(l, snap.vectors.search(qv.values, depth), depth);
  return l;
}

std::vector<found_chunk> from_list(const ranked_list& l, size_t k) {
  std::vector<found_chunk> out;
  for (size_t i = 0; i < l.items.size() && i < k; ++i)
    out.push_back({static_cast<uint32_t>(std::stoul(l.items[i].first)), l.items[i].second, l.leg});
  return out;
}

std::vector<found_chunk> from_fused(const std::vector<fused_item>& f, std::string_view source) {
  std::vector<found_chunk> out;
  for (auto& x : f) {
    std::string src{source};
    if (source.empty())
      for (auto& [leg, rank] : x.ranks)
        src += (src.empty() ? "" : "+") + leg;
    out.push_back({static_cast<uint32_t>(std::stoul(x.id)), x.score, std::move(src)});
  }
  return out;
}

std::string leg_detail(const ranked_list& l) {
  if (!l.error.empty())
    return l.leg + " failed: " + l.error;
  return l.leg + " hits=" + std::to_string(l.items.size()) + (l.note.empty() ? "" : " " + l.note);
}

agent_found naive(const kb_snapshot& snap, std::string_view query, const query_vector& qv, size_t k,
                  search_memo* memo = nullptr) {
  agent_found r;
  auto t = steady::now();
  auto v = vector_leg(snap, qv, k, 1.0, memo);
  if (!snap.embed) {
    auto b = bm25_leg(snap, query, k, 1.0, memo);
    r.chunks = from_list(b, k);
    r.trace.push_back({"bm25", "no vector index for this KB; " + leg_detail(b), ms_since(t)});
    return r;
  }
  if (!v.error.empty())
    throw search_error{v.error};
  std::erase_if(v.items, [&](auto& it) { return v.min_score && it.second < *v.min_score; });
  r.chunks = from_list(v, k);
  r.trace.push_back({"vector", snap.embed->name() + " " + leg_detail(v), ms_since(t)});
  return r;
}

std::vector<fused_item> hybrid_fused(const kb_snapshot& snap, std::string_view query,
                                     const query_vector& qv, size_t k,
                                     std::vector<trace_step>& trace, search_memo* memo) {
  auto depth = over_retrieve_depth(k);
  // search_mode (KB setting) chooses the legs; "vector" without a vector
  // index falls back to BM25.
  auto& mode = snap.settings.search_mode;
  bool use_vector = mode != "bm25" && (mode != "vector" || snap.embed);
  bool use_bm25 = mode != "vector" || !snap.embed;
  const auto& policy = snap.fusion();
  std::vector<ranked_list> legs;
  auto t = steady::now();
  auto v = use_vector ? vector_leg(snap, qv, depth, policy.vector_weight, memo) : ranked_list{};
  trace.push_back(
      {"vector", use_vector ? leg_detail(v) : "skipped: search_mode=" + mode, ms_since(t)});
  if (!v.error.empty()) {
    // The embedding model failed: BM25 alone, whatever the search_mode.
    use_vector = false;
    use_bm25 = true;
  }
  t = steady::now();
  auto b = use_bm25 ? bm25_leg(snap, query, depth, policy.keyword_weight, memo) : ranked_list{};
  trace.push_back({"bm25", use_bm25 ? leg_detail(b) : "skipped: search_mode=" + mode, ms_since(t)});
  if (use_bm25)
    legs.push_back(std::move(b));
  if (use_vector)
    legs.push_back(std::move(v));
  t = steady::now();
  auto fused = fuse(legs, k, policy.rule);
  trace.push_back(
      {"fusion", policy.reason + " fused=" + std::to_string(fused.size()), ms_since(t)});
  return fused;
}

agent_found hybrid(const kb_snapshot& snap, std::string_view query, const query_vector& qv,
                   size_t k, search_memo* memo = nullptr) {
  agent_found r;
  r.chunks = from_fused(hybrid_fused(snap, query, qv, k, r.trace, memo), "");
  return r;
}

agent_found graph(const kb_snapshot& snap, std::string_view query, const query_vector& qv, size_t k,
                  search_memo* memo = nullptr) {
  agent_found r;
  auto t = steady::now();
  auto depth = over_retrieve_depth(k);
  auto local = snap.graph.local_search(query, depth);
  r.entity_ids = local.entity_ids;
  r.relationship_ids = local.relation_ids;
  // Graph evidence decides which chunks qualify; the query's other words
  // (BM25, normalised) order chunks the graph scores alike.
  // The BM25 scores (all positive) by chunk row, in the thread's
  // accumulator (empty again once drained below).
  auto& lexical = sparse_scores::for_thread(snap.chunks.size());
  double lex_max = 0;
  auto add_lexical = [&](const auto& hits) {
    for (size_t i = 0; i < hits.size() && i < depth; ++i) {
      lexical.add(hits[i].first, hits[i].second);
      lex_max = std::max(lex_max, hits[i].second);
    }
  };
  if (auto* found = memo ? memo->bm25(query, depth) : nullptr; found && !found->expanded)
    add_lexical(found->hits);
  else
    add_lexical(snap.index.search(query, depth));
  double graph_max = local.chunks.empty() ? 1 : local.chunks.front().second;
  std::vector<std::pair<uint32_t, double>> ranked;
  ranked.reserve(local.chunks.size());
  for (auto& [idx, score] : local.chunks) {
    auto lex = lex_max > 0 ? lexical.at(idx) / lex_max : 0.0;
    ranked.emplace_back(idx, score / graph_max + lex);
  }
  lexical.clear();
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (size_t i = 0; i < ranked.size() && i < k; ++i)
    r.chunks.push_back({ranked[i].first, ranked[i].second, "graph_local"});
  r.trace.push_back({"graph_local",
                     "entities=" + std::to_string(local.entity_ids.size())
                         + " relations=" + std::to_string(local.relation_ids.size())
                         + " chunks=" + std::to_string(local.chunks.size()),
                     ms_since(t)});
  if (r.chunks.empty()) {
    t = steady::now();
    auto topics = snap.graph.global_search(query, 3);
    std::string ids;
    for (auto& topic : topics) {
      ids += (ids.empty() ? "" : ",") + topic.id;
      for (auto idx : topic.chunks)
        if (r.chunks.size() < k)
          r.chunks.push_back({idx, topic.score, "graph_global"});
    }
    r.trace.push_back({"graph_global", "topics=" + ids, ms_since(t)});
  }
  if (r.chunks.empty()) {
    auto h = hybrid(snap, query, qv, k, memo);
    r.chunks = std::move(h.chunks);
    for (auto& s : h.trace)
      r.trace.push_back(s);
    r.trace.push_back({"fallback", "no entity or topic matched; hybrid results", 0});
  }
  return r;
}

research_state first_round(const kb_snapshot& snap, std::string_view query, const query_vector& qv,
                           size_t k, search_memo* memo);

agent_found research_found(research_state st);

agent_found research(const kb_snapshot& snap, std::string_view query, const query_vector& qv,
                     size_t k, int max_rounds = research_max_rounds, search_memo* memo = nullptr) {
  auto st = first_round(snap, query, qv, k, memo);
  research_rm3_rounds(snap, st, max_rounds);
  return research_found(std::move(st));
}

agent_found fusion(const kb_snapshot& snap, std::string_view query, const query_vector& qv,
                   size_t k) {
  agent_found r;
  std::vector<ranked_list> lists;
  // The agents with a BM25 leg carry full weight; the vector-only and the
  // graph agent (weaker than BM25 on the evaluation sets) the share the
  // fusion policy gives the vector leg relative to BM25, at most 1 (so
  // with a semantic embedder all four weigh the same, as before).
  const auto& policy = snap.fusion();
  double weak =
      policy.keyword_weight > 0 ? std::min(1.0, policy.vector_weight / policy.keyword_weight) : 1.0;
  // The agents' chunks are fused by their chunk ids (as their items are
  // named, and ties are broken); the fused ids' rows.
  std::unordered_map<std::string_view, uint32_t> row_by_id;
  auto add = [&](std::string name, agent_found sub) {
    ranked_list l;
    l.leg = name;
    l.weight = name == "naive_rag_agent" || name == "graph_agent" ? weak : 1.0;
    for (auto& c : sub.chunks) {
      auto& id = snap.chunks[c.idx].chunk_id;
      l.items.emplace_back(id, c.score);
      row_by_id.try_emplace(id, c.idx);
    }
    for (auto& s : sub.trace)
      r.trace.push_back({name + "/" + s.step, s.detail, s.duration_ms});
    for (auto& e : sub.entity_ids)
      r.entity_ids.push_back(e);
    for (auto& rel : sub.relationship_ids)
      r.relationship_ids.push_back(rel);
    lists.push_back(std::move(l));
  };
  auto depth = over_retrieve_depth(k);
  // The four agents run one after another on the calling thread: a search
  // runs on one of the agent's worker actors, and the workers already
  // keep every core busy (no thread per query). They share one BM25 and
  // one vector search (search_memo).
  auto t0 = steady::now();
  search_memo memo{snap, query, qv, over_retrieve_depth(depth)};
  try {
    add("naive_rag_agent", naive(snap, query, qv, depth, &memo));
  } catch (const search_error& e) {
    r.trace.push_back({"naive_rag_agent", std::string{"failed: "} + e.what(), 0});
  }
  add("hybrid_agent", hybrid(snap, query, qv, depth, &memo));
  add("graph_agent", graph(snap, query, qv, depth, &memo));
  add("deep_research_agent", research(snap, query, qv, depth, 2, &memo));
  r.trace.push_back(
      {"legs", "4 agents, " + std::to_string(memo.searches()) + " shared searches", ms_since(t0)});
  auto t = steady::now();
  auto fused = fuse(lists, k, policy.rule);
  for (auto& f : fused) {
    std::string src;
    for (auto& [leg, rank] : f.ranks)
      src += (src.empty() ? "" : "+") + leg.substr(0, leg.find('_'));
    r.chunks.push_back({row_by_id.at(f.id), f.score, std::move(src)});
  }
  r.trace.push_back({"fusion",
                     std::string{to_string(policy.rule)} + " agents=4 weights hybrid=1 research=1"
                         + " naive=" + std::to_string(weak).substr(0, 4)
                         + " graph=" + std::to_string(weak).substr(0, 4)
                         + " fused=" + std::to_string(fused.size()) + " (" + policy.reason + ")",
                     ms_since(t)});
  return r;
}

}  // namespace

namespace {

// The rounds' legs fused, as far as anything reads (research_state::fused):
// the first n of a deeper fusion, in fewer items made.
std::vector<fused_item> fuse_rounds(const research_state& st) {
  return fuse(st.legs, std::max(st.k, research_feedback_chunks), st.rule);
}

// The query's coverage by the first k chunks' texts, from the BM25 index
// instead of tokenizing them: a chunk is indexed as tokenize(title + "\n"
// + text), the title's terms then the text's, so a term is in the text
// when it occurs more often in the chunk than in its title (titles are
// short; tokenized only for a chunk that holds the term).
double coverage_of(const kb_snapshot& snap, const research_state& st) {
  auto n = std::min(st.fused.size(), st.k);
  std::vector<uint32_t> ids(n);
  for (size_t i = 0; i < n; ++i)
    ids[i] = static_cast<uint32_t>(std::stoul(st.fused[i].id));
  std::vector<std::optional<std::vector<std::string>>> titles(n);
  auto holds = [&](const std::string& term) {
    auto postings = snap.index.postings_of(term);
    for (size_t i = 0; i < n && !postings.chunks.empty(); ++i) {
      auto tf = postings.frequency_in(ids[i]);
      if (tf == 0)
        continue;
      auto& title = snap.chunks[ids[i]].title;
      if (title.empty())
        return true;
      if (!titles[i])
        titles[i] = tokenize(title);
      if (tf > std::count(titles[i]->begin(), titles[i]->end(), term))
        return true;
    }
    return false;
  };
  return query_coverage(st.query, holds,
                        [&](std::string_view term) { return snap.index.idf(term); });
}

// Adds a later round's leg, fuses the rounds again and re-measures; true when the
// evidence now covers more of the question.
bool add_round(const kb_snapshot& snap, research_state& st, ranked_list leg, std::string detail,
               steady::time_point t) {
  st.legs.push_back(std::move(leg));
  st.fused = fuse_rounds(st);
  auto next = coverage_of(snap, st);
  ++st.round;
  st.trace.push_back({"round " + std::to_string(st.round),
                      detail + " coverage=" + std::to_string(next).substr(0, 4), ms_since(t)});
  bool progress = next > st.coverage;
  st.coverage = next;
  return progress;
}

}  // namespace

research_state research_first_round(const kb_snapshot& snap, std::string_view query,
                                    const query_vector& qv, size_t k) {
  return first_round(snap, query, qv, k, nullptr);
}

namespace {

research_state first_round(const kb_snapshot& snap, std::string_view query, const query_vector& qv,
                           size_t k, search_memo* memo) {
  research_state st;
  st.query = std::string{query};
  st.k = k;
  const auto& policy = snap.fusion();
  st.rule = policy.rule;
  st.keyword_weight = policy.keyword_weight;
  auto depth = over_retrieve_depth(k);
  auto t = steady::now();
  auto bm25 = bm25_leg(snap, query, depth, policy.keyword_weight, memo);
  auto vec = vector_leg(snap, qv, depth, policy.vector_weight, memo);
  std::string detail = vec.error.empty() ? "hybrid" : "bm25 only (" + leg_detail(vec) + ")";
  if (!bm25.note.empty())
    detail += " " + bm25.note;
  st.legs.push_back(std::move(bm25));
  st.legs.push_back(std::move(vec));
  st.fused = fuse_rounds(st);
  st.coverage = coverage_of(snap, st);
  st.round = 1;
  st.trace.push_back({"round 1",
                      detail + " coverage=" + std::to_string(st.coverage).substr(0, 4) + " ("
                          + policy.reason + ")",
                      ms_since(t)});
  return st;
}

}  // namespace

std::vector<std::string> research_evidence(const kb_snapshot& snap, const research_state& st,
                                           size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < st.fused.size() && i < n; ++i) {
    auto& c = snap.chunks[std::stoul(st.fused[i].id)];
    out.push_back(c.title.empty() ? c.text : c.title + "\n" + c.text);
  }
  return out;
}

bool research_rm3_round(const kb_snapshot& snap, research_state& st) {
  auto t = steady::now();
  std::vector<std::pair<std::string, double>> feedback;
  for (size_t i = 0; i < st.fused.size() && i < research_feedback_chunks; ++i) {
    auto& c = snap.chunks[std::stoul(st.fused[i].id)];
    feedback.emplace_back(c.title + "\n" + c.text, st.fused[i].score);
  }
  auto expansion = rm3_expand(st.query, feedback, 10, 0.6);
  std::vector<std::pair<std::string, double>> terms;
  std::string shown;
  for (auto& w : expansion) {
    terms.emplace_back(w.term, w.weight);
    if (shown.size() < 80)
      shown += (shown.empty() ? "" : " ") + w.term;
  }
  auto leg = bm25_terms_leg(snap, terms, over_retrieve_depth(st.k),
                            st.keyword_weight * research_expansion_weight);
  leg.leg = "rm3_round" + std::to_string(st.round + 1);
  return add_round(snap, st, std::move(leg), "rewrite=[" + shown + "]", t);
}

void research_rm3_rounds(const kb_snapshot& snap, research_state& st, int max_rounds) {
  while (st.round < max_rounds && st.coverage < research_sufficient_coverage)
    if (!research_rm3_round(snap, st))
      break;  // no progress: stop early
}

bool research_rewrite_round(const kb_snapshot& snap, research_state& st, std::string_view rewritten,
                            std::string_view why) {
  auto t = steady::now();
  auto leg = bm25_leg(snap, rewritten, over_retrieve_depth(st.k),
                      st.keyword_weight * research_expansion_weight);
  leg.leg = "rewrite_round" + std::to_string(st.round + 1);
  auto detail = std::string{why} + " rewrite=[" + std::string{rewritten.substr(0, 80)} + "]"
                + (leg.note.empty() ? "" : " " + leg.note);
  return add_round(snap, st, std::move(leg), std::move(detail), t);
}

namespace {

agent_found research_found(research_state st) {
  agent_found r;
  r.trace = std::move(st.trace);
  st.fused.resize(std::min(st.fused.size(), st.k));
  r.chunks = from_fused(st.fused, "deep_research");
  return r;
}

}  // namespace

retrieval_result research_result(const kb_snapshot& snap, research_state st) {
  return result_of(snap, research_found(std::move(st)));
}

bool needs_query_vector(const kb_snapshot& snap, std::string_view agent_type) {
  if (!snap.embed || snap.vectors.size() == 0)
    return false;
  // The hybrid agent (also the graph agent's fallback) honours search_mode;
  // the others always search vectors.
  bool honours_mode = agent_type != "naive_rag_agent" && agent_type != "deep_research_agent"
                      && agent_type != "fusion_agent";
  return !(honours_mode && snap.settings.search_mode == "bm25");
}

query_vector to_query_vector(std::variant<embedding_batch, std::string> embedded) {
  query_vector qv;
  if (auto* err = std::get_if<std::string>(&embedded))
    qv.error = std::move(*err);
  else if (auto& rows = std::get<embedding_batch>(embedded); !rows.empty())
    qv.values = std::move(rows.front());
  return qv;
}

query_vector embed_query(const kb_snapshot& snap, std::string_view query) {
  if (!snap.embed || snap.vectors.size() == 0)
    return {};
  return to_query_vector(snap.embed->embed({std::string{query}}));
}

retrieval_result run_agent(const kb_snapshot& snap, std::string_view agent_type,
                           std::string_view query, size_t top_k) {
  return run_agent(snap, agent_type, query,
                   needs_query_vector(snap, agent_type) ? embed_query(snap, query) : query_vector{},
                   top_k);
}

retrieval_result run_agent(const kb_snapshot& snap, std::string_view agent_type,
                           std::string_view query, const query_vector& qv, size_t top_k) {
  agent_found found;
  if (agent_type == "naive_rag_agent")
    found = naive(snap, query, qv, top_k);
  else if (agent_type == "graph_agent")
    found = graph(snap, query, qv, top_k);
  else if (agent_type == "deep_research_agent")
    found = research(snap, query, qv, top_k);
  else if (agent_type == "fusion_agent")
    found = fusion(snap, query, qv, top_k);
  else
    found = hybrid(snap, query, qv, top_k);
  auto r = result_of(snap, std::move(found));
  finish_result(snap, r);
  return r;
}

void finish_result(const kb_snapshot& snap, retrieval_result& r) {
  // min_confidence_score (KB setting): drop results far below the best.
  if (auto min = snap.settings.min_confidence_score; min > 0 && !r.retrieval_results.empty()) {
    double best = 0;
    for (auto& item : r.retrieval_results)
      best = std::max(best, item.score);
    auto before = r.retrieval_results.size();
    std::erase_if(r.retrieval_results,
                  [&](const retrieval_item& item) { return item.score < min * best; });
    r.trace.push_back({"min_confidence",
                       "kept " + std::to_string(r.retrieval_results.size()) + " of "
                           + std::to_string(before)
                           + " scoring >= " + std::to_string(min).substr(0, 4) + " x best",
                       0});
  }
  fill_ids_and_context(r);
}

void fill_ids_and_context(retrieval_result& r) {
  r.chunk_ids.clear();
  r.context.clear();
  for (auto& item : r.retrieval_results) {
    r.chunk_ids.push_back(item.result_id);
    if (!r.context.empty())
      r.context += "\n\n";
    r.context += item.evidence;
  }
}

}  // namespace ragtor
