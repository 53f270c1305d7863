#include "retrieval/entity_graph.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>

#include "protocol/text.hpp"
#include "retrieval/binary_io.hpp"
#include "retrieval/sparse_scores.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {

constexpr uint32_t no_chunk = UINT32_MAX;

std::string join(const std::vector<std::string>& terms) {
  std::string out;
  for (auto& t : terms) {
    if (!out.empty())
      out += ' ';
    out += t;
  }
  return out;
}

// A letter, a digit or '-': what a word of a name is made of.
bool word_char(char c) {
  return is_ascii_alnum(c) || c == '-';
}

bool capitalised(std::string_view w) {
  if (w.empty())
    return false;
  if (is_ascii_upper(w[0]))
    return true;
  // words with digits and letters (BRCA1, p53) are names too
  bool digit = false, alpha = false;
  for (char x : w) {
    digit |= is_ascii_digit(x);
    alpha |= is_ascii_alpha(x);
  }
  return digit && alpha;
}

// Calls f with each run of 1-4 capitalised words (or words mixing letters
// and digits), its words joined by one space; the view lasts the call.
template <class F>
void for_each_named_phrase(std::string_view text, F f) {
  std::string phrase;
  size_t words = 0;
  auto flush = [&] {
    if (words > 0 && words <= 4)
      f(std::string_view{phrase});
    phrase.clear();
    words = 0;
  };
  size_t i = 0;
  while (i < text.size()) {
    auto c = text[i];
    if (!word_char(c)) {
      if (c != ' ')
        flush();
      ++i;
      continue;
    }
    auto start = i;
    while (i < text.size() && word_char(text[i]))
      ++i;
    auto word = text.substr(start, i - start);
    // A capitalised sentence-initial word starts a run like any other;
    // build() drops lone words that are too common to be names.
    if (capitalised(word)) {
      if (words++ > 0)
        phrase += ' ';
      phrase += word;
    } else {
      flush();
    }
  }
  flush();
}

// A way an entity was written, and how often.
struct written_form {
  uint32_t entity;
  std::string_view text;
  uint32_t seen;
};

// Per entity, the form it was written in most often, the first in byte
// order on a tie (forms written alike are one form: a phrase and a salient
// term may be).
std::vector<std::string_view> most_written(std::vector<written_form> forms, size_t entities) {
  std::sort(forms.begin(), forms.end(), [](auto& a, auto& b) {
    return a.entity != b.entity ? a.entity < b.entity : a.text < b.text;
  });
  std::vector<std::string_view> name(entities);
  std::vector<uint32_t> most(entities, 0);
  for (size_t i = 0; i < forms.size();) {
    auto [e, text, seen] = forms[i];
    for (++i; i < forms.size() && forms[i].entity == e && forms[i].text == text; ++i)
      seen += forms[i].seen;
    if (seen > most[e])
      name[e] = text, most[e] = seen;
  }
  return name;
}

}  // namespace

// The named phrases of a KB's chunks, each tokenized once when first met.
struct entity_graph::phrase_book {
  struct phrase {
    std::string_view text;  // as written (by_text's key)
    std::string key;        // its terms joined by ' ' ("" for none)
    bool single = false;    // one term: an entity only when rare enough
  };
  std::mutex mx;  // held by the build reading or growing it
  std::unordered_map<std::string, uint32_t, string_hash, std::equal_to<>> by_text;
  std::vector<phrase> all;

  uint32_t id_of(std::string_view text) {
    if (auto known = by_text.find(text); known != by_text.end())
      return known->second;
    auto id = static_cast<uint32_t>(all.size());
    auto& written = by_text.emplace(std::string{text}, id).first->first;
    auto terms = tokenize(text);
    all.push_back({written, join(terms), terms.size() == 1});
    return id;
  }
};

size_t entity_graph::phrases_known() const {
  if (!phrases_)
    return 0;
  std::lock_guard lock{phrases_->mx};
  return phrases_->all.size();
}

entity_graph entity_graph::build(const std::vector<chunk>& chunks, graph_options opts) {
  return build(chunks, bm25_index::build(chunks), opts);
}

