// Milliseconds elapsed on the steady clock: what traces, logs and stage
// timings report.
#pragma once

#include <chrono>

namespace ragtor {

inline double ms_since(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

}  // namespace ragtor
