// ragtor's subcommands. Each returns the process exit code.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ragtor {

struct common_options {
  std::string config_file;  // "" = ./config/ragtor.toml if present, else defaults
  std::string data_dir;     // "" = from config
};

struct serve_options {
  common_options common;
  std::string listen;  // "" = from config
};

struct ingest_options {
  common_options common;
  std::string kb;
  std::vector<std::filesystem::path> paths;
};

int run_serve(const serve_options& opts);
int run_ingest(const ingest_options& opts);

}  // namespace ragtor
