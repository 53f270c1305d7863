// What routing a turn costs in "heuristic" mode (and in "llm" mode, whose
// fallback and prompt use the same profiles) as the catalog grows: K
// knowledge bases of 50 documents each (the router reads up to 50 titles
// per KB), routed through the router actor one turn after another, as a
// stream asks it. Beside it, what the router did per turn before it kept
// each KB's terms between turns: the profiles read from the catalog and
// every title, description and keyword tokenised again
// (detect_intent over route_profiles). Prints p50/p99 per route (the round
// trip from here, and the router's own handling of its last 256 messages
// from its status) and the routes per second, one after another. Never
// asserts.
//
//   build/bench/bench_router [--kbs 1,3,10] [--turns 2000]
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/router/router.hpp"
#include "bench/bench_util.hpp"
#include "protocol/json_document.hpp"
#include "protocol/type_ids.hpp"
#include "retrieval/kb_catalog.hpp"

using namespace ragtor;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

const char* words[] = {"battery",  "sensor",   "firmware", "bluetooth", "pairing",  "warranty",
                       "harbour",  "schooner", "cargo",    "lighthouse", "ferry",   "timetable",
                       "tea",      "kettle",   "brewing",  "insurance", "claims",   "travel",
                       "lock",     "door",     "reset",    "install",   "upgrade",  "network",
                       "invoice",  "refund",   "shipping", "returns",   "account",  "password"};

// KB k: 50 documents whose titles mix the vocabulary (each KB leaning on
// its own part of it), a description and keywords.
std::shared_ptr<const kb_snapshot> make_kb(size_t k) {
  kb_settings s;
  s.name = "kb" + std::to_string(k);
  s.description = "Guides and answers about " + std::string{words[k % std::size(words)]} + " and "
                  + words[(k + 7) % std::size(words)] + " for customers and support staff.";
  for (size_t i = 0; i < 5; ++i)
    s.keywords.push_back(words[(k * 3 + i) % std::size(words)]);
  std::vector<document> docs;
  for (size_t d = 0; d < 50; ++d) {
    document doc;
    doc.id = "d" + std::to_string(d);
    doc.title = "Chapter " + std::to_string(d) + ": " + words[(k + d) % std::size(words)] + " and "
                + words[(k * 5 + d * 3) % std::size(words)] + " explained step by step";
    doc.text = doc.title + ". A short body for the chunker.";
    docs.push_back(std::move(doc));
  }
  return kb_catalog::build_snapshot(s, docs, {});
}

std::vector<size_t> parse_list(const std::string& s) {
  std::vector<size_t> out;
  std::stringstream in{s};
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stoul(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> kb_counts{1, 3, 10};
  int turns = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--kbs")
      kb_counts = parse_list(argv[i + 1]);
    else if (a == "--turns")
      turns = std::stoi(argv[i + 1]);
  }
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  const char* messages[] = {"How long does the battery of the door lock last?",
                            "Which ferry timetable applies in winter?",
                            "Can I get a refund for a return without an invoice?",
                            "What temperature should the kettle be for green tea?"};
  std::printf("| KBs | round trip to the router actor p50 µs | p99 µs | routes/s | the router's "
              "own handling p50 µs | p99 µs | per turn before (profiles and terms made again) "
              "p50 µs | p99 µs |\n|---|---|---|---|---|---|---|---|\n");
  for (auto kbs : kb_counts) {
    auto catalog = std::make_shared<kb_catalog>();
    for (size_t k = 0; k < kbs; ++k)
      catalog->put(make_kb(k));
    router_settings rs;
    rs.mode = "heuristic";
    auto router = spawn_router(sys, rs, catalog);
    std::vector<double> actor_us, before_us;
    bool failed = false;
    auto t_all = steady::now();
    for (int t = 0; t < turns && !failed; ++t) {
      chat_request req;
      req.message = messages[t % std::size(messages)];
      auto t0 = steady::now();
      self->request(router, 10s, atom::route_v, req)
          .receive([](route_decision&) {},
                   [&](caf::error& e) {
                     std::fprintf(stderr, "error: %s\n", sys.render(e).c_str());
                     failed = true;
                   });
      actor_us.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
    }
    auto seconds = std::chrono::duration<double>(steady::now() - t_all).count();
    // The router's own time per message (its status: the last 256 routes).
    double own_p50 = -1, own_p99 = -1;
    self->request(router, 10s, atom::status_v)
        .receive(
            [&](std::string& status) {
              json_document doc{status};
              double p50 = 0, p99 = 0;
              if (!doc.root()["handler_ms"]["p50"].get(p50)
                  && !doc.root()["handler_ms"]["p99"].get(p99)) {
                own_p50 = p50 * 1000;
                own_p99 = p99 * 1000;
              }
            },
            [&](caf::error&) {});
    for (int t = 0; t < std::min(turns, 500); ++t) {
      auto t0 = steady::now();
      auto d = detect_intent(messages[t % std::size(messages)], route_profiles(*catalog));
      before_us.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
      if (d.method.empty())
        failed = true;
    }
    std::printf("| %zu | %.1f | %.1f | %.0f | %.1f | %.1f | %.1f | %.1f |\n", kbs,
                bench::percentile(actor_us, 0.5), bench::percentile(actor_us, 0.99),
                turns / seconds, own_p50, own_p99, bench::percentile(before_us, 0.5),
                bench::percentile(before_us, 0.99));
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    if (failed)
      return 1;
  }
  return 0;
}
