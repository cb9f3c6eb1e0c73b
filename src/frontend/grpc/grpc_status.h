#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <string_view>

#include "base/status.h"

namespace weft {

// The gRPC code for an error code: the one place where this frontend maps errors to gRPC.
grpc::StatusCode GrpcCodeFor(StatusCode code);

// The longest error message a call carries; longer ones are cut with "... (N more bytes)".
inline constexpr size_t kMaxGrpcMessageBytes = 1024;

// The status a call finishes with: the mapped code and the message, at most kMaxGrpcMessageBytes (empty and OK for
// an ok status).
grpc::Status ToGrpcStatus(const Status& status);

// When `status` says when to retry (an open circuit breaker): trailing metadata "retry-after" (whole seconds, as
// HTTP's header) and "grpc-retry-pushback-ms" (which gRPC clients with a retry policy obey). Before Finish.
void AddRetryAfter(const Status& status, grpc::ServerContextBase* context);

// The canonical name of a gRPC code ("OK", "INVALID_ARGUMENT", ...), for metric labels.
std::string_view GrpcCodeName(grpc::StatusCode code);

}  // namespace weft
