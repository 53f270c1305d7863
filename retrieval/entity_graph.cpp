#include "retrieval/entity_graph.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>

#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

std::string join(const std::vector<std::string>& terms) {
  std::string out;
  for (auto& t : terms) {
    if (!out.empty())
      out += ' ';
    out += t;
  }
  return out;
}

bool capitalised(std::string_view w) {
  if (w.empty())
    return false;
  auto c = static_cast<unsigned char>(w[0]);
  if (std::isupper(c))
    return true;
  // words with digits and letters (BRCA1, p53) are names too
  bool digit = false, alpha = false;
  for (unsigned char x : w) {
    digit |= std::isdigit(x) != 0;
    alpha |= std::isalpha(x) != 0;
  }
  return digit && alpha;
}

// Runs of 1-4 capitalised words (or words mixing letters and digits).
std::vector<std::string> named_phrases(std::string_view text) {
  std::vector<std::string> out;
  std::vector<std::string> run;
  auto flush = [&] {
    if (!run.empty() && run.size() <= 4)
      out.push_back([&] {
        std::string s;
        for (auto& w : run)
          s += (s.empty() ? "" : " ") + w;
        return s;
      }());
    run.clear();
  };
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (!(std::isalnum(c) || c == '-')) {
      if (c != ' ')
        flush();
      ++i;
      continue;
    }
    auto start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '-'))
      ++i;
    auto word = text.substr(start, i - start);
    bool cap = capitalised(word);
    // A capitalised sentence-initial word starts a run like any other;
    // build() drops lone words that are too common to be names.
    if (cap)
      run.emplace_back(word);
    else
      flush();
  }
  flush();
  return out;
}

}  // namespace

entity_graph entity_graph::build(const std::vector<chunk>& chunks, graph_options opts) {
  return build(chunks, bm25_index::build(chunks), opts);
}

