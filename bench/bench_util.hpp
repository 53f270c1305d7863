// Small helpers the benches share: percentiles, resident memory, and the
// TSV files of ../shared/data.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "protocol/json_writer.hpp"

namespace ragtor::bench {

// The p-quantile (0..1) of `v` (nearest rank); 0 when empty.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Resident set size of this process, in bytes.
inline size_t rss_bytes() {
  std::ifstream in{"/proc/self/statm"};
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Rows of a tab-separated file (exits with a message when unreadable).
inline std::vector<std::vector<std::string>> read_tsv(const std::string& path, bool header) {
  std::ifstream in{path};
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<std::vector<std::string>> rows;
  std::string line;
  if (header)
    std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss{line};
    std::string col;
    while (std::getline(ss, col, '\t'))
      cols.push_back(col);
    if (!cols.empty())
      rows.push_back(std::move(cols));
  }
  return rows;
}

// "1,4,16" -> {1, 4, 16} (client or stream counts given on the command line).
inline std::vector<size_t> parse_sizes(const std::string& list) {
  std::vector<size_t> out;
  std::stringstream ss{list};
  std::string x;
  while (std::getline(ss, x, ','))
    out.push_back(std::stoul(x));
  return out;
}

// SciFact's corpus (`data`/scifact/corpus.tsv: id, title, text) as a JSONL
// file `ragtor ingest` reads, at most `max_docs` documents; how many.
inline size_t write_scifact_corpus(const std::string& data, const std::string& file,
                                   size_t max_docs) {
  std::ofstream out{file};
  size_t n = 0;
  for (auto& row : read_tsv(data + "/scifact/corpus.tsv", false)) {
    if (row.size() < 3 || n >= max_docs)
      continue;
    json_writer w;
    w.begin_object().field("id", row[0]).field("title", row[1]).field("text", row[2]).end_object();
    out << w.take() << "\n";
    ++n;
  }
  return n;
}

}  // namespace ragtor::bench
