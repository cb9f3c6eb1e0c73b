#include "frontend/grpc/grpc_status.h"

#include "base/json_string.h"

namespace weft {

grpc::StatusCode GrpcCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    // Clients retry RESOURCE_EXHAUSTED with backoff, which is what a full queue asks for.
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kAborted: return grpc::StatusCode::ABORTED;
    case StatusCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
    case StatusCode::kOutOfMemory: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
    case StatusCode::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case StatusCode::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
  }
  return grpc::StatusCode::INTERNAL;
}

void AddRetryAfter(const Status& status, grpc::ServerContextBase* context) {
  const int64_t after_ms = status.retry_after().count();
  if (after_ms <= 0) return;
  context->AddTrailingMetadata("retry-after", std::to_string((after_ms + 999) / 1000));
  context->AddTrailingMetadata("grpc-retry-pushback-ms", std::to_string(after_ms));
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // The message travels in the grpc-message trailer, percent-encoded (up to three bytes per byte), and clients
  // refuse metadata past 8 KiB by default: a message that quotes a 100 KB model name failed that call and others on
  // the same channel. Bounded here, on a UTF-8 boundary, for every call.
  return grpc::Status(GrpcCodeFor(status.code()), TruncateUtf8(status.message(), kMaxGrpcMessageBytes));
}

std::string_view GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    default: return "UNKNOWN";
  }
}

}  // namespace weft
