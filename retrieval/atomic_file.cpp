#include "retrieval/atomic_file.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "protocol/errc.hpp"

namespace ragtor {

namespace fs = std::filesystem;

caf::error write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    auto n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return make_error(errc::unavailable, std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

caf::error write_file_atomically(const fs::path& file, std::string_view body) {
  return write_file_atomically(file, std::span<const std::string_view>{&body, 1});
}

caf::error write_file_atomically(const fs::path& file, std::span<const std::string_view> pieces) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec)
    return make_error(errc::unavailable,
                      "cannot create " + file.parent_path().string() + ": " + ec.message());
  // A name of its own per write: two threads may write the same file
  // (the last rename wins, whole).
  static std::atomic<uint64_t> writes{0};
  auto tmp = file;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(errc::unavailable,
                      "cannot write " + tmp.string() + ": " + std::strerror(errno));
  caf::error err;
  for (auto piece : pieces)
    if (!err)
      err = write_all(fd, piece);
  if (!err && ::fsync(fd) != 0)
    err =
        make_error(errc::unavailable, "cannot sync " + tmp.string() + ": " + std::strerror(errno));
  if (::close(fd) != 0 && !err)
    err = make_error(errc::unavailable, std::strerror(errno));
  if (!err) {
    fs::rename(tmp, file, ec);
    if (ec)
      err = make_error(errc::unavailable, "cannot replace " + file.string() + ": " + ec.message());
  }
  if (err) {
    fs::remove(tmp, ec);
    return err;
  }
  if (int dir = ::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);  // best effort: makes the rename itself durable
    ::close(dir);
  }
  return {};
}

}  // namespace ragtor
