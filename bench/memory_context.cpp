// Conversation memory cost (DESIGN §8, seed 002 phase 1): prompt tokens per
// turn of a scripted 50-turn conversation with summary + window versus the
// whole history, and the time spent building a turn's context.
//
// The conversation is real text: the user asks about SciFact claims, the
// assistant answers with the first sentences of a relevant abstract. Each
// turn runs through the real parts — the store actor (SQLite, fsync),
// the summarizer actor (extractive: no model weights on these machines;
// a model's summary is capped by summary.max_tokens, 400 by default) and
// the prompt builder — exactly as a turn does: load the window and the
// summary, build the prompt; after the answer is stored, the summarizer
// (awaited here so every turn sees a deterministic state). Tokens are
// ragtor's approximate count (protocol/token_count.hpp). Numbers only.
//
//   build/bench/bench_memory_context [--data DIR] [--turns N] [--window N]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/llm/extractive_llm.hpp"
#include "actors/memory/summarizer.hpp"
#include "actors/store/store_actor.hpp"
#include "bench/bench_util.hpp"
#include "llm/prompt_builder.hpp"
#include "memory/long_term.hpp"
#include "persistence/store_backend.hpp"
#include "protocol/type_ids.hpp"
#include "retrieval/tokenizer.hpp"

using namespace ragtor;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

size_t prompt_tokens(const llm::built_prompt& p) {
  return p.prompt_tokens;
}

