#pragma once

#include <cstdint>

namespace weft {

// SplitMix64: a tiny generator whose sequence is fixed by its seed on every platform and standard library
// (std::uniform_*_distribution is not), so that generated inputs and Poisson schedules repeat from run to run and
// machine to machine. Not for cryptography. Thread-compatible.
class DeterministicRandom {
 public:
  explicit DeterministicRandom(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 bits.
  double NextUnit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n); n > 0. The modulo bias is below 2^-50 for the small n used here.
  uint64_t NextBelow(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

}  // namespace weft