entity_graph entity_graph::build(const std::vector<chunk>& chunks, const bm25_index& index,
                                 graph_options opts) {
  return build(chunks, index, opts, nullptr, {});
}

entity_graph entity_graph::build(const std::vector<chunk>& chunks, const bm25_index& index,
                                 graph_options opts, const entity_graph* previous,
                                 std::span<const int64_t> previous_row) {
  entity_graph g;
  auto n = chunks.size();
  if (n == 0)
    return g;
  // Each term's document frequency, and each chunk's candidate salient
  // terms with their frequency, from the index's postings (the index
  // tokenized the same title + "\n" + text): chunk c's are
  // tfs[tf_start[c]..tf_start[c + 1]), one array filled in two passes over
  // the postings (counted, then placed) instead of a vector per chunk.
  auto max_df = std::max<double>(2, opts.max_df_fraction * static_cast<double>(n));
  auto candidate = [&](size_t d) { return d >= 2 && static_cast<double>(d) <= max_df; };
  std::vector<std::string_view> term_text;
  std::vector<uint32_t> df;
  std::vector<uint32_t> tf_start(n + 1, 0);
  index.visit_postings(
      [&](std::string_view term, const std::vector<uint32_t>& docs, const std::vector<uint32_t>&) {
        term_text.push_back(term);
        df.push_back(static_cast<uint32_t>(docs.size()));
        if (candidate(docs.size()))
          for (auto d : docs)
            if (d < n)
              ++tf_start[d + 1];
      });
  for (size_t c = 0; c < n; ++c)
    tf_start[c + 1] += tf_start[c];
  std::vector<std::pair<uint32_t, uint32_t>> tfs(tf_start[n]);  // (term, tf)
  std::vector<double> idf(term_text.size(), 0.0);               // of the candidates
  {
    std::vector<uint32_t> next(tf_start.begin(), tf_start.end() - 1);
    uint32_t id = 0;
    index.visit_postings([&](std::string_view, const std::vector<uint32_t>& docs,
                             const std::vector<uint32_t>& counts) {
      if (candidate(docs.size())) {
        idf[id] = std::log(static_cast<double>(n) / df[id]);
        for (size_t i = 0; i < docs.size(); ++i)
          if (docs[i] < n)
            tfs[next[docs[i]]++] = {id, counts[i]};
      }
      ++id;
    });
  }
  // The book of phrases: previous's, with its chunks' phrases, unless it
  // holds more than twice the phrases in use (plus some), when this graph
  // starts a new one and finds every chunk's phrases in its text.
  std::shared_ptr<phrase_book> book;
  if (previous && previous->phrases_) {
    std::lock_guard lock{previous->phrases_->mx};
    if (previous->phrases_->all.size() <= 2 * previous->phrases_in_use_ + 4096)
      book = previous->phrases_;
  }
  auto previous_chunks = book ? previous->phrase_start_.size() - 1 : 0;
  if (!book)
    book = std::make_shared<phrase_book>();
  std::lock_guard lock{book->mx};
  g.phrases_ = book;
  g.phrase_start_.assign(n + 1, 0);
  g.phrase_ids_.reserve(previous ? previous->phrase_ids_.size() + 64 : 0);
  // Per chunk, the entities it mentions, ascending: chunk c's are
  // mentions[mention_start[c]..mention_start[c + 1]).
  std::vector<uint32_t> mentions, mention_start(n + 1, 0);
  // Each phrase and salient term as an entity: its id, or not yet met, or
  // not an entity; and how often it was mentioned so (the entity's name
  // is its most frequent form).
  constexpr uint32_t unmet = UINT32_MAX, no_entity = UINT32_MAX - 1;
  std::vector<uint32_t> phrase_entity(book->all.size(), unmet), phrase_seen(book->all.size(), 0);
  std::vector<uint32_t> term_entity(term_text.size(), unmet), term_seen(term_text.size(), 0);
  auto mention_phrase = [&](uint32_t p) {
    g.phrase_ids_.push_back(p);
    if (p >= phrase_entity.size()) {
      phrase_entity.resize(p + 1, unmet);
      phrase_seen.resize(p + 1, 0);
    }
    auto& e = phrase_entity[p];
    if (e == unmet) {
      // A single sentence-initial capitalised word is usually not a
      // name; keep single words only when they are rare enough to be
      // salient.
      auto& phrase = book->all[p];
      e = !phrase.key.empty()
                  && !(phrase.single
                       && static_cast<double>(index.document_frequency(phrase.key)) > max_df)
              ? g.enter(phrase.key).first
              : no_entity;
    }
    if (e != no_entity) {
      ++phrase_seen[p];
      mentions.push_back(e);
    }
  };
  std::vector<std::tuple<double, std::string_view, uint32_t>> scored;  // (tf-idf, term, id)
  for (size_t c = 0; c < n; ++c) {
    if (auto r = c < previous_row.size() ? previous_row[c] : -1;
        r >= 0 && static_cast<size_t>(r) < previous_chunks) {
      auto from = previous->phrase_start_[static_cast<size_t>(r)];
      auto to = previous->phrase_start_[static_cast<size_t>(r) + 1];
      for (auto i = from; i < to; ++i)
        mention_phrase(previous->phrase_ids_[i]);
    } else {
      for_each_named_phrase(chunks[c].text,
                            [&](std::string_view phrase) { mention_phrase(book->id_of(phrase)); });
    }
    g.phrase_start_[c + 1] = static_cast<uint32_t>(g.phrase_ids_.size());
    // Salient terms by tf-idf.
    scored.clear();
    for (auto i = tf_start[c]; i < tf_start[c + 1]; ++i) {
      auto [t, tf] = tfs[i];
      scored.emplace_back(tf * idf[t], term_text[t], t);
    }
    auto keep = std::min(scored.size(), opts.salient_per_chunk);
    std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                      scored.end(), std::greater<>());
    for (size_t i = 0; i < keep; ++i) {
      auto [score, term, id] = scored[i];
      if (term_entity[id] == unmet)
        term_entity[id] = g.enter(std::string{term}).first;
      ++term_seen[id];
      mentions.push_back(term_entity[id]);
    }
    auto from = mentions.begin() + mention_start[c];
    std::sort(from, mentions.end());
    mentions.erase(std::unique(from, mentions.end()), mentions.end());
    mention_start[c + 1] = static_cast<uint32_t>(mentions.size());
  }
  g.phrases_in_use_ = static_cast<size_t>(
      std::count_if(phrase_entity.begin(), phrase_entity.end(), [](auto e) { return e != unmet; }));
  // Each entity's name: its most frequent written form.
  std::vector<written_form> forms;
  for (uint32_t p = 0; p < phrase_entity.size(); ++p)
    if (phrase_seen[p] > 0)
      forms.push_back({phrase_entity[p], book->all[p].text, phrase_seen[p]});
  for (uint32_t t = 0; t < term_text.size(); ++t)
    if (term_seen[t] > 0)
      forms.push_back({term_entity[t], term_text[t], term_seen[t]});
  auto names = most_written(std::move(forms), g.entities_.size());
  for (size_t e = 0; e < names.size(); ++e)
    g.entities_[e].name = names[e];
  g.link(mentions, mention_start, opts.max_neighbours);
  // Topics: connected components over edges of weight >= 2.
  std::vector<int> mentions_in(n, 0);  // per chunk, for the topic at hand
  std::vector<uint32_t> touched;
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
    // The chunks most of the members are in.
    touched.clear();
    for (auto e : members)
      for (auto c : g.entities_[e].chunks)
        if (mentions_in[c]++ == 0)
          touched.push_back(c);
    std::vector<std::pair<int, uint32_t>> ranked;
    for (auto c : touched) {
      ranked.emplace_back(-mentions_in[c], c);
      mentions_in[c] = 0;
    }
    std::sort(ranked.begin(), ranked.end());
    for (size_t i = 0; i < ranked.size() && i < 5; ++i)
      t.chunks.push_back(ranked[i].second);
    g.topics_.push_back(std::move(t));
  }
  return g;
}

