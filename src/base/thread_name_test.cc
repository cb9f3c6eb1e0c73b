#include "base/thread_name.h"

#include <gtest/gtest.h>

#include <thread>

namespace weft {
namespace {

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = CurrentThreadName();
  std::string inside;
  std::thread([&] {
    SetCurrentThreadName("http-io");
    inside = CurrentThreadName();
  }).join();
  EXPECT_EQ(inside, "http-io");
  EXPECT_EQ(CurrentThreadName(), before);
}

TEST(ThreadNameTest, LongNamesAreCutAtFifteenBytesBetweenCharacters) {
  std::string plain, accented;
  std::thread([&] {
    SetCurrentThreadName("i:a_model_with_a_long_name");
    plain = CurrentThreadName();
    // "é" is two bytes; the 15-byte cut would fall inside the one that starts at byte 14.
    SetCurrentThreadName("i:abcdefghijklé-x");
    accented = CurrentThreadName();
  }).join();
  EXPECT_EQ(plain, "i:a_model_with_");
  EXPECT_EQ(accented, "i:abcdefghijkl");
}

}  // namespace
}  // namespace weft
