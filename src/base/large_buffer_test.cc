#include "base/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "base/testing/process_maps.h"

namespace weft {
namespace {

TEST(LargeBufferTest, IsZeroedWritableAndGoneOnceUnmapped) {
  const size_t size = kLargeBufferBytes + 12345;  // not a whole number of release slices
  auto* data = static_cast<std::byte*>(MapLargeBuffer(size));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 4096, 0u);
  EXPECT_EQ(data[0], std::byte{0});
  EXPECT_EQ(data[size - 1], std::byte{0});
  std::memset(data, 0x5a, size);
  EXPECT_EQ(data[size / 2], std::byte{0x5a});
  EXPECT_TRUE(MappedInThisProcess(data + size - 1));
  UnmapLargeBuffer(data, size);
  EXPECT_FALSE(MappedInThisProcess(data));
  EXPECT_FALSE(MappedInThisProcess(data + size - 1));
  UnmapLargeBuffer(nullptr, size);  // nothing to give back
}

TEST(LargeBufferTest, ARefusedMappingIsNull) { EXPECT_EQ(MapLargeBuffer(size_t{1} << 62), nullptr); }

}  // namespace
}  // namespace weft
