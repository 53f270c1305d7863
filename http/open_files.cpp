#include "http/open_files.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

namespace ragtor::http {

namespace {

// The most any process may be given (fs.nr_open); the kernel's default
// when it cannot be read.
uint64_t kernel_cap() {
  uint64_t cap = 1u << 20;
  std::ifstream{"/proc/sys/fs/nr_open"} >> cap;
  return cap;
}

}  // namespace

open_file_limits raise_open_file_limit(uint64_t want) {
  open_file_limits out;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return out;
  out.soft_before = out.soft = lim.rlim_cur;
  out.hard_before = out.hard = lim.rlim_max;
  if (lim.rlim_max != RLIM_INFINITY && want > lim.rlim_max) {
    // Only a privileged process may raise the hard limit; otherwise this
    // fails and the hard limit stays.
    auto to = std::min<uint64_t>(want, kernel_cap());
    rlimit raised{static_cast<rlim_t>(to), static_cast<rlim_t>(to)};
    if (to > lim.rlim_max && setrlimit(RLIMIT_NOFILE, &raised) == 0)
      lim = raised;
  }
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit soft{lim.rlim_max, lim.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &soft) == 0)
      lim = soft;
  }
  out.soft = lim.rlim_cur;
  out.hard = lim.rlim_max;
  return out;
}

}  // namespace ragtor::http
