#include "actors/request_timeout.hpp"
#include "actors/router/router.hpp"
#include "protocol/log.hpp"
#include "actors/admin/measured.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "llm/router_prompt.hpp"
#include "protocol/errc.hpp"
#include "protocol/json_writer.hpp"
#include "protocol/worker_name.hpp"
#include "retrieval/kb_catalog.hpp"
#include "retrieval/tokenizer.hpp"

namespace ragtor {

namespace {
const log::component lg{"router"};
}  // namespace

namespace {

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Small talk: the whole message is a greeting, thanks or farewell (with
// optional punctuation and a few filler words).
bool is_small_talk(std::string_view message) {
  static const std::set<std::string, std::less<>> phrases = {"hi",
                                                             "hello",
                                                             "hey",
                                                             "hi there",
                                                             "hello there",
                                                             "good morning",
                                                             "good afternoon",
                                                             "good evening",
                                                             "thanks",
                                                             "thank you",
                                                             "thanks a lot",
                                                             "thank you very much",
                                                             "thx",
                                                             "ok",
                                                             "okay",
                                                             "bye",
                                                             "goodbye",
                                                             "see you",
                                                             "how are you",
                                                             "who are you",
                                                             "what can you do",
                                                             "你好",
                                                             "您好",
                                                             "嗨",
                                                             "谢谢",
                                                             "多谢",
                                                             "再见",
                                                             "拜拜",
                                                             "你是谁",
                                                             "早上好",
                                                             "晚上好",
                                                             "你好吗"};
  std::string s;
  for (char c : message) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && (std::ispunct(u) || std::isspace(u))) {
      if (!s.empty() && s.back() != ' ')
        s += ' ';
      continue;
    }
    s += static_cast<char>(u < 0x80 ? std::tolower(u) : u);
  }
  // Strip CJK full-width punctuation commonly ending a greeting.
  for (std::string_view p : {"！", "？", "。", "，", "～"})
    for (auto i = s.find(p); i != std::string::npos; i = s.find(p))
      s.erase(i, p.size());
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  while (!s.empty() && s.front() == ' ')
    s.erase(0, 1);
  return phrases.count(s) > 0;
}

struct router_state {
  static inline const char* name = "router";
  router_settings settings;
  std::shared_ptr<kb_catalog> catalog;
  llm_actor llm;
  uint64_t routed = 0, llm_routed = 0, llm_fallbacks = 0;
  // The catalog's KBs as routing reads them, in the catalog's order, with
  // the snapshot each was made from (refresh_profiles); kb_terms[i] is
  // kbs[i]'s.
  struct known_kb {
    std::weak_ptr<const kb_snapshot> snapshot;
    kb_route_profile profile;
  };
  std::vector<known_kb> kbs;
  std::vector<kb_route_terms> kb_terms;
  uint64_t profiles_built = 0;
};

using self_ptr = measured_pointer<router_actor, router_state>;

}  // namespace

kb_route_terms route_terms(const kb_route_profile& kb) {
  kb_route_terms out;
  out.name = kb.name;
  out.default_agent_type = kb.default_agent_type;
  auto add = [&](std::string_view text, double w) {
    for (auto& t : tokenize(text)) {
      auto& weight = out.weight[t];
      weight = std::max(weight, w);
    }
  };
  for (auto& t : kb.titles)
    add(t, 1);
  add(kb.description, 2);
  for (auto& k : kb.keywords)
    add(k, 3);
  add(kb.name, 3);
  return out;
}

detected_intent detect_intent(std::string_view message, const std::vector<kb_route_profile>& kbs) {
  std::vector<kb_route_terms> terms;
  terms.reserve(kbs.size());
  for (auto& kb : kbs)
    terms.push_back(route_terms(kb));
  return detect_intent(message, terms);
}

detected_intent detect_intent(std::string_view message, const std::vector<kb_route_terms>& kbs) {
  detected_intent d;
  d.method = "heuristic";
  if (is_small_talk(message)) {
    d.kb = "general";
    d.confidence = 0.9;
    d.intent = "chitchat";
    d.reason = "small talk";
    return d;
  }
  auto terms = tokenize(message);
  std::set<std::string> query{terms.begin(), terms.end()};
  if (query.empty() || kbs.empty()) {
    d.intent = "other";
    d.reason = query.empty() ? "no content words" : "no knowledge bases";
    return d;
  }
  std::vector<std::pair<double, const kb_route_terms*>> scores;
  for (auto& kb : kbs) {
    double got = 0;
    for (auto& t : query)
      if (auto i = kb.weight.find(t); i != kb.weight.end())
        got += i->second;
    // Share of the message explained, where a keyword hit counts fully and
    // weaker evidence partly; saturates at 1.
    double score = std::min(1.0, got / (3.0 * std::min<double>(query.size(), 3.0)));
    scores.emplace_back(score, &kb);
  }
  std::sort(scores.begin(), scores.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first > b.first : a.second->name < b.second->name;
  });
  auto [best, kb] = scores.front();
  if (best <= 0) {
    d.intent = "other";
    d.reason = "no knowledge base matches the message";
    return d;
  }
  double second = scores.size() > 1 ? scores[1].first : 0;
  // A close runner-up makes the choice uncertain.
  d.kb = kb->name;
  d.confidence = best * (1.0 - 0.5 * (second / best));
  d.intent = "kb_query";
  d.agent_type = kb->default_agent_type;
  d.reason = "message matches the profile of \"" + kb->name + "\"";
  return d;
}