void entity_graph::link(const std::vector<uint32_t>& mentions,
                        const std::vector<uint32_t>& mention_start, size_t max_neighbours) {
  // Each entity's chunks, ascending.
  auto entity_count = entities_.size();
  auto n = mention_start.size() - 1;
  {
    std::vector<uint32_t> chunk_count(entity_count, 0);
    for (auto e : mentions)
      ++chunk_count[e];
    for (size_t e = 0; e < entity_count; ++e)
      entities_[e].chunks.reserve(chunk_count[e]);
  }
  for (size_t c = 0; c < n; ++c)
    for (auto i = mention_start[c]; i < mention_start[c + 1]; ++i)
      entities_[mentions[i]].chunks.push_back(static_cast<uint32_t>(c));
  // Co-occurrence: for each entity a, the entities b > a in its chunks,
  // with the number of chunks both are in and the first of them (a's
  // chunks ascend: the chunk b is first met in), counted in one array
  // instead of a pair listed per chunk and sorted.
  struct link {
    uint32_t a, b, weight, chunk;
  };
  std::vector<link> links;
  std::vector<uint32_t> together(entity_count, 0), first_chunk(entity_count, no_chunk), met;
  std::vector<uint32_t> neighbour_start(entity_count + 1, 0);
  for (uint32_t a = 0; a < entity_count; ++a) {
    met.clear();
    for (auto c : entities_[a].chunks) {
      auto end = mentions.begin() + mention_start[c + 1];
      for (auto b = std::upper_bound(mentions.begin() + mention_start[c], end, a); b != end; ++b)
        if (together[*b]++ == 0) {
          first_chunk[*b] = c;
          met.push_back(*b);
        }
    }
    for (auto b : met) {
      links.push_back({a, b, together[b], first_chunk[b]});
      together[b] = 0;
      ++neighbour_start[a + 1];
      ++neighbour_start[b + 1];
    }
  }
  relation_count_ = links.size();
  // Each entity's links (counted, then placed), of which it keeps the
  // strongest, ties to the smaller entity, each with its first shared chunk.
  for (size_t e = 0; e < entity_count; ++e)
    neighbour_start[e + 1] += neighbour_start[e];
  struct neighbour {
    uint32_t entity, weight, chunk;
  };
  std::vector<neighbour> all(neighbour_start[entity_count]);
  {
    std::vector<uint32_t> next(neighbour_start.begin(), neighbour_start.end() - 1);
    for (auto& l : links) {
      all[next[l.a]++] = {l.b, l.weight, l.chunk};
      all[next[l.b]++] = {l.a, l.weight, l.chunk};
    }
  }
  links = {};
  for (size_t i = 0; i < entity_count; ++i) {
    auto& e = entities_[i];
    auto from = all.begin() + neighbour_start[i], to = all.begin() + neighbour_start[i + 1];
    auto keep = std::min<size_t>(static_cast<size_t>(to - from), max_neighbours);
    std::partial_sort(from, from + static_cast<std::ptrdiff_t>(keep), to, [](auto& x, auto& y) {
      return x.weight != y.weight ? x.weight > y.weight : x.entity < y.entity;
    });
    e.neighbours.reserve(keep);
    e.shared_chunk.reserve(keep);
    for (auto k = from; k != from + static_cast<std::ptrdiff_t>(keep); ++k) {
      e.neighbours.emplace_back(k->entity, k->weight);
      e.shared_chunk.push_back(k->chunk);
    }
    e.idf = std::log(1.0 + static_cast<double>(n) / static_cast<double>(e.chunks.size()));
  }
}

