#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/scopes.h"
#include "base/result.h"

namespace weft {

// A token bucket's settings: `rate` tokens per second, at most `burst` held. rate 0 = no limit.
struct RateLimit {
  double rate = 0;
  double burst = 0;
  bool limited() const { return rate > 0; }
  friend bool operator==(const RateLimit&, const RateLimit&) = default;
};

// Parses "RATE[:BURST]" (--rate-limit): RATE a positive finite number of requests per second, BURST a number
// >= 1 (default: max(1, RATE)). InvalidArgument otherwise.
Result<RateLimit> ParseRateLimit(std::string_view text);

// One client of the key file. The server holds the SHA-256 of the secret, never the secret.
struct ApiKey {
  std::string id;                                 // names the client in logs, metrics and rate limits
  std::optional<std::array<uint8_t, 32>> sha256;  // of the secret sent as a bearer token
  std::string subject;                            // or: a verified client certificate's subject (mTLS)
  ScopeSet scopes;
  std::optional<RateLimit> rate_limit;  // its own bucket; none = the server's default (--rate-limit)
};

// The key file (--auth-keys), JSON:
//   {"keys": [{"id": "cam-ingest", "sha256": "<64 hex digits>", "scopes": ["infer:detector"],
//              "rate": 100, "burst": 200},
//             {"id": "camera-7", "subject": "CN=camera-7,O=acme", "scopes": ["infer"]}]}
// Each key has an id (unique, 1-128 printable ASCII characters), and a sha256 or a subject (or both); "scopes" is
// a list of scope strings (ScopeSet::Parse), required ([] for a key that may reach health only); "rate" (> 0) and
// "burst" (>= 1, default max(1, rate)) are optional, burst only with rate. Unknown fields are refused. Immutable
// once parsed; thread-safe to read.
class ApiKeySet {
 public:
  static constexpr size_t kMaxFileBytes = size_t{4} << 20;
  static constexpr size_t kMaxKeys = 100000;

  ApiKeySet() = default;
  // InvalidArgument naming the key (by index and id) and the field for anything malformed, a duplicate id, or a
  // duplicate sha256 or subject.
  static Result<ApiKeySet> Parse(std::string_view json);

  // The key whose sha256 is SHA-256(secret): a binary search over the digests, O(log n). Its timing depends on the
  // digest of what was sent, never on a secret's bytes. Null when none matches.
  const ApiKey* FindBySecret(std::string_view secret) const;
  // The key whose subject is exactly `subject`; null when none.
  const ApiKey* FindBySubject(std::string_view subject) const;
  size_t size() const { return keys_.size(); }
  const std::vector<ApiKey>& keys() const { return keys_; }

 private:
  std::vector<ApiKey> keys_;
  std::vector<size_t> by_subject_;  // indexes into keys_ of the keys with a subject, sorted by subject
  std::vector<size_t> by_digest_;   // indexes into keys_ of the keys with a sha256, sorted by it
};

// SHA-256 of `data` (OpenSSL), and as 64 lowercase hex digits.
std::array<uint8_t, 32> Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);

}  // namespace weft
