#include "device/host_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>

namespace weft {
namespace {

HostPool::Allocator Malloc() {
  return {.allocate = [](size_t n) { return std::malloc(n); }, .free = [](void* p) { std::free(p); }, .place = {}};
}

TEST(HostPoolTest, FreedBlocksAreReusedBySizeClass) {
  auto pool = HostPool::Create(Malloc(), 1 << 20);
  std::byte* first;
  {
    auto a = pool->Allocate(5000);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->size, 5000u);
    first = a->data;
  }
  EXPECT_EQ(pool->cached_bytes(), 8192u);
  auto b = pool->Allocate(7000);  // same class (8 KiB)
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data, first);
  EXPECT_EQ(pool->allocations(), 1u);
  auto c = pool->Allocate(100);  // another class
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(pool->allocations(), 2u);
}

TEST(HostPoolTest, TheCacheIsBounded) {
  auto pool = HostPool::Create(Malloc(), 8192);
  {
    auto a = pool->Allocate(8192);
    auto b = pool->Allocate(8192);
    ASSERT_TRUE(a.ok() && b.ok());
  }
  EXPECT_EQ(pool->cached_bytes(), 8192u);
}

TEST(HostPoolTest, TrimGivesEveryCachedBlockBackAndBuffersInUseStay) {
  std::atomic<int> freed{0};
  HostPool::Allocator counting = Malloc();
  counting.free = [&freed](void* p) {
    freed++;
    std::free(p);
  };
  auto pool = HostPool::Create(counting, 1 << 20);
  auto kept = pool->Allocate(100);
  ASSERT_TRUE(kept.ok());
  { auto a = pool->Allocate(5000), b = pool->Allocate(20000); }
  EXPECT_EQ(pool->cached_bytes(), 8192u + 32768u);
  pool->Trim();
  EXPECT_EQ(pool->cached_bytes(), 0u);
  EXPECT_EQ(freed.load(), 2);
  kept->data[0] = std::byte{1};       // still ours
  auto again = pool->Allocate(5000);  // from the allocator again
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(pool->allocations(), 4u);
}

TEST(HostPoolTest, BuffersOutliveThePoolHandle) {
  auto pool = HostPool::Create(Malloc(), 1 << 20);
  auto a = pool->Allocate(100);
  ASSERT_TRUE(a.ok());
  pool.reset();
  a->data[0] = std::byte{1};  // still valid: the buffer keeps the pool alive
}

TEST(HostPoolTest, AllocatorFailureIsAnError) {
  auto pool = HostPool::Create({.allocate = [](size_t) -> void* { return nullptr; }, .free = [](void*) {}}, 0);
  EXPECT_EQ(pool->Allocate(10).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace weft
