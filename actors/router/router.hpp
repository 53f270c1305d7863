// The router actor: decides which KB (if any) and which retrieval agent a
// turn uses (DESIGN §4.2): intent_detect -> apply_override_policy ->
// worker_select. The decision logic is plain functions so it is
// unit-testable without actors.
//
// router.mode:
//   "off"        the requested KB (or router.default_kb, else general);
//   "heuristic"  also matches the message against every KB's profile
//                (name, description, keywords, document titles) and
//                detects small talk;
//   "llm"        asks the configured model (JSON intent: kb_prefix,
//                confidence, reason, intent, agent_type); on a timeout or
//                an unusable reply it falls back to the heuristic with
//                method "timeout" / "fallback".
// A routed KB overrides a requested one only at confidence >=
// router.min_confidence.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor {

class kb_catalog;

struct router_settings {
  std::string default_kb;  // "" = general when the request names no KB
  std::string default_agent_type = "hybrid_agent";
  double min_confidence = 0.75;
  std::string mode = "off";  // off | heuristic | llm
  std::chrono::milliseconds llm_timeout{5000};
};

// What the router knows about a KB.
struct kb_route_profile {
  std::string name;
  std::string description;
  std::vector<std::string> keywords;
  std::vector<std::string> titles;  // document titles (a sample)
  std::string default_agent_type;
};

// A KB chosen from the message, before the override policy.
struct detected_intent {
  std::string kb;  // "" = none found; "general" = small talk
  double confidence = 0;
  std::string method;  // heuristic | llm | timeout | fallback
  std::string reason;
  std::string intent;      // kb_query | chitchat | other
  std::string agent_type;  // suggested by the model, may be ""
};

// Heuristic intent detection: small talk (greetings, thanks, farewells in
// English and Chinese) -> general; otherwise each KB is scored by the
// share of the message's content terms found in its profile (keywords
// weigh most), and the best one wins with a confidence that falls when a
// second KB scores almost as well.
detected_intent detect_intent(std::string_view message, const std::vector<kb_route_profile>& kbs);

// A KB's profile as the heuristic scores it: each term's weight (keywords
// and the name 3, the description 2, titles 1). The router actor works it
// out once per KB snapshot, not on every turn: tokenising a KB's 50 titles
// and description cost ~70 µs per KB per turn, in the one actor every
// turn passes.
struct kb_route_terms {
  std::string name;
  std::string default_agent_type;
  std::unordered_map<std::string, double> weight;
};
kb_route_terms route_terms(const kb_route_profile& kb);

// detect_intent over profiles whose terms are worked out already.
detected_intent detect_intent(std::string_view message, const std::vector<kb_route_terms>& kbs);

// apply_override_policy + worker_select. `detected` is absent when
// routing is off.
route_decision decide_route(const chat_request& req, const router_settings& settings,
                            const std::optional<detected_intent>& detected = std::nullopt);

// Profiles of the catalog's KBs (titles: up to 50 per KB).
std::vector<kb_route_profile> route_profiles(const kb_catalog& catalog);

// `catalog` and `llm` may be null / invalid when the mode does not need them.
router_actor spawn_router(caf::actor_system& sys, router_settings settings,
                          std::shared_ptr<kb_catalog> catalog = nullptr, llm_actor llm = {});

}  // namespace ragtor
