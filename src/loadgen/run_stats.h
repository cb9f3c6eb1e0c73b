#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "loadgen/latency_histogram.h"
#include "loadgen/transport.h"

namespace weft {

// What one request came to: an HTTP status as itself, or a failure without one as one of these codes (above every
// HTTP status, so that they sort after the statuses).
inline constexpr int kOutcomeConnectError = 1001;
inline constexpr int kOutcomeIoError = 1002;
inline constexpr int kOutcomeTimeout = 1003;
// A gRPC answer is kOutcomeGrpc + its status code (0 = OK ... 16), between the HTTP statuses and the failures.
inline constexpr int kOutcomeGrpc = 900;

int OutcomeOf(const TransportReply& reply);
// "200", "429", ..., "OK", "RESOURCE_EXHAUSTED", ... (gRPC), "connect_error", "io_error", "timeout".
std::string OutcomeName(int outcome);
inline bool IsSuccess(int outcome) { return (outcome >= 200 && outcome < 300) || outcome == kOutcomeGrpc; }
inline bool IsAnswer(int outcome) { return outcome < kOutcomeConnectError; }

// What one worker recorded over the measured part of a run (after warmup). Every request it sent ends in exactly
// one Record, so sent == the sum of the outcome counts once the worker is done. Thread-compatible: each worker has
// its own, merged once the workers have stopped.
struct RunStats {
  std::map<int, LatencyHistogram> outcomes;  // outcome -> latencies of the requests that ended so
  uint64_t sent = 0;
  uint64_t started_late = 0;  // open loop: sent later than scheduled by more than the late threshold
  uint64_t peak_connections = 0;
  SteadyTime last_answer{};    // when the last answer (any HTTP status) arrived
  SteadyTime sending_ended{};  // when the worker stopped sending (send_until, or the request count reached)
  // The first error of each outcome that is not 2xx (an answer's body or why there was none), cut to a line:
  // "404" is more useful with the server's reason.
  std::map<int, std::string> first_errors;

  // `detail` is kept when it is the outcome's first error.
  void Record(int outcome, std::chrono::nanoseconds latency, SteadyTime now, std::string_view detail = {});
  void Merge(const RunStats& other);
  uint64_t ended() const;  // sum of the outcome counts
};

}  // namespace weft
