// libFuzzer target: the TOML config loader (ragtor.toml), through the file
// it reads in serve. Any file gives a config or an error naming a key.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "config/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/ragtor-fuzz-config-" + std::to_string(getpid()) + ".toml";
  {
    std::ofstream f{path, std::ios::binary | std::ios::trunc};
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto cfg = ragtor::load_config(path, {});
  (void)cfg;
  return 0;
}