entity_graph entity_graph::build(const std::vector<chunk>& chunks, const bm25_index& index,
                                 graph_options opts) {
  entity_graph g;
  auto n = chunks.size();
  if (n == 0)
    return g;
  // Each chunk's terms with their frequency, and each term's document
  // frequency, from the index's postings (the index tokenized the same
  // title + "\n" + text).
  std::vector<std::string_view> term_text;
  std::vector<uint32_t> df;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> tfs(n);  // (term, tf)
  index.visit_postings([&](std::string_view term, const std::vector<uint32_t>& docs,
                           const std::vector<uint32_t>& counts) {
    auto id = static_cast<uint32_t>(term_text.size());
    term_text.push_back(term);
    df.push_back(static_cast<uint32_t>(docs.size()));
    for (size_t i = 0; i < docs.size(); ++i)
      if (docs[i] < n)
        tfs[docs[i]].emplace_back(id, counts[i]);
  });
  auto max_df = std::max<double>(2, opts.max_df_fraction * static_cast<double>(n));
  std::vector<std::map<std::string, int>> surface;  // per entity: display form counts
  std::vector<std::vector<uint32_t>> mentions(n);   // per chunk, ascending once sorted
  auto intern = [&](const std::string& key, std::string_view display) {
    auto [it, inserted] = g.by_key_.emplace(key, static_cast<uint32_t>(g.entities_.size()));
    if (inserted) {
      entity e;
      e.key = key;
      g.entities_.push_back(std::move(e));
      surface.emplace_back();
      auto first = key.substr(0, key.find(' '));
      g.by_term_[first].push_back(it->second);
    }
    ++surface[it->second][std::string{display}];
    return it->second;
  };
  std::vector<std::pair<double, std::string_view>> scored;
  for (size_t c = 0; c < n; ++c) {
    for (auto& phrase : named_phrases(chunks[c].text)) {
      auto terms = tokenize(phrase);
      if (terms.empty())
        continue;
      // A single sentence-initial capitalised word is usually not a name;
      // keep single words only when they are rare enough to be salient.
      if (terms.size() == 1 && static_cast<double>(index.document_frequency(terms[0])) > max_df)
        continue;
      mentions[c].push_back(intern(join(terms), phrase));
    }
    // Salient terms by tf-idf.
    scored.clear();
    for (auto [t, tf] : tfs[c]) {
      auto d = df[t];
      if (d < 2 || d > max_df)
        continue;
      scored.emplace_back(tf * std::log(static_cast<double>(n) / d), term_text[t]);
    }
    auto keep = std::min(scored.size(), opts.salient_per_chunk);
    std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                      scored.end(), std::greater<>());
    for (size_t i = 0; i < keep; ++i) {
      std::string term{scored[i].second};
      mentions[c].push_back(intern(term, term));
    }
    std::sort(mentions[c].begin(), mentions[c].end());
    mentions[c].erase(std::unique(mentions[c].begin(), mentions[c].end()), mentions[c].end());
  }
  for (size_t e = 0; e < g.entities_.size(); ++e) {
    auto& forms = surface[e];
    g.entities_[e].name = std::max_element(forms.begin(), forms.end(), [](auto& a, auto& b) {
                            return a.second < b.second;
                          })->first;
  }
  // Mentions and co-occurrence: every pair of entities in a chunk, as
  // (smaller << 32 | larger), counted once sorted.
  std::vector<uint64_t> pairs;
  for (size_t c = 0; c < n; ++c) {
    auto& m = mentions[c];
    for (auto e : m)
      g.entities_[e].chunks.push_back(static_cast<uint32_t>(c));
    for (size_t i = 0; i < m.size(); ++i)
      for (size_t j = i + 1; j < m.size(); ++j)
        pairs.push_back(uint64_t{m[i]} << 32 | m[j]);
  }
  std::sort(pairs.begin(), pairs.end());
  for (size_t i = 0; i < pairs.size();) {
    auto j = i;
    while (j < pairs.size() && pairs[j] == pairs[i])
      ++j;
    auto a = static_cast<uint32_t>(pairs[i] >> 32), b = static_cast<uint32_t>(pairs[i]);
    auto w = static_cast<uint32_t>(j - i);
    g.entities_[a].neighbours.emplace_back(b, w);
    g.entities_[b].neighbours.emplace_back(a, w);
    ++g.relation_count_;
    i = j;
  }
  for (auto& e : g.entities_) {
    std::sort(e.neighbours.begin(), e.neighbours.end(), [](auto& a, auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    if (e.neighbours.size() > opts.max_neighbours)
      e.neighbours.resize(opts.max_neighbours);
    e.idf = std::log(1.0 + static_cast<double>(n) / static_cast<double>(e.chunks.size()));
  }
  // Topics: connected components over edges of weight >= 2.
  for (uint32_t start = 0; start < g.entities_.size(); ++start) {
    if (g.entities_[start].topic >= 0)
      continue;
    std::vector<uint32_t> stack{start}, members;
    auto id = static_cast<int32_t>(g.topics_.size());
    g.entities_[start].topic = id;
    while (!stack.empty()) {
      auto e = stack.back();
      stack.pop_back();
      members.push_back(e);
      for (auto [nb, w] : g.entities_[e].neighbours)
        if (w >= 2 && g.entities_[nb].topic < 0) {
          g.entities_[nb].topic = id;
          stack.push_back(nb);
        }
    }
    topic t;
    std::sort(members.begin(), members.end(), [&](uint32_t a, uint32_t b) {
      auto da = g.entities_[a].chunks.size(), db = g.entities_[b].chunks.size();
      return da != db ? da > db : a < b;
    });
    t.entities = members;
    t.summary = "Topic:";
    for (size_t i = 0; i < members.size() && i < 6; ++i)
      t.summary += (i ? ", " : " ") + g.entities_[members[i]].name;
    std::map<uint32_t, int> chunk_mentions;
    for (auto e : members)
      for (auto c : g.entities_[e].chunks)
        ++chunk_mentions[c];
    std::vector<std::pair<int, uint32_t>> ranked;
    for (auto& [c, k] : chunk_mentions)
      ranked.emplace_back(-k, c);
    std::sort(ranked.begin(), ranked.end());
    for (size_t i = 0; i < ranked.size() && i < 5; ++i)
      t.chunks.push_back(ranked[i].second);
    g.topics_.push_back(std::move(t));
  }
  return g;
}

std::vector<uint32_t> entity_graph::match(std::string_view query) const {
  auto terms = tokenize(query);
  std::set<uint32_t> out;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto it = by_term_.find(terms[i]);
    if (it == by_term_.end())
      continue;
    for (auto e : it->second) {
      // The entity's key must appear as a contiguous run in the query.
      auto& key = entities_[e].key;
      std::string run;
      for (size_t j = i; j < terms.size() && run.size() < key.size(); ++j)
        run += (run.empty() ? "" : " ") + terms[j];
      if (run == key)
        out.insert(e);
    }
  }
  return {out.begin(), out.end()};
}

