#include "base/status.h"

namespace weft {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kOutOfMemory: return "OUT_OF_MEMORY";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_shared<const State>(State{code, std::move(message)});
  }
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code())) + ": " + message();
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  Status out(code(), std::string(context) + ": " + message());
  return out.WithRetryAfter(retry_after());
}

Status Status::WithRetryAfter(std::chrono::milliseconds after) const {
  if (ok()) return *this;
  Status out;
  out.state_ = std::make_shared<const State>(State{code(), message(), after});
  return out;
}

}  // namespace weft
