#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>

#include "base/result.h"

namespace weft {

// A file descriptor, closed with its owner.
class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~UniqueFd();
  int get() const { return fd_; }

 private:
  int fd_;
};

struct OpenFile {
  UniqueFd fd;
  off_t size;
};

// Opens `file` for reading, following symlinks, and checks that it is a regular file: stat first, so that a device
// or FIFO is refused without opening it (opening some devices acts on them), and again on the descriptor, so that
// one put in the file's place since is refused too (the open does not wait for a FIFO's writer). The messages give
// the reason only; callers add the file's name. NotFound: it does not exist (or a parent is not a directory).
// InvalidArgument: not a regular file. Internal: it cannot be opened or examined.
Result<OpenFile> OpenRegularFile(const std::filesystem::path& file);

// Reads `file` whole, when it is a regular file (OpenRegularFile) of at most `max_bytes` (configs, label files, key
// files). A file that grows past the limit while it is read is refused rather than read on. Errors as
// OpenRegularFile's; also InvalidArgument when larger than max_bytes and Internal when a read fails.
Result<std::string> ReadSmallFile(const std::filesystem::path& file, size_t max_bytes);

}  // namespace weft
