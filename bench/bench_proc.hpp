// Child processes for benches: start a server binary, wait for its
// "listening on http://HOST:PORT" line, stop it by PID, read its peak RSS.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct child {
  pid_t pid = -1;
  uint16_t port = 0;
};

// Starts `argv` with stdout on a pipe and waits for "<prefix>...:PORT".
child spawn(std::vector<std::string> argv, const std::string& prefix,
            const std::vector<std::string>& env, const std::filesystem::path& log) {
  int fds[2];
  if (pipe(fds) != 0)
    throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    auto fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    for (auto& e : env)
      putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  for (;;) {
    auto n = read(fds[0], buf, sizeof buf);
    if (n <= 0)
      throw std::runtime_error(argv[0] + " did not start; see " + log.string());
    out.append(buf, static_cast<size_t>(n));
    auto at = out.find(prefix);
    auto nl = at == std::string::npos ? std::string::npos : out.find('\n', at);
    if (nl != std::string::npos) {
      auto line = out.substr(at, nl - at);
      child c;
      c.pid = pid;
      c.port = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
      std::thread{[fd = fds[0]] {
        char sink[512];
        while (read(fd, sink, sizeof sink) > 0) {
        }
      }}.detach();
      return c;
    }
  }
}

void stop(child& c) {
  if (c.pid > 0) {
    kill(c.pid, SIGTERM);
    int st;
    waitpid(c.pid, &st, 0);
  }
}

// User + system CPU seconds a process has used so far (/proc/PID/stat).
double cpu_seconds(pid_t pid) {
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream rest{text.substr(close + 2)};
  std::string field;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14)
      utime = std::stoul(field);
    if (i == 15)
      stime = std::stoul(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A line of /proc/PID/status in KiB ("VmHWM:", "VmRSS:"); 0 if absent.
size_t status_kib(pid_t pid, std::string_view field) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(field))
      return std::stoul(line.substr(field.size()));
  return 0;
}

size_t peak_rss_kib(pid_t pid) {
  return status_kib(pid, "VmHWM:");
}

size_t rss_kib(pid_t pid) {
  return status_kib(pid, "VmRSS:");
}

// Starts the peak (VmHWM) again from the current RSS (Linux >= 4.0), so a
// row's peak is its own.
void reset_peak_rss(pid_t pid) {
  std::ofstream{"/proc/" + std::to_string(pid) + "/clear_refs"} << "5";
}

}  // namespace