entity_graph::local_result entity_graph::local_search(std::string_view query, size_t k) const {
  local_result r;
  auto seeds = match(query);
  std::map<uint32_t, double> weight;  // entity -> weight in this search
  for (auto e : seeds) {
    weight[e] = std::max(weight[e], entities_[e].idf);
    r.entity_ids.push_back("e:" + entities_[e].key);
  }
  for (auto e : seeds) {
    auto& ent = entities_[e];
    double strongest = ent.neighbours.empty() ? 1.0 : ent.neighbours.front().second;
    for (size_t i = 0; i < ent.neighbours.size() && i < 5; ++i) {
      auto [nb, w] = ent.neighbours[i];
      auto nw = 0.5 * entities_[nb].idf * (w / strongest);
      if (nw > weight[nb]) {
        if (weight[nb] == 0)
          r.entity_ids.push_back("e:" + entities_[nb].key);
        weight[nb] = nw;
      }
      auto a = std::min(ent.key, entities_[nb].key), b = std::max(ent.key, entities_[nb].key);
      r.relation_ids.push_back("r:" + a + "|" + b);
    }
  }
  std::map<uint32_t, double> chunk_score;
  for (auto& [e, w] : weight)
    for (auto c : entities_[e].chunks)
      chunk_score[c] += w;
  for (auto& [c, s] : chunk_score)
    r.chunks.emplace_back(c, s);
  std::sort(r.chunks.begin(), r.chunks.end(), [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (r.chunks.size() > k)
    r.chunks.resize(k);
  return r;
}

std::vector<entity_graph::topic_hit> entity_graph::global_search(std::string_view query,
                                                                 size_t k) const {
  auto terms = tokenize(query);
  std::set<std::string> q{terms.begin(), terms.end()};
  std::vector<topic_hit> out;
  for (size_t t = 0; t < topics_.size(); ++t) {
    double score = 0;
    for (auto e : topics_[t].entities)
      for (auto& term : tokenize(entities_[e].key))
        if (q.count(term))
          score += entities_[e].idf;
    if (score > 0)
      out.push_back({"c:" + std::to_string(t), topics_[t].summary, score, topics_[t].chunks});
  }
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.score != b.score ? a.score > b.score : a.id < b.id; });
  if (out.size() > k)
    out.resize(k);
  return out;
}

kb_graph_rows entity_graph::rows(std::string kb, const std::vector<chunk>& chunks) const {
  kb_graph_rows out;
  out.kb = std::move(kb);
  uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s)
      h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  auto chunk_id = [&](uint32_t c) {
    return c < chunks.size() ? chunks[c].chunk_id : std::string{};
  };
  for (auto& e : entities_) {
    graph_entity_row r;
    r.id = "e:" + e.key;
    r.name = e.name;
    r.kind = e.name != e.key ? "named" : "term";
    r.description = "mentioned in " + std::to_string(e.chunks.size()) + " chunk(s)";
    if (e.topic >= 0)
      r.description += "; " + topics_[static_cast<size_t>(e.topic)].summary;
    mix(r.id), mix(r.name), mix(r.kind), mix(r.description);
    out.entities.push_back(std::move(r));
  }
  // Each kept link once (both ends may keep it, with the same weight), in
  // the order of its (smaller, larger) entity pair.
  std::vector<std::pair<uint64_t, uint32_t>> links;  // (smaller << 32 | larger, weight)
  for (uint32_t a = 0; a < entities_.size(); ++a)
    for (auto [b, w] : entities_[a].neighbours)
      links.emplace_back(uint64_t{std::min(a, b)} << 32 | std::max(a, b), w);
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end(),
                          [](auto& x, auto& y) { return x.first == y.first; }),
              links.end());
  for (auto& [ab, w] : links) {
    auto& ea = entities_[ab >> 32];
    auto& eb = entities_[static_cast<uint32_t>(ab)];
    graph_relation_row r;
    r.id = "r:" + ea.key + "|" + eb.key;
    r.source = "e:" + ea.key;
    r.target = "e:" + eb.key;
    r.kind = "co_occurs";
    r.weight = w;
    std::vector<uint32_t> both;
    std::set_intersection(ea.chunks.begin(), ea.chunks.end(), eb.chunks.begin(), eb.chunks.end(),
                          std::back_inserter(both));
    if (!both.empty())
      r.chunk_id = chunk_id(both.front());
    mix(r.id), mix(std::to_string(w)), mix(r.chunk_id);
    out.relations.push_back(std::move(r));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  out.signature = buf;
  return out;
}

}  // namespace ragtor
