#include "frontend/http/status_mapping.h"

#include "base/json_string.h"
#include "frontend/http/json_writer.h"

namespace weft {

unsigned HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kCancelled: return 499;  // nginx's "client closed request"; rarely seen by the client
    case StatusCode::kAborted: return 409;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kInternal: return 500;
    // Not the client's fault, and the same request may well fit a moment later (or in a smaller batch).
    case StatusCode::kOutOfMemory: return 503;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    // Triton answers a taken name with 400 over HTTP (ALREADY_EXISTS over gRPC); 409 would break its clients' checks.
    case StatusCode::kAlreadyExists: return 400;
  }
  return 500;
}

HttpResponse ErrorResponse(unsigned http_status, std::string_view message) {
  HttpResponse response;
  response.status = http_status;
  JsonWriter json(&response.body);
  json.BeginObject();
  json.Key("error");
  // Messages may quote client input (a model name from the URL, of any size and any bytes): bounded here, and
  // made UTF-8 by the writer.
  json.String(TruncateUtf8(message, kMaxErrorMessageBytes));
  json.EndObject();
  return response;
}

HttpResponse ErrorResponse(const Status& status) {
  HttpResponse response = ErrorResponse(HttpStatusFor(status.code()), status.message());
  // Backpressure: the queue was full now, and a client that waits a moment will likely get in. An open breaker
  // says how long it stays open. Retry-After counts whole seconds, rounded up.
  const int64_t after_ms = status.retry_after().count();
  if (after_ms > 0) {
    response.headers.emplace_back("Retry-After", std::to_string((after_ms + 999) / 1000));
  } else if (status.code() == StatusCode::kResourceExhausted) {
    response.headers.emplace_back("Retry-After", "1");
  }
  return response;
}

HttpResponse AuthErrorResponse(const Status& status) {
  HttpResponse response = ErrorResponse(status);
  if (status.code() == StatusCode::kUnauthenticated) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"weft\"");
  } else if (status.code() == StatusCode::kPermissionDenied) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"weft\", error=\"insufficient_scope\"");
  }
  return response;
}

}  // namespace weft
