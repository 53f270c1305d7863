// The path of the `ragtor` binary under test, which CMake passes to this
// executable only (RAGTOR_BINARY); the support library asks for it here.
#include "tests/support/ragtor_process.hpp"

#ifndef RAGTOR_BINARY
#error "RAGTOR_BINARY must name the ragtor executable under test"
#endif

namespace ragtor::test {

const char* built_ragtor_binary() {
  return RAGTOR_BINARY;
}

}  // namespace ragtor::test
