#include "base/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace weft {
namespace {

// Whether `address` lies in a mapping of this process (/proc/self/maps).
bool Mapped(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream(line) >> std::hex >> begin >> dash >> end;
    if (a >= begin && a < end) return true;
  }
  return false;
}

TEST(LargeBufferTest, IsZeroedWritableAndGoneOnceUnmapped) {
  const size_t size = kLargeBufferBytes + 12345;  // not a whole number of release slices
  auto* data = static_cast<std::byte*>(MapLargeBuffer(size));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 4096, 0u);
  EXPECT_EQ(data[0], std::byte{0});
  EXPECT_EQ(data[size - 1], std::byte{0});
  std::memset(data, 0x5a, size);
  EXPECT_EQ(data[size / 2], std::byte{0x5a});
  EXPECT_TRUE(Mapped(data + size - 1));
  UnmapLargeBuffer(data, size);
  EXPECT_FALSE(Mapped(data));
  EXPECT_FALSE(Mapped(data + size - 1));
  UnmapLargeBuffer(nullptr, size);  // nothing to give back
}

TEST(LargeBufferTest, ARefusedMappingIsNull) { EXPECT_EQ(MapLargeBuffer(size_t{1} << 62), nullptr); }

}  // namespace
}  // namespace weft
