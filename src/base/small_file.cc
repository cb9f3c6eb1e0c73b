#include "base/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <system_error>

namespace weft {
namespace {

std::string ErrnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

Status Larger(size_t max_bytes) { return InvalidArgument("larger than " + std::to_string(max_bytes) + " bytes"); }

}  // namespace

Result<std::string> ReadSmallFile(const std::filesystem::path& file, size_t max_bytes) {
  // No file fits more; the clamp keeps the sizes below (twice what was read, plus one) from wrapping.
  max_bytes = std::min(max_bytes, std::numeric_limits<size_t>::max() / 4);
  int fd;
  do {
    // O_NONBLOCK: a FIFO does not block the open (it is refused below); reads of a regular file ignore the flag.
    fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return NotFound("no such file");
    return Unavailable("cannot be opened: " + ErrnoMessage(error));
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Unavailable("cannot be read: " + ErrnoMessage(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return Larger(max_bytes);
  // One byte more than the size measured: a read that fills it tells a file that has grown since.
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (got > max_bytes) return Larger(max_bytes);
      text.resize(std::min(max_bytes, got * 2) + 1);
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable("cannot be read: " + ErrnoMessage(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return Larger(max_bytes);
  text.resize(got);
  return text;
}

}  // namespace weft
