#pragma once
/// \file
/// Making a saved file durable: its data flushed to the disk before it is
/// renamed over the old file, and the directory entry of the rename
/// flushed after it (POSIX fsync on the file, then on its directory), so
/// that a save that returned survives a crash or power loss, and a crash
/// during a save leaves the old file or the new one, never a truncated
/// one. Without <unistd.h> both steps do nothing beyond the C library's
/// flush.

#include <cerrno>
#include <cstdio>
#include <filesystem>

#if __has_include(<unistd.h>) && __has_include(<fcntl.h>)
#include <fcntl.h>
#include <unistd.h>
#define DIMSUM_HAS_FSYNC 1
#else
#define DIMSUM_HAS_FSYNC 0
#endif

namespace dimsum::io::detail {

/// Flushes the data of the open file `f` (already fflush-ed) to the disk.
/// False, with errno set, when the disk reports an error; a file that
/// cannot be synced at all (EINVAL: a pipe or a special file) counts as
/// synced.
inline bool fsync_file(std::FILE* f) {
#if DIMSUM_HAS_FSYNC
  return ::fsync(::fileno(f)) == 0 || errno == EINVAL;
#else
  (void)f;
  return true;
#endif
}

/// Flushes the directory `dir` (empty: the current one), which makes a
/// rename into it durable. Best effort: the file is in place already, and
/// some file systems refuse to sync a directory.
inline void fsync_directory(const std::filesystem::path& dir) {
#if DIMSUM_HAS_FSYNC
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  (void)::close(fd);
#else
  (void)dir;
#endif
}

}  // namespace dimsum::io::detail