route_decision decide_route(const chat_request& req, const router_settings& settings,
                            const std::optional<detected_intent>& detected) {
  route_decision rd;
  rd.requested_kb_prefix = req.kb_prefix;
  rd.intent = "qa";
  if (detected) {
    rd.routed_kb_prefix = detected->kb;
    if (!detected->intent.empty())
      rd.intent = detected->intent;
  }
  // apply_override_policy
  bool routed_wins =
      detected && !detected->kb.empty() && detected->confidence >= settings.min_confidence;
  if (routed_wins && detected->kb != req.kb_prefix) {
    rd.kb_prefix = detected->kb;
    rd.method = detected->method;
    rd.confidence = detected->confidence;
    rd.reason = detected->reason;
    if (!req.kb_prefix.empty())
      rd.reason += " (overrides the requested \"" + req.kb_prefix + "\")";
  } else if (!req.kb_prefix.empty()) {
    rd.kb_prefix = req.kb_prefix;
    rd.method = "requested";
    rd.confidence = 1.0;
    rd.reason = "the request named a knowledge base";
  } else if (!settings.default_kb.empty()) {
    rd.kb_prefix = settings.default_kb;
    rd.method = "default";
    rd.confidence = 1.0;
    rd.reason = "router.default_kb is configured";
  } else {
    rd.kb_prefix = "general";
    rd.method = detected ? detected->method : "default";
    rd.confidence = detected ? 1.0 - detected->confidence : 1.0;
    if (!detected)
      rd.reason = "no knowledge base requested and auto-routing is off";
    else if (detected->kb == "general")
      rd.reason = detected->reason;
    else
      rd.reason = detected->reason + "; no knowledge base matched confidently";
  }
  if (detected && (detected->method == "timeout" || detected->method == "fallback")
      && rd.method == "heuristic")
    rd.method = detected->method;
  if (lower_trimmed(rd.kb_prefix) == "general") {
    rd.kb_prefix = "general";
    rd.intent = rd.intent == "chitchat" ? "chitchat" : "general";
  }
  if (rd.routed_kb_prefix.empty())
    rd.routed_kb_prefix = rd.kb_prefix;
  // worker_select
  rd.agent_type = req.agent_type;
  if (rd.agent_type.empty() && detected && routed_wins && is_agent_type(detected->agent_type))
    rd.agent_type = detected->agent_type;
  if (rd.agent_type.empty())
    rd.agent_type = settings.default_agent_type;
  rd.worker_name = format_worker_name(rd.kb_prefix, rd.agent_type);
  if (rd.worker_name.empty())
    rd.agent_type.clear();
  return rd;
}

namespace {

kb_route_profile route_profile(const std::string& name, const kb_snapshot& snap) {
  kb_route_profile p;
  p.name = name;
  p.description = snap.settings.description;
  p.keywords = snap.settings.keywords;
  p.default_agent_type = snap.settings.default_agent_type;
  std::set<std::string> seen;
  for (auto& c : snap.chunks) {
    if (p.titles.size() >= 50)
      break;
    if (!c.title.empty() && seen.insert(c.title).second)
      p.titles.push_back(c.title);
  }
  return p;
}

// The router's profiles brought up to the catalog: a KB's profile and
// terms are made again only when its snapshot is not the one they were
// made from (an ingest or a settings change puts a new one).
void refresh_profiles(router_state& st) {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<const kb_snapshot>> now;
  for (auto& name : st.catalog->names())
    if (auto snap = st.catalog->get(name)) {
      names.push_back(name);
      now.push_back(std::move(snap));
    }
  auto same = [&](size_t i, size_t j) { return st.kbs[j].snapshot.lock() == now[i]; };
  bool unchanged = now.size() == st.kbs.size();
  for (size_t i = 0; unchanged && i < now.size(); ++i)
    unchanged = same(i, i);
  if (unchanged)
    return;
  std::vector<router_state::known_kb> kbs;
  std::vector<kb_route_terms> terms;
  for (size_t i = 0; i < now.size(); ++i) {
    size_t j = 0;
    while (j < st.kbs.size() && !same(i, j))
      ++j;
    if (j < st.kbs.size()) {
      kbs.push_back(std::move(st.kbs[j]));
      terms.push_back(std::move(st.kb_terms[j]));
      continue;
    }
    kbs.push_back({now[i], route_profile(names[i], *now[i])});
    terms.push_back(route_terms(kbs.back().profile));
    ++st.profiles_built;
  }
  st.kbs = std::move(kbs);
  st.kb_terms = std::move(terms);
}

}  // namespace

