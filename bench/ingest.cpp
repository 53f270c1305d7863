// One-document ingests into a KB of SciFact's size (5,183 abstracts, 12,430
// chunks) over HTTP, as a client adds documents to a live server: how long
// each takes to be answered, and where the KB admin spent it (the stages it
// logs). Three rows, each on a fresh server over a copy of the same data
// dir: new documents spaced by a pause (each alone); new documents sent
// back to back (each when the one before was answered, so it meets
// whatever the one before left running); and, paced, documents that
// replace one of the KB's (the documents file is rewritten, BM25 laid out
// again).
//
//   bench_ingest [--ragtor BIN] [--ingests N] [--pause-ms MS]
//
// The first ingest after a start is shown apart: it has no graph before
// to take named phrases from. Prints numbers; asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_http.hpp"
#include "bench/bench_proc.hpp"
#include "bench/bench_util.hpp"
#include "protocol/json_writer.hpp"

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

namespace {

// The stages of the KB admin's builds, in order, from its log: the line
// `... reused (580 ms: documents file 56, chunks 32, ..., graph 416; 1 ingest)`,
// then `... changed rows in 125 ms` and `... index files written in 240 ms`.
std::vector<std::map<std::string, double>> stages_in(const fs::path& log) {
  std::vector<std::map<std::string, double>> out;
  std::ifstream in{log};
  std::string line;
  while (std::getline(in, line)) {
    if (auto at = line.find(" reused ("); at != std::string::npos) {
      auto& s = out.emplace_back();
      std::string body = line.substr(at + 9, line.find(';', at) - at - 9);
      s["build"] = std::atof(body.c_str());
      std::stringstream parts{body.substr(body.find(": ") + 2)};
      std::string part;
      while (std::getline(parts, part, ',')) {
        auto trimmed = part.substr(part.find_first_not_of(' '));
        auto space = trimmed.rfind(' ');
        s[trimmed.substr(0, space)] = std::atof(trimmed.c_str() + space + 1);
      }
    } else if (auto rows = line.find("changed rows in ");
               rows != std::string::npos && !out.empty()) {
      out.back()["changed rows"] = std::atof(line.c_str() + rows + 16);
    } else if (auto files = line.find("index files written in ");
               files != std::string::npos && !out.empty()) {
      out.back()["index files (after)"] = std::atof(line.c_str() + files + 23);
    }
  }
  return out;
}

std::string range(std::vector<double> v) {
  if (v.empty())
    return "-";
  std::sort(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f (%.0f-%.0f)", ragtor::bench::percentile(v, 0.5), v.front(),
                v.back());
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string ragtor_bin;
  int ingests = 6, pause_ms = 1500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--ragtor")
      ragtor_bin = v;
    else if (a == "--ingests")
      ingests = std::max(2, std::stoi(v));
    else if (a == "--pause-ms")
      pause_ms = std::stoi(v);
    else {
      std::fprintf(stderr, "usage: bench_ingest [--ragtor BIN] [--ingests N] [--pause-ms MS]\n");
      return 2;
    }
  }
  auto bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path();
  if (ragtor_bin.empty())
    ragtor_bin = (bin_dir / "ragtor").string();
  auto scratch = fs::temp_directory_path() / ("ragtor-ingest-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  auto corpus = scratch / "scifact.jsonl";
  auto docs = ragtor::bench::write_scifact_corpus(
      std::string{RAGTOR_SOURCE_DIR} + "/../shared/data", corpus.string(), SIZE_MAX);
  auto prepared = scratch / "prepared";
  auto cmd = "'" + ragtor_bin + "' ingest --kb sci --data-dir '" + prepared.string() + "' '"
             + corpus.string() + "' > /dev/null";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "ingest failed\n");
    fs::remove_all(scratch);
    return 1;
  }
  std::printf("one-document ingests into SciFact (%zu documents) over HTTP; ms, median (range)\n",
              docs);
  std::printf(
      "| row | ingests | answered, first after start | answered, later | build | "
      "documents file | chunks | bm25 | vectors | graph | changed rows | index files "
      "(after the answer) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto corpus_rows = ragtor::bench::read_tsv(
      std::string{RAGTOR_SOURCE_DIR} + "/../shared/data/scifact/corpus.tsv", false);
  enum row_kind { paced, back_to_back_row, replacing };
  for (auto kind : {paced, back_to_back_row, replacing}) {
    bool back_to_back = kind == back_to_back_row;
    const char* name = kind == paced ? "paced" : back_to_back ? "back to back" : "replacing, paced";
    auto data = scratch / ("data-" + std::to_string(kind));
    fs::copy(prepared, data, fs::copy_options::recursive);
    auto log = scratch / ("log-" + std::to_string(kind));
    auto server =
        spawn({ragtor_bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data.string()},
              "ragtor listening on http://", {"RAGTOR_LOG__LEVEL=debug"}, log);
    std::vector<double> answered;
    for (int i = 0; i < ingests; ++i) {
      if (!back_to_back)
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      ragtor::json_writer w;
      auto id = kind == replacing && static_cast<size_t>(i) < corpus_rows.size()
                    ? corpus_rows[static_cast<size_t>(i) * 97 % corpus_rows.size()][0]
                    : "bench-" + std::to_string(i);
      w.begin_object().key("documents").begin_array().begin_object();
      w.field("id", id).field("title", "A new finding " + std::to_string(i));
      w.field("text", "Zorblax protein " + std::to_string(i)
                          + " regulates the Quellin pathway in mice, a study of 40 animals found.");
      w.end_object().end_array().end_object();
      auto t0 = steady::now();
      auto r =
          call(server.port, boost::beast::http::verb::post, "/api/v1/kbs/sci/documents", w.take());
      answered.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
      if (r.status != 200)
        std::fprintf(stderr, "ingest %d: HTTP %u %s\n", i, r.status, r.body.c_str());
    }
    // The last ingest's index files are written after its answer: a
    // server told to stop writes them before it exits.
    stop(server);
    auto stages = stages_in(log);
    auto later = [&](const std::string& stage) {
      std::vector<double> v;
      for (size_t i = 1; i < stages.size(); ++i)
        if (auto s = stages[i].find(stage); s != stages[i].end())
          v.push_back(s->second);
      return range(v);
    };
    std::printf("| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, ingests,
                answered.front(), range({answered.begin() + 1, answered.end()}).c_str(),
                later("build").c_str(), later("documents file").c_str(), later("chunks").c_str(),
                later("bm25").c_str(), later("vectors").c_str(), later("graph").c_str(),
                later("changed rows").c_str(), later("index files (after)").c_str());
    std::fflush(stdout);
  }
  fs::remove_all(scratch);
  return 0;
}
