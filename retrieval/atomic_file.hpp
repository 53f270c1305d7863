// Crash-safe file replacement shared by everything ragtor keeps on disk
// (KB documents, KB settings, index snapshots): write a temp file next to
// the target, fsync it, rename it over the target, fsync the directory.
// After a crash the file is either the old or the new version, never torn.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

#include <caf/error.hpp>

namespace ragtor {

// Writes all of `data` to `fd` (again after a short write or EINTR);
// errc::unavailable with the system's reason.
caf::error write_all(int fd, std::string_view data);

// Creates the parent directory when needed. Errors are errc::unavailable
// with the path and the system's reason.
caf::error write_file_atomically(const std::filesystem::path& file, std::string_view body);
// The same with the file's bytes in pieces, written one after another.
caf::error write_file_atomically(const std::filesystem::path& file,
                                 std::span<const std::string_view> pieces);

}  // namespace ragtor
