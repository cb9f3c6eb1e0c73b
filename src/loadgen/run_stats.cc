#include "loadgen/run_stats.h"

#include <algorithm>
#include <iterator>

namespace weft {

int OutcomeOf(const TransportReply& reply) {
  switch (reply.failure) {
    case TransportReply::Failure::kNone: return static_cast<int>(reply.status);
    case TransportReply::Failure::kConnect: return kOutcomeConnectError;
    case TransportReply::Failure::kIo: return kOutcomeIoError;
    case TransportReply::Failure::kTimeout: return kOutcomeTimeout;
  }
  return kOutcomeIoError;
}

std::string OutcomeName(int outcome) {
  static constexpr const char* kGrpcCodes[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  switch (outcome) {
    case kOutcomeConnectError: return "connect_error";
    case kOutcomeIoError: return "io_error";
    case kOutcomeTimeout: return "timeout";
    default:
      if (outcome >= kOutcomeGrpc && outcome < kOutcomeGrpc + static_cast<int>(std::size(kGrpcCodes))) {
        return kGrpcCodes[outcome - kOutcomeGrpc];
      }
      return std::to_string(outcome);
  }
}

void RunStats::Record(int outcome, std::chrono::nanoseconds latency, SteadyTime now, std::string_view detail) {
  outcomes[outcome].Record(latency);
  if (!IsSuccess(outcome) && !first_errors.contains(outcome)) {
    constexpr size_t kMaxDetail = 200;
    std::string line(detail.substr(0, kMaxDetail));
    // Printable ASCII only: the line goes to a terminal and into JSON, and a cut may split a UTF-8 sequence.
    for (char& c : line) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20) c = ' ';
      if (u >= 0x7f) c = '?';
    }
    if (detail.size() > kMaxDetail) line += "...";
    first_errors.emplace(outcome, std::move(line));
  }
  if (IsAnswer(outcome)) last_answer = std::max(last_answer, now);
}

void RunStats::Merge(const RunStats& other) {
  for (const auto& [outcome, histogram] : other.outcomes) outcomes[outcome].Merge(histogram);
  for (const auto& [outcome, error] : other.first_errors) first_errors.emplace(outcome, error);
  sent += other.sent;
  started_late += other.started_late;
  peak_connections += other.peak_connections;
  last_answer = std::max(last_answer, other.last_answer);
  sending_ended = std::max(sending_ended, other.sending_ended);
}

uint64_t RunStats::ended() const {
  uint64_t n = 0;
  for (const auto& [outcome, histogram] : outcomes) n += histogram.count();
  return n;
}

}  // namespace weft
