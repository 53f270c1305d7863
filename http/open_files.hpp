// The process's open-file limit (RLIMIT_NOFILE), raised to what a server
// needs: a descriptor per client connection and per model connection, and
// some for the listener, the database and logs.
#pragma once

#include <cstdint>

namespace ragtor::http {

struct open_file_limits {
  uint64_t soft_before = 0, hard_before = 0;
  uint64_t soft = 0, hard = 0;
};

// Raises the soft limit to the hard one; when the hard one is below `want`
// and the process may raise it (root, or CAP_SYS_RESOURCE), raises both to
// `want` first, at most to the kernel's fs.nr_open. want = 0: only the
// soft limit to the hard one.
open_file_limits raise_open_file_limit(uint64_t want);

}  // namespace ragtor::http
