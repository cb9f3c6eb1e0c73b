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

Status Larger(size_t max_bytes) { return InvalidArgument("larger than " + std::to_string(max_bytes) + " bytes"); }

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<OpenFile> OpenRegularFile(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return NotFound("no such file");
    return Internal("cannot be read: " + ErrnoMessage(error));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument("not a regular file");
  // O_NONBLOCK: should it have become a FIFO since the stat, the open does not wait for a writer; the fstat below
  // refuses it. Reads from a regular file ignore the flag.
  int raw;
  do {
    raw = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return NotFound("no such file");
    return Internal("cannot be opened: " + ErrnoMessage(error));
  }
  UniqueFd fd(raw);
  if (::fstat(fd.get(), &st) != 0) return Internal("cannot be read: " + ErrnoMessage(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("not a regular file");
  return OpenFile{std::move(fd), st.st_size};
}

Result<std::string> ReadSmallFile(const std::filesystem::path& file, size_t max_bytes) {
  // No file fits more; the clamp keeps the sizes below (twice what was read, plus one) from wrapping.
  max_bytes = std::min(max_bytes, std::numeric_limits<size_t>::max() / 4);
  WEFT_ASSIGN_OR_RETURN(OpenFile opened, OpenRegularFile(file));
  if (static_cast<uint64_t>(opened.size) > max_bytes) return Larger(max_bytes);
  const int fd = opened.fd.get();
  // One byte more than the size measured: a read that fills it tells a file that has grown since.
  std::string text(static_cast<size_t>(opened.size) + 1, '\0');
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (got > max_bytes) return Larger(max_bytes);
      text.resize(std::min(max_bytes, got * 2) + 1);
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("read failed: " + ErrnoMessage(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return Larger(max_bytes);
  text.resize(got);
  return text;
}

}  // namespace weft
