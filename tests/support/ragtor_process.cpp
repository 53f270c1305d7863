#include "tests/support/ragtor_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ragtor::test {

namespace {

using steady = std::chrono::steady_clock;

int millis_left(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0));
}

std::string errno_text(std::string_view what) {
  return std::string{what} + ": " + std::strerror(errno);
}

// argv/envp as the NUL-terminated arrays execve wants; built before fork()
// because the child of a multi-threaded parent must not allocate.
struct exec_args {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;

  exec_args(std::vector<std::string> args, const env_vars& extra) : argv_storage(std::move(args)) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view entry{*e};
      auto name = entry.substr(0, entry.find('='));
      if (name.starts_with("RAGTOR_") || extra.count(std::string{name}))
        continue;
      env_storage.emplace_back(entry);
    }
    for (const auto& [name, value] : extra)
      env_storage.push_back(name + "=" + value);
    for (auto& a : argv_storage)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_storage)
      envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

// Forks and execs `args` with stdin from /dev/null and stdout/stderr on the
// given descriptors (which may be the same). All other descriptors of this
// process are close-on-exec (the helpers open everything with O_CLOEXEC).
pid_t spawn(exec_args& args, int out_fd, int err_fd) {
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0)
    throw process_error{errno_text("open /dev/null")};
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(null_fd);
    throw process_error{errno_text("fork")};
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execve(args.argv[0], args.argv.data(), args.envp.data());
    static const char msg[] = "execve of the ragtor binary failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(null_fd);
  return pid;
}

exit_status decode_wait_status(int st) {
  exit_status s;
  if (WIFEXITED(st)) {
    s.exited = true;
    s.code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    s.signal = WTERMSIG(st);
  }
  return s;
}

// Waits for `pid` to exit until `deadline` without sleeping: a pidfd
// becomes readable when the process exits. Returns false on timeout.
bool wait_pid_until(pid_t pid, steady::time_point deadline, exit_status& out) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int n;
    do {
      n = ::poll(&p, 1, millis_left(deadline));
    } while (n < 0 && errno == EINTR);
    ::close(pidfd);
    if (n == 0)
      return false;
  }
  // Exited (or no pidfd support: block; callers only get here after SIGKILL
  // or with a deadline they are prepared to exceed).
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &st, 0);
  } while (r < 0 && errno == EINTR);
  if (r != pid)
    throw process_error{errno_text("waitpid")};
  out = decode_wait_status(st);
  return true;
}

std::string read_file_tail(const std::filesystem::path& path, size_t max_bytes) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return {};
  std::stringstream ss;
  ss << in.rdbuf();
  auto text = ss.str();
  if (text.size() > max_bytes)
    text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

}  // namespace

