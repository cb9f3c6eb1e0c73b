#include "multiplexer/stream_load.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::milliseconds;

SteadyTime At(int ms) { return SteadyTime{} + std::chrono::seconds(1000) + milliseconds(ms); }

TEST(StreamLoadTest, AStreamBusyAllTheTimeReadsAboutOne) {
  StreamLoad load(milliseconds(100));
  for (int t = 0; t < 1000; t += 10) load.Add(At(t), At(t + 10));
  EXPECT_NEAR(load.At(At(1000)), 1.0, 0.06);
}

TEST(StreamLoadTest, HalfBusyReadsAboutAHalf) {
  StreamLoad load(milliseconds(200));
  for (int t = 0; t < 2000; t += 10) load.Add(At(t), At(t + 5));
  EXPECT_NEAR(load.At(At(2000)), 0.5, 0.05);
}

TEST(StreamLoadTest, IdleTimeDecaysTheLoad) {
  StreamLoad load(milliseconds(100));
  for (int t = 0; t < 1000; t += 10) load.Add(At(t), At(t + 10));
  const double busy = load.At(At(1000));
  EXPECT_NEAR(load.At(At(1100)), busy * std::exp(-1.0), 1e-6);
  EXPECT_LT(load.At(At(2000)), 0.001);
  EXPECT_DOUBLE_EQ(StreamLoad().At(At(5)), 0);
}

// Three batches always on the stream, each waiting for two before it: their times on the stream overlap and the
// load reads the number of batches there, not a busy fraction that cannot pass 1.
TEST(StreamLoadTest, OverlappingTimesOnTheStreamCountBatchesThere) {
  StreamLoad load(milliseconds(100));
  for (int t = 0; t < 1000; t += 10) load.Add(At(t), At(t + 30));
  EXPECT_NEAR(load.At(At(1000)), 3.0, 0.2);
}

TEST(StreamLoadTest, ShiftMovesLoadAndStopsAtZero) {
  StreamLoad load(milliseconds(100));
  for (int t = 0; t < 1000; t += 10) load.Add(At(t), At(t + 10));
  const double before = load.At(At(1000));
  load.Shift(-0.25, At(1000));
  EXPECT_NEAR(load.At(At(1000)), before - 0.25, 1e-9);
  load.Shift(-5, At(1000));
  EXPECT_EQ(load.At(At(1000)), 0);
}

}  // namespace
}  // namespace weft
