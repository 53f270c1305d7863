// Runs the real `ragtor` binary for the integration tests: a `ragtor serve`
// child on a free loopback port (stdout watched for the ready line, stderr
// kept in a log file for failure messages), `ragtor ingest` runs, and
// throw-away data directories. Children never outlive the test binary: the
// destructor kills a running server, and the child gets SIGKILL if the thread
// that started it dies (start servers from the test's main thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace ragtor::test {

using namespace std::chrono_literals;

// A failed launch, with the child's stderr tail in the message.
class process_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A unique directory under /tmp, removed with everything in it on
// destruction (kept when RAGTOR_TEST_KEEP_TMP is set, for post-mortems).
class temp_dir {
public:
  explicit temp_dir(std::string_view prefix = "ragtor-test");
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir();

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

// How a child ended.
struct exit_status {
  bool exited = false;  // normal exit; `code` is valid
  int code = -1;
  int signal = 0;          // terminating signal, when !exited
  bool timed_out = false;  // did not exit in time and was SIGKILLed

  bool clean() const { return exited && code == 0 && !timed_out; }
  std::string describe() const;
};

using env_vars = std::map<std::string, std::string>;

// Path of the binary under test: the RAGTOR_BINARY environment variable
// when set, else built_ragtor_binary().
std::string ragtor_binary();

// The RAGTOR_BINARY path CMake gives the test executable. Defined by the
// executable (tests/integration/ragtor_binary.cpp), which alone knows it.
const char* built_ragtor_binary();

// Root of the source tree (RAGTOR_SOURCE_DIR).
std::filesystem::path source_dir();

// The Node.js binary (/usr/bin or /usr/local/bin), "" when not installed.
std::string find_node();

// A running `ragtor serve --listen 127.0.0.1:0 --data-dir DIR`.
class ragtor_process {
public:
  // Starts the server with `env` added to a copy of this process's
  // environment (inherited RAGTOR_* variables are dropped so a developer's
  // shell cannot change the tests) and waits up to `ready_timeout` for the
  // ready line. Throws process_error (with the stderr tail) on failure.
  ragtor_process(const std::filesystem::path& data_dir, const env_vars& env = {},
                 const std::vector<std::string>& extra_args = {},
                 std::chrono::milliseconds ready_timeout = 30s);
  // Any server binary that prints "<ready_prefix>HOST:PORT" on stdout once
  // it listens (the fake OpenAI server, for one).
  ragtor_process(std::vector<std::string> argv, std::string_view ready_prefix,
                 const env_vars& env = {}, std::chrono::milliseconds ready_timeout = 30s);
  ragtor_process(const ragtor_process&) = delete;
  ragtor_process& operator=(const ragtor_process&) = delete;
  ~ragtor_process();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }

  // True while the child has not been reaped (and has not exited).
  bool running();

  // SIGTERM, then waits up to `timeout`; a child still alive then gets
  // SIGKILL and the result says timed_out.
  exit_status stop(std::chrono::milliseconds timeout = 10s);

  // SIGKILL and reap.
  exit_status kill9();

  // The last `max_bytes` of the child's stderr (its log).
  std::string stderr_tail(size_t max_bytes = 4000) const;
  // Everything the child wrote to stdout so far.
  std::string stdout_text() const;

  // Waits (on inotify events of the log file, no polling) until the log
  // holds `needle` at least `count` times; false after `timeout`.
  bool wait_for_log(std::string_view needle, size_t count, std::chrono::milliseconds timeout) const;

private:
  // Reaps the child, waiting until `deadline`; false on timeout.
  bool wait_exit(std::chrono::steady_clock::time_point deadline);
  void drain_stdout();

  std::filesystem::path data_dir_;
  temp_dir log_dir_{"ragtor-log"};
  std::filesystem::path stderr_path_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  uint16_t port_ = 0;
  bool reaped_ = false;
  exit_status status_;
  mutable std::mutex stdout_mutex_;
  std::string stdout_;
  std::thread drain_thread_;
};

struct command_result {
  exit_status status;
  std::string output;  // stdout and stderr interleaved
};

// Runs `ragtor ingest --kb KB --data-dir DIR PATH...` to completion.
command_result run_ingest(const std::filesystem::path& data_dir, const std::string& kb,
                          const std::vector<std::filesystem::path>& paths, const env_vars& env = {},
                          std::chrono::milliseconds timeout = 60s);

// Runs `argv` (argv[0] a path or a name on PATH) to completion (stdin
// /dev/null), with `env` added as for the server.
command_result run_command(const std::vector<std::string>& argv, const env_vars& env = {},
                           std::chrono::milliseconds timeout = 60s);

// Runs `ragtor ARGS...` to completion (stdin /dev/null).
command_result run_ragtor(const std::vector<std::string>& args, const env_vars& env = {},
                          std::chrono::milliseconds timeout = 60s);

}  // namespace ragtor::test
