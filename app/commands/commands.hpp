// ragtor's subcommands. Each returns the process exit code.
#pragma once

#include <cstdint>
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

// `ragtor keys create|list|revoke` (docs/security.md).
struct keys_options {
  common_options common;
  std::string action;  // create | list | revoke
  std::string name;
  std::string tenant;
  std::string user_prefix;
  std::string scopes = "chat";
  std::string kbs;
  double rate = 10;
  int32_t burst = 20;
};

int run_serve(const serve_options& opts);
int run_keys(const keys_options& opts);
int run_ingest(const ingest_options& opts);

}  // namespace ragtor
