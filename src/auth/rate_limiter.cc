#include "auth/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace weft {
namespace {

// A Retry-After longer than this says nothing more useful, and the bound keeps the conversion to integer
// nanoseconds in range for any positive rate.
constexpr double kMaxWaitSeconds = 365.0 * 24 * 3600;
// Refills add up in floating point: a client that waits exactly the time it was told may find 0.9999999999 tokens.
constexpr double kTokenTolerance = 1e-9;

// A burst below one token would never allow a request; ParseRateLimit refuses it, so it can only come from code.
double EffectiveBurst(const RateLimit& limit) { return std::max(1.0, limit.burst); }

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

std::chrono::nanoseconds TakeToken(TokenBucket* bucket, const RateLimit& limit, SteadyTime now) {
  if (!limit.limited()) return std::chrono::nanoseconds(0);
  const double burst = EffectiveBurst(limit);
  if (!bucket->started) {
    bucket->tokens = burst;
    bucket->last = now;
    bucket->started = true;
  } else if (now > bucket->last) {
    // A time before `last` (callers read the clock before they take the lock) refills nothing.
    const double elapsed = std::chrono::duration<double>(now - bucket->last).count();
    bucket->tokens = std::min(burst, bucket->tokens + elapsed * limit.rate);
    bucket->last = now;
  }
  bucket->tokens = std::min(bucket->tokens, burst);  // the limit may have shrunk since the bucket filled
  if (bucket->tokens >= 1 - kTokenTolerance) {
    bucket->tokens = std::max(0.0, bucket->tokens - 1);
    return std::chrono::nanoseconds(0);
  }
  const double wait_seconds = std::min((1 - bucket->tokens) / limit.rate, kMaxWaitSeconds);
  return std::chrono::nanoseconds(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_seconds * 1e9))));
}

struct RateLimiter::Shard {
  struct Entry {
    TokenBucket bucket;
    RateLimit limit;  // the one last used, to tell whether the bucket has refilled
  };

  // Makes room for at least one more bucket: drops the buckets that are full again, then, while the shard is
  // still above seven eighths of `max_entries`, the least recently used. Sweeping that far keeps the cost per new
  // identity constant on average, even when every bucket is in use.
  void MakeRoom(size_t max_entries, SteadyTime now) {
    std::erase_if(buckets, [now](const auto& item) {
      const Entry& entry = item.second;
      const double elapsed =
          now > entry.bucket.last ? std::chrono::duration<double>(now - entry.bucket.last).count() : 0.0;
      return entry.bucket.tokens + elapsed * entry.limit.rate >= EffectiveBurst(entry.limit);
    });
    const size_t target = max_entries - std::max<size_t>(1, max_entries / 8);
    if (buckets.size() <= target) return;
    std::vector<std::pair<SteadyTime, const std::string*>> by_age;
    by_age.reserve(buckets.size());
    for (const auto& [identity, entry] : buckets) by_age.emplace_back(entry.bucket.last, &identity);
    const size_t drop = buckets.size() - target;
    std::nth_element(by_age.begin(), by_age.begin() + static_cast<ptrdiff_t>(drop - 1), by_age.end());
    std::vector<std::string> oldest;
    oldest.reserve(drop);
    for (size_t i = 0; i < drop; ++i) oldest.push_back(*by_age[i].second);
    for (const std::string& identity : oldest) buckets.erase(identity);
  }

  std::mutex mu;
  std::unordered_map<std::string, Entry, StringHash, std::equal_to<>> buckets;  // guarded by mu
};

// The bound is spread evenly over the shards (rounded up), so a shard never waits on another to make room.
RateLimiter::RateLimiter(size_t max_identities)
    : max_per_shard_(std::max<size_t>(1, (max_identities + kShards - 1) / kShards)),
      shards_(std::make_unique<Shard[]>(kShards)) {}

RateLimiter::~RateLimiter() = default;

std::chrono::nanoseconds RateLimiter::Acquire(std::string_view identity, const RateLimit& limit, SteadyTime now) {
  if (!limit.limited()) return std::chrono::nanoseconds(0);
  // The high bits pick the shard; the map's buckets use the hash modulo a prime, so the two stay independent.
  Shard& shard = shards_[(StringHash{}(identity) >> 32) % kShards];
  std::lock_guard lock(shard.mu);
  auto it = shard.buckets.find(identity);
  if (it == shard.buckets.end()) {
    if (shard.buckets.size() >= max_per_shard_) shard.MakeRoom(max_per_shard_, now);
    it = shard.buckets.emplace(std::string(identity), Shard::Entry{}).first;
  }
  it->second.limit = limit;
  return TakeToken(&it->second.bucket, limit, now);
}

size_t RateLimiter::size() const {
  size_t total = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard lock(shards_[i].mu);
    total += shards_[i].buckets.size();
  }
  return total;
}

}  // namespace weft
