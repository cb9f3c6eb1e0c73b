// What freeing a large buffer costs the other threads of the process: one thread maps and frees a buffer of
// --mib MiB (touched whole, as a model's weights are) several times, while another maps, touches and unmaps
// 512 KiB every 200 us, as a request's large allocation or a new thread's stack does, and records how long each
// took. The free is either one munmap, or base/large_buffer.h's release in slices. Prints the other thread's p50,
// p99 and max for both, and the free's own duration. Results: docs/benchmarks.md ("Live repository").
//   build/release/bench/weft_large_free_bench [--mib 1024] [--rounds 5]
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/large_buffer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Result {
  double p50_us, p99_us, max_us, free_ms;
};

Result Run(bool in_slices, size_t bytes, int rounds) {
  std::atomic<bool> stop{false};
  std::vector<double> latencies;
  std::thread other([&] {
    constexpr size_t kSmall = 512 << 10;
    while (!stop) {
      const auto start = Clock::now();
      void* p = mmap(nullptr, kSmall, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      std::memset(p, 1, kSmall);
      munmap(p, kSmall);
      latencies.push_back(Micros(Clock::now() - start));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  double free_ms = 0;
  for (int i = 0; i < rounds; ++i) {
    auto* data = static_cast<std::byte*>(weft::MapLargeBuffer(bytes));
    if (data == nullptr) std::abort();
    std::memset(data, 1, bytes);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto start = Clock::now();
    if (in_slices) {
      weft::UnmapLargeBuffer(data, bytes);
    } else {
      munmap(data, bytes);
    }
    free_ms += Micros(Clock::now() - start) / 1000 / rounds;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop = true;
  other.join();
  std::sort(latencies.begin(), latencies.end());
  return {latencies[latencies.size() / 2], latencies[latencies.size() * 99 / 100], latencies.back(), free_ms};
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::string(argv[i]) == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  const size_t bytes = mib << 20;
  for (bool in_slices : {false, true}) {
    Result r = Run(in_slices, bytes, rounds);
    std::printf("%-20s free %7.1f ms; the other thread's mmap+touch+munmap: p50 %6.1f us, p99 %6.1f us, max %8.1f us\n",
                in_slices ? "in 16 MiB slices" : "one munmap", r.free_ms, r.p50_us, r.p99_us, r.max_us);
  }
  return 0;
}
