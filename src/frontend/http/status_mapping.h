#pragma once

#include "base/status.h"
#include "frontend/http/http_server.h"

namespace weft {

// The HTTP status for an error code: the one place where this frontend maps errors to HTTP.
unsigned HttpStatusFor(StatusCode code);

// The longest error message an answer carries; longer ones are cut with "... (N more bytes)".
inline constexpr size_t kMaxErrorMessageBytes = 4096;

// {"error": message} with the mapped status, and Retry-After for 429. Keeps the connection open. The message is
// cut to kMaxErrorMessageBytes and made valid UTF-8.
HttpResponse ErrorResponse(const Status& status);

// ErrorResponse for a refusal by the gatekeeper (docs/security.md): 401 and 403 also carry WWW-Authenticate
// (RFC 6750: the Bearer scheme; insufficient_scope for 403).
HttpResponse AuthErrorResponse(const Status& status);

// {"error": message} with a status that no StatusCode produces (404 for a route, 405, 413).
HttpResponse ErrorResponse(unsigned http_status, std::string_view message);

}  // namespace weft
