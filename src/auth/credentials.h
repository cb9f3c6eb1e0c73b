#pragma once

#include <optional>
#include <string_view>

#include "base/result.h"

namespace weft {

// The token of an `Authorization: Bearer <token>` header (HTTP) or `authorization` metadata (gRPC): the scheme is
// matched without regard to case (RFC 7235), spaces around the token are dropped, and the token must be a
// non-empty run of RFC 6750 token68 characters (letters, digits, "-._~+/" and trailing "="). nullopt when the
// value is empty (no credential); Unauthenticated for another scheme or a malformed token. The view points into
// `authorization`.
Result<std::optional<std::string_view>> ParseBearer(std::string_view authorization);

// Whether a bearer token has a JWT's shape: three non-empty base64url segments joined by two dots. API key secrets
// never have it (a key's secret is base64url or hex without dots), so the shape chooses how a token is checked.
bool LooksLikeJwt(std::string_view token);

}  // namespace weft
