#include "fuzz/shm_fixture.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"

namespace weft {

ShmObject::ShmObject(std::string key) : key_(std::move(key)) {
  int fd = shm_open(key_.c_str(), O_RDWR | O_CREAT, 0600);
  WEFT_CHECK(fd >= 0) << "shm_open " << key_ << ": " << std::strerror(errno);
  WEFT_CHECK(ftruncate(fd, kBytes) == 0) << "ftruncate " << key_ << ": " << std::strerror(errno);
  void* base = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  WEFT_CHECK(base != MAP_FAILED) << "mmap " << key_ << ": " << std::strerror(errno);
  close(fd);
  base_ = static_cast<std::byte*>(base);
}

ShmObject::~ShmObject() {
  munmap(base_, kBytes);
  Unlink();
}

void ShmObject::Unlink() {
  if (linked_) shm_unlink(key_.c_str());
  linked_ = false;
}

void ShmObject::Fill(std::span<const std::byte> bytes) {
  size_t n = std::min(bytes.size(), kBytes);
  if (n > 0) std::memcpy(base_, bytes.data(), n);
  std::memset(base_ + n, 0, kBytes - n);
}

namespace {

std::vector<std::byte> RegionContents() {
  std::vector<std::byte> bytes(ShmObject::kBytes);
  const char element[8] = {4, 0, 0, 0, 'w', 'e', 'f', 't'};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(element[i % 8]);
  return bytes;
}

}  // namespace

// The key is the process's own, so that targets running side by side do not share it.
RegisteredRegion::RegisteredRegion()
    : object_("/weft_fuzz_region." + std::to_string(getpid())), contents_(RegionContents()) {
  Status registered = registry_.Register("region", object_.key(), 0, ShmObject::kBytes);
  WEFT_CHECK(registered.ok()) << registered.ToString();
  object_.Unlink();  // the registry holds it open
  Reset();
}

}  // namespace weft