// (question, answer) pairs from SciFact: a claim and the first three
// sentences of an abstract judged relevant to it.
std::vector<std::pair<std::string, std::string>> script(const std::string& dir, size_t turns) {
  std::map<std::string, std::string> abstracts;
  for (auto& row : bench::read_tsv(dir + "/corpus.tsv", false))
    if (row.size() >= 3)
      abstracts[row[0]] = row[2];
  std::map<std::string, std::string> relevant;
  for (auto& row : bench::read_tsv(dir + "/qrels_test.tsv", true))
    if (row.size() >= 2 && !relevant.contains(row[0]))
      relevant[row[0]] = row[1];
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& row : bench::read_tsv(dir + "/queries_test.tsv", false)) {
    if (out.size() == turns)
      break;
    auto doc = relevant.find(row[0]);
    if (row.size() < 2 || doc == relevant.end() || !abstracts.contains(doc->second))
      continue;
    std::string answer;
    auto sentences = split_sentences(abstracts[doc->second]);
    for (size_t i = 0; i < sentences.size() && i < 3; ++i)
      answer += (i ? " " : "") + std::string{sentences[i]};
    out.emplace_back("What does the evidence say about this claim: " + row[1], answer);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = std::string{RAGTOR_SOURCE_DIR} + "/../shared/data";
  size_t turns = 50;
  int window = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--data")
      data = argv[i + 1];
    else if (a == "--turns")
      turns = std::stoul(argv[i + 1]);
    else if (a == "--window")
      window = std::stoi(argv[i + 1]);
  }
  auto convo = script(data + "/scifact", turns);
  auto dir = std::filesystem::temp_directory_path() / ("ragtor-bench-memory-" + new_id());
  std::filesystem::create_directories(dir);

  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  store_options so;
  so.sqlite_path = dir / "bench.db";
  auto store = *spawn_store(sys, so);
  auto llm = spawn_extractive_llm(sys, {});
  summarizer_settings ss;
  ss.policy.window = window;
  auto summarizer = spawn_summarizer(sys, store, llm, ss);
  auto fail = [&](caf::error& e) {
    std::fprintf(stderr, "error: %s\n", sys.render(e).c_str());
    std::exit(1);
  };

  std::vector<stored_message> all;  // the whole history, for the baseline
  std::vector<double> build_ms, summarize_ms;
  size_t total_full = 0, total_window = 0, summaries = 0;
  std::printf("%-5s %12s %16s %8s %14s\n", "turn", "full_tokens", "summary+window", "saving",
              "context_ms");
  for (size_t t = 0; t < convo.size(); ++t) {
    auto& [question, answer] = convo[t];
    turn_opened opened;
    self->request(store, 10s, atom::begin_turn_v, std::string{"ann"}, std::string{"bench"},
                  question, "r" + std::to_string(t))
        .receive([&](turn_opened& o) { opened = o; }, fail);

    // The turn's context, as the stream actor builds it.
    auto t0 = steady::now();
    std::vector<stored_message> recent;
    self->request(store, 10s, atom::history_v, opened.conversation_id, int32_t{window + 1})
        .receive([&](std::vector<stored_message>& m) { recent = std::move(m); }, fail);
    std::erase_if(recent, [&](auto& m) { return m.message_id == opened.message_id; });
    while (recent.size() > static_cast<size_t>(window))
      recent.erase(recent.begin());
    summary_record sum;
    self->request(store, 10s, atom::summary_v, opened.conversation_id, std::string{})
        .receive([&](summary_record& s) { sum = std::move(s); }, fail);
    llm::prompt_inputs in;
    in.window = recent;
    in.summary = sum.summary;
    in.question = question;
    in.budget_tokens = 1'000'000;  // measure, do not trim
    auto with_summary = llm::build_prompt(in);
    build_ms.push_back(ms_since(t0));

    llm::prompt_inputs full;
    full.window = all;
    full.question = question;
    full.budget_tokens = 1'000'000;
    auto baseline = llm::build_prompt(full);

    auto a = prompt_tokens(baseline), b = prompt_tokens(with_summary);
    total_full += a;
    total_window += b;
    if ((t + 1) % 5 == 0 || t == 0)
      std::printf("%-5zu %12zu %16zu %7.1f%% %14.3f\n", t + 1, a, b,
                  100.0 * (1.0 - static_cast<double>(b) / static_cast<double>(a)), build_ms.back());

    stored_message reply;
    reply.conversation_id = opened.conversation_id;
    reply.role = "assistant";
    reply.content = answer;
    self->request(store, 10s, atom::finish_turn_v, reply).receive([](std::string&) {}, fail);
    stored_message user_msg;
    user_msg.role = "user";
    user_msg.content = question;
    all.push_back(user_msg);
    all.push_back(reply);

    auto t1 = steady::now();
    self->request(summarizer, 30s, atom::summarize_v, opened.conversation_id)
        .receive(
            [&](std::string& outcome) {
              if (outcome == "written") {
                ++summaries;
                summarize_ms.push_back(ms_since(t1));
              }
            },
            fail);
  }
  std::printf(
      "\n%zu turns, window %d: prompt tokens summed over all turns: full history %zu, "
      "summary+window %zu (%.1f%% fewer)\n",
      convo.size(), window, total_full, total_window,
      100.0 * (1.0 - static_cast<double>(total_window) / static_cast<double>(total_full)));
  std::printf(
      "context building per turn (window + summary from the store, prompt): p50 %.3f ms, "
      "p99 %.3f ms\n",
      bench::percentile(build_ms, 0.5), bench::percentile(build_ms, 0.99));
  std::printf(
      "summaries written: %zu (extractive), p50 %.3f ms, p99 %.3f ms per run "
      "(background, off the answer path)\n",
      summaries, bench::percentile(summarize_ms, 0.5), bench::percentile(summarize_ms, 0.99));
  // What finding stated facts in a user message costs (every turn's
  // message on the stream's thread, and every message a summary covers):
  // the conversation's messages above, and statements of the kinds the
  // rules look for.
  std::vector<std::string> statements{
      "I really love green tea. My name is Ann and I work as a nurse in Bergen. Please answer "
      "briefly.",
      "I'm allergic to peanuts; I don't like bitter coffee, and I can't eat gluten either.",
      "The lighthouse at Port Quellin was built in 1852 and the keepers logged every ship that "
      "passed; tell me about the keepers and their logs, and the schooner Marigold's cargo."};
  auto time_extraction = [](const std::vector<std::string>& messages) {
    std::vector<double> us;
    size_t found = 0;
    for (int pass = 0; pass < 200; ++pass)
      for (auto& m : messages) {
        auto t0 = steady::now();
        found += extract_memories(m).size();
        us.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
      }
    return std::pair{bench::percentile(us, 0.5), found};
  };
  std::vector<std::string> asked;
  for (auto& [question, answer] : convo)
    asked.push_back(question);
  auto [asked_us, asked_found] = time_extraction(asked);
  auto [stated_us, stated_found] = time_extraction(statements);
  std::printf("stated facts found in a message: p50 %.1f µs over the conversation's %zu "
              "messages (%zu facts), %.1f µs over %zu statements (%zu facts)\n",
              asked_us, asked.size(), asked_found / 200, stated_us, statements.size(),
              stated_found / 200);
  caf::anon_send_exit(summarizer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(llm, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(dir);
  return 0;
}