namespace {
constexpr uint32_t graph_magic = 0x52474731;  // "RGG1"
}

std::string entity_graph::serialize() const {
  binary::writer w;
  w.put(graph_magic);
  w.put<uint64_t>(entities_.size());
  std::vector<uint32_t> ids, weights;
  for (auto& e : entities_) {
    w.put_string(e.key);
    w.put_string(e.name);
    w.put_array(e.chunks);
    ids.clear(), weights.clear();
    for (auto [b, weight] : e.neighbours)
      ids.push_back(b), weights.push_back(weight);
    w.put_array(ids);
    w.put_array(weights);
    w.put_array(e.shared_chunk);
    w.put(e.idf);
    w.put(e.topic);
  }
  w.put<uint64_t>(topics_.size());
  for (auto& t : topics_) {
    w.put_string(t.summary);
    w.put_array(t.entities);
    w.put_array(t.chunks);
  }
  w.put<uint64_t>(relation_count_);
  return w.finish();
}

std::optional<entity_graph> entity_graph::deserialize(std::string_view data, size_t chunk_count) {
  binary::reader r{data};
  uint32_t magic = 0;
  uint64_t count = 0;
  if (!r.get(magic) || magic != graph_magic || !r.get(count))
    return std::nullopt;
  entity_graph g;
  std::vector<uint32_t> ids, weights;
  for (uint64_t i = 0; i < count; ++i) {
    entity e;
    if (!r.get_string(e.key) || !r.get_string(e.name) || !r.get_array(e.chunks) || !r.get_array(ids)
        || !r.get_array(weights) || ids.size() != weights.size() || !r.get_array(e.shared_chunk)
        || e.shared_chunk.size() != ids.size() || !r.get(e.idf) || !r.get(e.topic))
      return std::nullopt;
    for (size_t k = 0; k < ids.size(); ++k)
      e.neighbours.emplace_back(ids[k], weights[k]);
    auto [id, added] = g.enter(e.key);
    if (!added)
      return std::nullopt;
    g.entities_[id] = std::move(e);
  }
  if (!r.get(count))
    return std::nullopt;
  for (uint64_t i = 0; i < count; ++i) {
    topic t;
    if (!r.get_string(t.summary) || !r.get_array(t.entities) || !r.get_array(t.chunks))
      return std::nullopt;
    g.topics_.push_back(std::move(t));
  }
  uint64_t relations = 0;
  if (!r.get(relations) || !r.at_end())
    return std::nullopt;
  g.relation_count_ = relations;
  // Every index in range, so a file of another KB's graph that passed
  // its checksum cannot send a search out of bounds.
  auto n = g.entities_.size();
  auto chunks_in_range = [&](const std::vector<uint32_t>& chunks) {
    return std::all_of(chunks.begin(), chunks.end(), [&](uint32_t c) { return c < chunk_count; });
  };
  for (auto& e : g.entities_) {
    for (auto [b, weight] : e.neighbours)
      if (b >= n)
        return std::nullopt;
    for (auto c : e.shared_chunk)
      if (c >= chunk_count && c != no_chunk)
        return std::nullopt;
    if (!chunks_in_range(e.chunks) || e.topic < -1
        || e.topic >= static_cast<int32_t>(g.topics_.size()))
      return std::nullopt;
  }
  for (auto& t : g.topics_) {
    if (!chunks_in_range(t.chunks))
      return std::nullopt;
    for (auto e : t.entities)
      if (e >= n)
        return std::nullopt;
  }
  return g;
}

