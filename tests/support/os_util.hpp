// Small OS helpers shared by the tests and the benches (header-only, so
// bench/ can use them without linking the test support library).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace ragtor::test {

// A free loopback TCP port: the kernel's pick, released for the caller.
inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free loopback port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// Runs a shell command; its stdout (trailing blanks trimmed), or throws
// when it cannot start or exits non-zero.
inline std::string shell(const std::string& cmd) {
  std::string out;
  auto* p = ::popen(cmd.c_str(), "r");
  if (!p)
    throw std::runtime_error("cannot run " + cmd);
  char buf[512];
  while (auto n = std::fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  if (::pclose(p) != 0)
    throw std::runtime_error(cmd + " failed");
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

}  // namespace ragtor::test
