#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "auth/api_keys.h"
#include "base/clock.h"

namespace weft {

// One token bucket. Starts full.
struct TokenBucket {
  double tokens = 0;
  SteadyTime last{};
  bool started = false;
};

// Refills `bucket` for the time since its last use (at most up to `limit.burst`), then takes one token if there
// is one. Returns zero when taken, otherwise how long until a token will be there (the bucket is then left
// unchanged but for the refill). Pure: a function of the bucket, the limit and `now`.
std::chrono::nanoseconds TakeToken(TokenBucket* bucket, const RateLimit& limit, SteadyTime now);

// Token buckets by identity (a key id, a JWT subject, a certificate subject or a peer address). Thread-safe: the
// buckets are spread over shards, each with its own lock, held only to update one bucket. The number of buckets is
// bounded: past `max_identities`, buckets that have refilled completely are dropped (they hold nothing a new one
// would not), and if none has, the oldest shard entries go.
class RateLimiter {
 public:
  explicit RateLimiter(size_t max_identities = 100000);
  ~RateLimiter();
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes a token from `identity`'s bucket under `limit` (a limit that is not limited() always allows). Zero when
  // allowed; otherwise the wait until a token will be there, for Retry-After.
  std::chrono::nanoseconds Acquire(std::string_view identity, const RateLimit& limit, SteadyTime now);
  size_t size() const;  // buckets held now

 private:
  struct Shard;
  static constexpr size_t kShards = 16;
  const size_t max_per_shard_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace weft
