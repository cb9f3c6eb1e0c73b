#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/scopes.h"
#include "base/result.h"

namespace weft {

// An RFC 7517 JSON Web Key Set (--auth-jwks): {"keys": [{"kty": "RSA", "kid": "...", "n": "...", "e": "..."},
// {"kty": "EC", "crv": "P-256", "x": "...", "y": "..."}, {"kty": "oct", "k": "..."}]}. Each key's algorithm is fixed
// by its type: RSA keys verify RS256 only, P-256 keys ES256 only, oct keys HS256 only; a key's "alg", when
// present, must agree, and a key whose "use" is not "sig" is skipped. The keys are OpenSSL objects. Immutable once
// parsed; thread-safe to use.
class JsonWebKeySet {
 public:
  static constexpr size_t kMaxFileBytes = size_t{1} << 20;
  static constexpr size_t kMaxKeys = 256;

  JsonWebKeySet();
  ~JsonWebKeySet();
  JsonWebKeySet(JsonWebKeySet&&) noexcept;
  JsonWebKeySet& operator=(JsonWebKeySet&&) noexcept;

  // InvalidArgument naming the key (index and kid) for malformed JSON or keys: missing members, bad base64url, an
  // RSA modulus under 2048 bits, a point not on P-256, an oct key under 32 bytes, an unsupported kty or crv.
  static Result<JsonWebKeySet> Parse(std::string_view json);
  size_t size() const;

  struct Key;  // defined in jwt.cc
  const std::vector<std::shared_ptr<const Key>>& keys() const { return keys_; }

 private:
  std::vector<std::shared_ptr<const Key>> keys_;
};

// What a JWT must say to be accepted.
struct JwtPolicy {
  std::string issuer;                   // `iss` must equal it; empty = not checked
  std::string audience;                 // `aud` (a string or an array of strings) must hold it; empty = not checked
  std::chrono::seconds clock_skew{60};  // allowed on exp and nbf
};

// What an accepted JWT says.
struct JwtClaims {
  std::string subject;     // `sub`, empty when absent
  std::string key_id;      // the header's `kid`, empty when absent
  ScopeSet scopes;         // from the `scope` claim (ScopeSet::ParseClaim); empty when absent
  int64_t expires_at = 0;  // `exp`, seconds since the epoch
};

// Verifies a compact JWS (RFC 7515/7519). The header's `alg` must be RS256, ES256 or HS256 ("none" and every other
// algorithm are refused) and must be the algorithm of the key that checks it: the key named by `kid`, or, without
// a kid, each key of that algorithm in turn. ES256 signatures are the raw 64-byte r||s of RFC 7518. `exp` is
// required; `exp` and `nbf` are checked against `now` (seconds since the epoch) with the policy's skew; `iss` and
// `aud` as the policy says. Any failure is Unauthenticated with a message saying which check failed (for logs; a
// client is told less). Bounded: a token over kMaxTokenBytes is refused before it is decoded.
inline constexpr size_t kMaxTokenBytes = 16 << 10;
Result<JwtClaims> VerifyJwt(std::string_view token, const JsonWebKeySet& keys, const JwtPolicy& policy, int64_t now);

}  // namespace weft
