// How fast the host learns that urgent GPU work has ended: a host function on the side stream writing the eventfd
// (the default) against the device's thread polling cudaEventQuery (CudaDeviceOptions::poll_high_completions).
// Both end in the completion loop's epoll. One short kernel at a time on a kHigh stream; latency is the time from
// the kernel's end on the GPU (its timing event, on the host clock) to its completion callback, and the round trip
// the time from Enqueue to the callback. Optionally with a low-priority stream kept busy with short kernels whose
// own completions flow at the same time (`--background`).
//
//   weft_completion_bench [--iterations 2000] [--spin-us 20] [--out FILE.json]
//
// Runs each mode idle and with background work, interleaved in one process, and prints a table.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "device/cuda/cuda_device.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(v.size() - 1, i)];
}

struct Measured {
  std::vector<double> latency_us;     // GPU end -> callback
  std::vector<double> round_trip_us;  // Enqueue -> callback
  int errors = 0;
};

Result<Measured> Run(bool poll, bool background, int iterations, std::chrono::microseconds spin) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateCudaDevice({.poll_high_completions = poll}));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Stream> high, device->CreateStream({"high", StreamPriority::kHigh}));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Stream> low, device->CreateStream({"low", StreamPriority::kLow}));

  // Background: up to four 50 µs one-block kernels in flight on the low stream, each with its completion.
  std::atomic<bool> stop{false};
  std::atomic<int> in_flight{0};
  std::jthread feeder;
  if (background) {
    feeder = std::jthread([&] {
      while (!stop.load()) {
        if (in_flight.load() >= 4) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          continue;
        }
        in_flight++;
        low->Enqueue(
            {.run = [](const NativeStream& s) { return LaunchSpinKernel(s, std::chrono::microseconds(50), 1); },
             .on_done = [&](const Completion&) { in_flight--; }});
      }
    });
  }

  Measured m;
  std::mutex mu;
  std::condition_variable cv;
  for (int i = 0; i < iterations + 100; ++i) {  // the first 100 warm up
    bool done = false;
    Completion completion;
    SteadyTime seen;
    const SteadyTime sent = Clock::now();
    high->Enqueue({.run = [spin](const NativeStream& s) { return LaunchSpinKernel(s, spin, 1); },
                   .on_done =
                       [&](const Completion& c) {
                         std::lock_guard lock(mu);
                         seen = Clock::now();
                         completion = c;
                         done = true;
                         cv.notify_one();
                       }});
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
    if (!completion.status.ok()) {
      if (m.errors++ == 0) std::fprintf(stderr, "error: %s\n", completion.status.ToString().c_str());
      continue;
    }
    if (i < 100) continue;
    m.latency_us.push_back(std::chrono::duration<double, std::micro>(seen - completion.end).count());
    m.round_trip_us.push_back(std::chrono::duration<double, std::micro>(seen - sent).count());
  }
  stop = true;
  if (feeder.joinable()) feeder.join();
  low->Synchronize();
  high->Synchronize();
  return m;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  int iterations = 2000;
  int spin_us = 20;
  std::string out;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--iterations") {
      iterations = std::stoi(argv[i + 1]);
    } else if (a == "--spin-us") {
      spin_us = std::stoi(argv[i + 1]);
    } else if (a == "--out") {
      out = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: weft_completion_bench [--iterations N] [--spin-us US] [--out FILE.json]\n");
      return 2;
    }
  }
  if (std::string why = weft::CudaUnavailableReason(); !why.empty()) {
    std::fprintf(stderr, "weft_completion_bench needs a GPU: %s\n", why.c_str());
    return 1;
  }
  std::ostringstream json;
  json << "{\"iterations\": " << iterations << ", \"spin_us\": " << spin_us << ", \"runs\": [";
  std::printf("| completion path | background | latency p50 us | p99 us | round trip p50 us | p99 us |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  bool first = true;
  // Interleaved twice, so that drift of the machine shows as a difference between the two rounds of one mode.
  for (int round = 0; round < 2; ++round) {
    for (bool background : {false, true}) {
      for (bool poll : {false, true}) {
        auto m = weft::Run(poll, background, iterations, std::chrono::microseconds(spin_us));
        if (!m.ok()) {
          std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
          return 1;
        }
        const char* path = poll ? "poll (cudaEventQuery)" : "host function";
        const double l50 = weft::Percentile(m->latency_us, 50), l99 = weft::Percentile(m->latency_us, 99);
        const double r50 = weft::Percentile(m->round_trip_us, 50), r99 = weft::Percentile(m->round_trip_us, 99);
        std::printf("| %s | %s | %.1f | %.1f | %.1f | %.1f |\n", path, background ? "yes" : "no", l50, l99, r50, r99);
        json << (first ? "" : ", ") << "{\"round\": " << round << ", \"poll\": " << (poll ? "true" : "false")
             << ", \"background\": " << (background ? "true" : "false") << ", \"latency_p50_us\": " << l50
             << ", \"latency_p99_us\": " << l99 << ", \"round_trip_p50_us\": " << r50
             << ", \"round_trip_p99_us\": " << r99 << ", \"errors\": " << m->errors << "}";
        first = false;
      }
    }
  }
  json << "]}\n";
  if (!out.empty()) std::ofstream(out) << json.str();
  return 0;
}