temp_dir::temp_dir(std::string_view prefix) {
  std::string tmpl = "/tmp/" + std::string{prefix} + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw process_error{errno_text("mkdtemp " + tmpl)};
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  if (std::getenv("RAGTOR_TEST_KEEP_TMP") != nullptr)
    return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string exit_status::describe() const {
  std::string s;
  if (exited)
    s = "exit code " + std::to_string(code);
  else if (signal != 0)
    s = "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  else
    s = "unknown exit";
  if (timed_out)
    s += " after not exiting in time";
  return s;
}

std::string ragtor_binary() {
  if (const char* env = std::getenv("RAGTOR_BINARY"); env != nullptr && *env != '\0')
    return env;
  return built_ragtor_binary();
}

std::string find_node() {
  for (auto dir : {"/usr/bin", "/usr/local/bin"}) {
    auto p = std::filesystem::path{dir} / "node";
    if (std::filesystem::exists(p))
      return p.string();
  }
  return {};
}

std::filesystem::path source_dir() {
  return RAGTOR_SOURCE_DIR;
}

namespace {

std::vector<std::string> serve_argv(const std::filesystem::path& data_dir,
                                    const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv{ragtor_binary(), "serve",      "--listen",
                                "127.0.0.1:0",   "--data-dir", data_dir.string()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return argv;
}

}  // namespace

ragtor_process::ragtor_process(const std::filesystem::path& data_dir, const env_vars& env,
                               const std::vector<std::string>& extra_args,
                               std::chrono::milliseconds ready_timeout)
    : ragtor_process(serve_argv(data_dir, extra_args), "ragtor listening on http://", env,
                     ready_timeout) {
  data_dir_ = data_dir;
}

ragtor_process::ragtor_process(std::vector<std::string> argv, std::string_view ready_prefix,
                               const env_vars& env, std::chrono::milliseconds ready_timeout)
    : stderr_path_(log_dir_.path() / "server.stderr.log") {
  auto name = std::filesystem::path{argv.at(0)}.filename().string();
  exec_args args{std::move(argv), env};

  int err_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0)
    throw process_error{errno_text("open " + stderr_path_.string())};
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(err_fd);
    throw process_error{errno_text("pipe2")};
  }
  try {
    pid_ = spawn(args, out_pipe[1], err_fd);
  } catch (...) {
    ::close(err_fd);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw;
  }
  ::close(err_fd);
  ::close(out_pipe[1]);
  stdout_fd_ = out_pipe[0];

  // Read stdout until the ready line.
  auto deadline = steady::now() + ready_timeout;
  std::string buffer;
  std::string failure;
  for (;;) {
    auto nl = buffer.find('\n');
    if (nl != std::string::npos) {
      auto line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (line.starts_with(ready_prefix)) {
        auto colon = line.rfind(':');
        auto port = std::strtoul(line.c_str() + colon + 1, nullptr, 10);
        if (colon < ready_prefix.size() || port == 0 || port > 65535) {
          failure = "unparsable ready line \"" + line + "\"";
          break;
        }
        port_ = static_cast<uint16_t>(port);
        std::lock_guard lock{stdout_mutex_};
        stdout_ += line + "\n" + buffer;
        break;
      }
      std::lock_guard lock{stdout_mutex_};
      stdout_ += line + "\n";
      continue;
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    int n = ::poll(&p, 1, millis_left(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0) {
      failure = "no ready line within " + std::to_string(ready_timeout.count()) + " ms";
      break;
    }
    char chunk[4096];
    auto got = ::read(stdout_fd_, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      failure = "stdout closed before the ready line";
      break;
    }
    buffer.append(chunk, static_cast<size_t>(got));
  }
  if (!failure.empty()) {
    exit_status st;
    // A child that closed stdout is usually exiting; give it a moment to be
    // reaped so the message shows its real exit status.
    auto grace = failure.starts_with("stdout closed") ? 5s : 0s;
    if (wait_pid_until(pid_, steady::now() + grace, st)) {
      failure += " (server exited: " + st.describe() + ")";
    } else {
      ::kill(pid_, SIGKILL);
      wait_pid_until(pid_, steady::now() + 10s, st);
    }
    reaped_ = true;
    status_ = st;
    ::close(stdout_fd_);
    stdout_fd_ = -1;
    std::string out = stdout_text() + buffer;
    throw process_error{name + " failed to start: " + failure + "\n--- stdout ---\n" + out
                        + "\n--- stderr tail ---\n" + stderr_tail()};
  }
  // Keep reading stdout so the server never blocks on a full pipe.
  drain_thread_ = std::thread{[this] { drain_stdout(); }};
}

ragtor_process::~ragtor_process() {
  if (!reaped_)
    kill9();
  if (drain_thread_.joinable())
    drain_thread_.join();
  if (stdout_fd_ >= 0)
    ::close(stdout_fd_);
}

void ragtor_process::drain_stdout() {
  char chunk[4096];
  for (;;) {
    auto got = ::read(stdout_fd_, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return;
    std::lock_guard lock{stdout_mutex_};
    stdout_.append(chunk, static_cast<size_t>(got));
  }
}

bool ragtor_process::running() {
  if (reaped_)
    return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = decode_wait_status(st);
    return false;
  }
  return true;
}

bool ragtor_process::wait_exit(steady::time_point deadline) {
  if (reaped_)
    return true;
  exit_status st;
  if (!wait_pid_until(pid_, deadline, st))
    return false;
  reaped_ = true;
  status_ = st;
  if (drain_thread_.joinable())
    drain_thread_.join();
  return true;
}

exit_status ragtor_process::stop(std::chrono::milliseconds timeout) {
  if (reaped_)
    return status_;
  ::kill(pid_, SIGTERM);
  if (wait_exit(steady::now() + timeout))
    return status_;
  ::kill(pid_, SIGKILL);
  wait_exit(steady::now() + 30s);
  status_.timed_out = true;
  return status_;
}

exit_status ragtor_process::kill9() {
  if (reaped_)
    return status_;
  ::kill(pid_, SIGKILL);
  wait_exit(steady::now() + 30s);
  return status_;
}

std::string ragtor_process::stderr_tail(size_t max_bytes) const {
  return read_file_tail(stderr_path_, max_bytes);
}

bool ragtor_process::wait_for_log(std::string_view needle, size_t count,
                                  std::chrono::milliseconds timeout) const {
  auto occurrences = [&] {
    auto log = read_file_tail(stderr_path_, 1 << 24);
    size_t n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
      ++n;
    return n;
  };
  int ino = ::inotify_init1(IN_CLOEXEC);
  if (ino < 0)
    throw process_error{errno_text("inotify_init1")};
  ::inotify_add_watch(ino, stderr_path_.c_str(), IN_MODIFY);
  auto deadline = steady::now() + timeout;
  bool found = occurrences() >= count;
  while (!found && steady::now() < deadline) {
    pollfd p{ino, POLLIN, 0};
    if (::poll(&p, 1, millis_left(deadline)) > 0) {
      char events[4096];
      (void)::read(ino, events, sizeof events);
    }
    found = occurrences() >= count;
  }
  ::close(ino);
  return found;
}

std::string ragtor_process::stdout_text() const {
  std::lock_guard lock{stdout_mutex_};
  return stdout_;
}

command_result run_ragtor(const std::vector<std::string>& args_in, const env_vars& env,
                          std::chrono::milliseconds timeout) {
  std::vector<std::string> argv{ragtor_binary()};
  argv.insert(argv.end(), args_in.begin(), args_in.end());
  return run_command(argv, env, timeout);
}

command_result run_command(const std::vector<std::string>& argv, const env_vars& env,
                           std::chrono::milliseconds timeout) {
  exec_args args{argv, env};
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw process_error{errno_text("pipe2")};
  pid_t pid;
  try {
    pid = spawn(args, out_pipe[1], out_pipe[1]);
  } catch (...) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw;
  }
  ::close(out_pipe[1]);

  command_result result;
  auto deadline = steady::now() + timeout;
  bool timed_out = false;
  for (;;) {
    pollfd p{out_pipe[0], POLLIN, 0};
    int n = ::poll(&p, 1, millis_left(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0) {
      timed_out = true;
      break;
    }
    char chunk[4096];
    auto got = ::read(out_pipe[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    result.output.append(chunk, static_cast<size_t>(got));
  }
  ::close(out_pipe[0]);
  if (timed_out)
    ::kill(pid, SIGKILL);
  if (!wait_pid_until(pid, steady::now() + (timed_out ? 30s : timeout), result.status)) {
    ::kill(pid, SIGKILL);
    wait_pid_until(pid, steady::now() + 30s, result.status);
    timed_out = true;
  }
  result.status.timed_out = timed_out;
  return result;
}

command_result run_ingest(const std::filesystem::path& data_dir, const std::string& kb,
                          const std::vector<std::filesystem::path>& paths, const env_vars& env,
                          std::chrono::milliseconds timeout) {
  std::vector<std::string> args{"ingest", "--kb", kb, "--data-dir", data_dir.string()};
  for (const auto& p : paths)
    args.push_back(p.string());
  return run_ragtor(args, env, timeout);
}

}  // namespace ragtor::test