std::vector<kb_route_profile> route_profiles(const kb_catalog& catalog) {
  std::vector<kb_route_profile> out;
  for (auto& name : catalog.names())
    if (auto snap = catalog.get(name))
      out.push_back(route_profile(name, *snap));
  return out;
}

// Attaches the chosen KB's settings: the stream runs that KB's pipeline.
// Attaches the chosen KB's settings. A KB named by the request (or
// router.default_kb) is searched with its own default_agent_type unless
// the request names an agent type.
route_decision with_kb(route_decision rd, const chat_request& req, const kb_catalog* catalog) {
  if (!catalog || rd.worker_name.empty())
    return rd;
  auto parsed = parse_worker_name(rd.worker_name);
  if (!parsed)
    return rd;
  auto snap = catalog->get(kb_of(*parsed));
  if (!snap)
    return rd;
  rd.kb = snap->settings;
  auto& own = snap->settings.default_agent_type;
  if (req.agent_type.empty() && (rd.method == "requested" || rd.method == "default")
      && is_agent_type(own) && own != rd.agent_type) {
    rd.agent_type = own;
    rd.worker_name = format_worker_name(rd.kb_prefix, own);
  }
  return rd;
}

router_actor spawn_router(caf::actor_system& sys, router_settings settings,
                          std::shared_ptr<kb_catalog> catalog, llm_actor llm) {
  return sys.spawn([settings, catalog, llm](self_ptr self) -> router_actor::behavior_type {
    self->state.settings = settings;
    self->state.catalog = catalog;
    self->state.llm = llm;
    self->track("router", "router");
    return {
        [=](atom::route, const chat_request& req) -> caf::result<route_decision> {
          auto& st = self->state;
          ++st.routed;
          if (st.settings.mode == "off" || !st.catalog)
            return with_kb(decide_route(req, st.settings), req, st.catalog.get());
          refresh_profiles(st);
          auto heuristic = detect_intent(req.message, st.kb_terms);
          if (st.settings.mode != "llm" || !st.llm || heuristic.intent == "chitchat")
            return with_kb(decide_route(req, st.settings, heuristic), req, st.catalog.get());
          std::vector<llm::kb_profile> kbs;
          for (auto& k : st.kbs)
            kbs.push_back({k.profile.name, k.profile.description, k.profile.keywords});
          completion_request cr;
          for (auto& m : llm::build_router_messages(req.message, kbs))
            cr.messages.push_back({m.role, m.content});
          cr.max_tokens = 200;
          cr.purpose = "router";
          auto rp = self->make_response_promise<route_decision>();
          tidy_request(self, st.llm, st.settings.llm_timeout, atom::complete_v, std::move(cr))
              .then(
                  [=](completion_result& res) mutable {
                    auto& st = self->state;
                    auto parsed = llm::parse_router_reply(res.text, kbs);
                    if (!parsed.ok) {
                      ++st.llm_fallbacks;
                      lg->warn("router: unusable model reply ({}); using the heuristic",
                                   parsed.error);
                      auto d = heuristic;
                      d.method = "fallback";
                      d.reason = "model reply unusable (" + parsed.error + "); " + d.reason;
                      rp.deliver(with_kb(decide_route(req, st.settings, d), req, st.catalog.get()));
                      return;
                    }
                    ++st.llm_routed;
                    detected_intent d;
                    d.kb = parsed.kb_prefix;
                    d.confidence = parsed.confidence;
                    d.method = "llm";
                    d.reason = parsed.reason;
                    d.intent = parsed.intent;
                    d.agent_type = parsed.agent_type;
                    rp.deliver(with_kb(decide_route(req, st.settings, d), req, st.catalog.get()));
                  },
                  [=](caf::error& err) mutable {
                    auto& st = self->state;
                    ++st.llm_fallbacks;
                    auto d = heuristic;
                    d.method = code_of(err) == errc::timeout || err == caf::sec::request_timeout
                                   ? "timeout"
                                   : "fallback";
                    d.reason = "model unavailable (" + error_message(err) + "); " + d.reason;
                    rp.deliver(with_kb(decide_route(req, st.settings, d), req, st.catalog.get()));
                  });
          return rp;
        },
        [=](atom::status) -> std::string {
          auto& st = self->state;
          json_writer w;
          self->status_head(w);
          w.field("mode", st.settings.mode)
              .field("routed", st.routed)
              .field("llm_routed", st.llm_routed)
              .field("llm_fallbacks", st.llm_fallbacks)
              .field("profiles_built", st.profiles_built)
              .field("default_kb", st.settings.default_kb)
              .end_object();
          return w.take();
        },
    };
  });
}

}  // namespace ragtor
