#include "persistence/store_backend.hpp"

#include <chrono>
#include <random>

namespace ragtor {

std::string new_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  std::string id;
  id.reserve(32);
  for (int i = 0; i < 2; ++i) {
    auto x = rng();
    for (int j = 0; j < 16; ++j, x >>= 4)
      id += hex[x & 0xf];
  }
  return id;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ragtor