std::pair<uint32_t, bool> entity_graph::enter(const std::string& key) {
  auto [it, added] = by_key_.emplace(key, static_cast<uint32_t>(entities_.size()));
  if (added) {
    entity e;
    e.key = key;
    entities_.push_back(std::move(e));
    by_term_[key.substr(0, key.find(' '))].push_back(it->second);
  }
  return {it->second, added};
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
  // Entity -> weight in this search: the seeds and their neighbours, a few
  // dozen, found by a scan.
  std::vector<std::pair<uint32_t, double>> weight;
  auto weight_of = [&](uint32_t e) -> double& {
    for (auto& [x, w] : weight)
      if (x == e)
        return w;
    return weight.emplace_back(e, 0.0).second;
  };
  for (auto e : seeds) {
    auto& w = weight_of(e);
    w = std::max(w, entities_[e].idf);
    r.entity_ids.push_back("e:" + entities_[e].key);
  }
  for (auto e : seeds) {
    auto& ent = entities_[e];
    double strongest = ent.neighbours.empty() ? 1.0 : ent.neighbours.front().second;
    for (size_t i = 0; i < ent.neighbours.size() && i < 5; ++i) {
      auto [nb, w] = ent.neighbours[i];
      auto nw = 0.5 * entities_[nb].idf * (w / strongest);
      auto& known = weight_of(nb);
      if (nw > known) {
        if (known == 0)
          r.entity_ids.push_back("e:" + entities_[nb].key);
        known = nw;
      }
      auto a = std::min(ent.key, entities_[nb].key), b = std::max(ent.key, entities_[nb].key);
      r.relation_ids.push_back("r:" + a + "|" + b);
    }
  }
  // Each chunk's score, the entities' weights added in ascending entity
  // order (each entity's chunks ascend: its last is its largest).
  std::sort(weight.begin(), weight.end());
  size_t rows = 0;
  for (auto& [e, w] : weight)
    if (!entities_[e].chunks.empty())
      rows = std::max<size_t>(rows, entities_[e].chunks.back() + size_t{1});
  auto& scores = sparse_scores::for_thread(rows);
  for (auto& [e, w] : weight)
    for (auto c : entities_[e].chunks)
      scores.add(c, w);
  scores.drain([&](uint32_t c, double s) { r.chunks.emplace_back(c, s); });
  auto best = [](auto& a, auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  auto keep = std::min(r.chunks.size(), k);
  std::partial_sort(r.chunks.begin(), r.chunks.begin() + static_cast<std::ptrdiff_t>(keep),
                    r.chunks.end(), best);
  r.chunks.resize(keep);
  return r;
}

const entity_graph::key_terms& entity_graph::tokenized_keys() const {
  std::call_once(key_terms_->once, [&] {
    auto& k = *key_terms_;
    k.of_entity.reserve(entities_.size());
    for (auto& e : entities_)
      k.of_entity.push_back(tokenize(e.key));
    for (uint32_t t = 0; t < topics_.size(); ++t)
      for (auto e : topics_[t].entities)
        for (auto& term : k.of_entity[e])
          if (auto& topics = k.topics_of[term]; topics.empty() || topics.back() != t)
            topics.push_back(t);  // ascending: topics in order
  });
  return *key_terms_;
}

std::vector<entity_graph::topic_hit> entity_graph::global_search(std::string_view query,
                                                                 size_t k) const {
  auto terms = tokenize(query);
  std::set<std::string> q{terms.begin(), terms.end()};
  auto& keys = tokenized_keys();
  // Only the topics with an entity whose key holds a query term can score;
  // each is scored over its entities in order, as a scan of every topic
  // would.
  std::vector<uint32_t> candidates;
  for (auto& term : q)
    if (auto found = keys.topics_of.find(term); found != keys.topics_of.end())
      candidates.insert(candidates.end(), found->second.begin(), found->second.end());
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<topic_hit> out;
  for (auto t : candidates) {
    double score = 0;
    for (auto e : topics_[t].entities)
      for (auto& term : keys.of_entity[e])
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

namespace {

// FNV-1a over the rows' fields, each field ended by 0xff; a field may be
// fed in pieces, so a row's signature needs no string built for it.
struct row_signature {
  uint64_t h = 14695981039346656037ull;
  void part(std::string_view s) {
    for (unsigned char c : s)
      h = (h ^ c) * 1099511628211ull;
  }
  void end() { h = (h ^ 0xff) * 1099511628211ull; }
  void field(std::string_view s) { part(s), end(); }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

// Digits of n, in a buffer the caller keeps.
std::string_view digits(uint64_t n, char (&buf)[24]) {
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  return {buf, static_cast<size_t>(r.ptr - buf)};
}

}  // namespace

// How the graph becomes rows of the entities and relations tables: every
// entity, in order, then every kept link once, by its (smaller, larger)
// entity pair; entity_graph::rows and rows_since share it, and so does
// the signature, which both compute over the same fields.
struct graph_rows {
  struct link {
    uint64_t first;   // smaller << 32 | larger
    uint32_t second;  // weight
    uint32_t chunk;   // the first chunk both ends are in
    bool operator<(const link& o) const { return first < o.first; }
  };

  const entity_graph& g;
  const std::vector<chunk>& chunks;

  // Each kept link once (both ends may keep it, with the same weight and
  // chunk), ascending: placed by their smaller end (counted, then placed),
  // each end's few sorted, duplicates dropped.
  std::vector<link> links() const {
    auto n = g.entities_.size();
    std::vector<uint32_t> start(n + 1, 0);
    for (uint32_t a = 0; a < n; ++a)
      for (auto [b, w] : g.entities_[a].neighbours)
        ++start[std::min(a, b) + 1];
    for (size_t e = 0; e < n; ++e)
      start[e + 1] += start[e];
    std::vector<link> out(start[n]);
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (uint32_t a = 0; a < n; ++a) {
      auto& e = g.entities_[a];
      for (size_t i = 0; i < e.neighbours.size(); ++i) {
        auto [b, w] = e.neighbours[i];
        out[next[std::min(a, b)]++] = {uint64_t{std::min(a, b)} << 32 | std::max(a, b), w,
                                       e.shared_chunk[i]};
      }
    }
    for (size_t e = 0; e < n; ++e)
      std::sort(out.begin() + start[e], out.begin() + start[e + 1]);
    out.erase(
        std::unique(out.begin(), out.end(), [](auto& x, auto& y) { return x.first == y.first; }),
        out.end());
    return out;
  }

  // The id of the first chunk both ends of `l` occur in ("" when none).
  std::string_view common_chunk(const link& l) const {
    return l.chunk < chunks.size() ? std::string_view{chunks[l.chunk].chunk_id} : "";
  }

  const std::string& key(uint32_t e) const { return g.entities_[e].key; }
  const std::string& summary(uint32_t e) const {
    static const std::string none;
    auto t = g.entities_[e].topic;
    return t >= 0 ? g.topics_[static_cast<size_t>(t)].summary : none;
  }
  static constexpr std::string_view named = "named", term = "term";
  std::string_view kind(uint32_t e) const {
    return g.entities_[e].name != g.entities_[e].key ? named : term;
  }

  void sign_entity(row_signature& sig, uint32_t e) const {
    char buf[24];
    sig.part("e:"), sig.part(key(e)), sig.end();
    sig.field(g.entities_[e].name);
    sig.field(kind(e));
    sig.part("mentioned in "), sig.part(digits(g.entities_[e].chunks.size(), buf));
    sig.part(" chunk(s)");
    if (g.entities_[e].topic >= 0)
      sig.part("; "), sig.part(summary(e));
    sig.end();
  }

  void sign_link(row_signature& sig, const link& l, std::string_view chunk_id) const {
    char buf[24];
    sig.part("r:"), sig.part(key(static_cast<uint32_t>(l.first >> 32))), sig.part("|");
    sig.part(key(static_cast<uint32_t>(l.first))), sig.end();
    sig.field(digits(l.second, buf));
    sig.field(chunk_id);
  }

  graph_entity_row entity_row(uint32_t e) const {
    graph_entity_row r;
    r.id = "e:" + key(e);
    r.name = g.entities_[e].name;
    r.kind = kind(e);
    r.description = "mentioned in " + std::to_string(g.entities_[e].chunks.size()) + " chunk(s)";
    if (g.entities_[e].topic >= 0)
      r.description += "; " + summary(e);
    return r;
  }

  std::string link_id(uint64_t ab) const {
    return "r:" + key(static_cast<uint32_t>(ab >> 32)) + "|" + key(static_cast<uint32_t>(ab));
  }

  graph_relation_row relation_row(const link& l, std::string_view chunk_id) const {
    graph_relation_row r;
    r.id = link_id(l.first);
    r.source = "e:" + key(static_cast<uint32_t>(l.first >> 32));
    r.target = "e:" + key(static_cast<uint32_t>(l.first));
    r.kind = "co_occurs";
    r.weight = l.second;
    r.chunk_id = chunk_id;
    return r;
  }

  // The signature of every row, as rows() computes it.
  std::string signature(const std::vector<link>& all) const {
    row_signature sig;
    for (uint32_t e = 0; e < g.entities_.size(); ++e)
      sign_entity(sig, e);
    for (auto& l : all)
      sign_link(sig, l, common_chunk(l));
    return sig.hex();
  }
};

kb_graph_rows entity_graph::rows(std::string kb, const std::vector<chunk>& chunks) const {
  graph_rows walk{*this, chunks};
  kb_graph_rows out;
  out.kb = std::move(kb);
  row_signature sig;
  for (uint32_t e = 0; e < entities_.size(); ++e) {
    walk.sign_entity(sig, e);
    out.entities.push_back(walk.entity_row(e));
  }
  for (auto& l : walk.links()) {
    auto chunk_id = walk.common_chunk(l);
    walk.sign_link(sig, l, chunk_id);
    out.relations.push_back(walk.relation_row(l, chunk_id));
  }
  out.signature = sig.hex();
  out.entity_count = static_cast<int64_t>(out.entities.size());
  out.relation_count = static_cast<int64_t>(out.relations.size());
  return out;
}

std::string entity_graph::rows_signature(const std::vector<chunk>& chunks) const {
  graph_rows walk{*this, chunks};
  return walk.signature(walk.links());
}

kb_graph_rows entity_graph::rows_since(const entity_graph& before,
                                       const std::vector<chunk>& before_chunks, std::string kb,
                                       const std::vector<chunk>& chunks,
                                       std::string_view before_signature) const {
  graph_rows was{before, before_chunks}, now{*this, chunks};
  kb_graph_rows out;
  out.kb = std::move(kb);
  auto was_links = was.links();
  out.base_signature =
      before_signature.empty() ? was.signature(was_links) : std::string{before_signature};

  // Entities, by key: each of before's is this graph's entity now_of[e],
  // or gone.
  constexpr auto gone = UINT32_MAX;
  std::vector<uint32_t> now_of(before.entities_.size(), gone);
  std::vector<bool> existed(entities_.size(), false);
  for (uint32_t e = 0; e < before.entities_.size(); ++e) {
    auto found = by_key_.find(before.entities_[e].key);
    if (found == by_key_.end()) {
      out.removed_entities.push_back("e:" + was.key(e));
      continue;
    }
    auto n = now_of[e] = found->second;
    existed[n] = true;
    auto& x = before.entities_[e];
    auto& y = entities_[n];
    if (x.name != y.name || x.chunks.size() != y.chunks.size() || was.summary(e) != now.summary(n))
      out.entities.push_back(now.entity_row(n));
  }
  for (uint32_t n = 0; n < entities_.size(); ++n)
    if (!existed[n])
      out.entities.push_back(now.entity_row(n));

  // Links, by id: before's link (a, b) is the row "r:<a>|<b>", the same
  // row as this graph's link between those entities only while they are
  // in the same order here. Both lists sorted by this graph's pairs.
  std::vector<std::pair<uint64_t, uint32_t>> kept;  // (pair here, index in was_links)
  for (uint32_t i = 0; i < was_links.size(); ++i) {
    auto ab = was_links[i].first;
    auto a = now_of[ab >> 32], b = now_of[static_cast<uint32_t>(ab)];
    if (a == gone || b == gone || a > b)
      out.removed_relations.push_back(was.link_id(ab));
    else
      kept.emplace_back(uint64_t{a} << 32 | b, i);
  }
  // Already in order when entities kept their order (an ingest that
  // added documents at the end): sorted only when not.
  if (!std::is_sorted(kept.begin(), kept.end()))
    std::sort(kept.begin(), kept.end());
  row_signature sig;
  for (uint32_t e = 0; e < entities_.size(); ++e)
    now.sign_entity(sig, e);
  size_t k = 0;
  auto now_links = now.links();
  for (auto& l : now_links) {
    auto chunk_id = now.common_chunk(l);
    now.sign_link(sig, l, chunk_id);
    for (; k < kept.size() && kept[k].first < l.first; ++k)
      out.removed_relations.push_back(was.link_id(was_links[kept[k].second].first));
    if (k < kept.size() && kept[k].first == l.first) {
      auto& old = was_links[kept[k++].second];
      if (old.second == l.second && was.common_chunk(old) == chunk_id)
        continue;
    }
    out.relations.push_back(now.relation_row(l, chunk_id));
  }
  for (; k < kept.size(); ++k)
    out.removed_relations.push_back(was.link_id(was_links[kept[k].second].first));
  out.signature = sig.hex();
  out.entity_count = static_cast<int64_t>(entities_.size());
  out.relation_count = static_cast<int64_t>(now_links.size());
  return out;
}

}  // namespace ragtor
