#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"

namespace weft {

// What a rollout of a new version does: its stages, what each must show, and what happens on rollback. Plain
// values, thread-compatible. The JSON of POST /v2/models/{m}/rollout and the config's weft.rollout.* parameters
// both end up here (docs/rollouts.md).

struct RolloutStage {
  enum class Kind {
    kShadow,  // a share of the primary's requests is copied to the candidate; its answers are compared, then dropped
    kCanary,  // a share of the requests is answered by the candidate
  };
  Kind kind = Kind::kCanary;
  double share = 0;  // in (0, 1]: of the primary's requests copied (shadow), of the requests answered (canary)
  // The stage passes only with this many candidate answers (canary) or comparisons (shadow) ...
  uint64_t min_requests = 100;
  // ... and after this long.
  std::chrono::milliseconds min_duration{10000};

  friend bool operator==(const RolloutStage&, const RolloutStage&) = default;
};

// "shadow", "canary".
std::string_view RolloutStageKindName(RolloutStage::Kind kind);

// What every stage must show against the primary over the same window. A criterion is judged once the stage has its
// minimum of requests; an error rate that can no longer pass is judged at once.
struct RolloutCriteria {
  // The candidate's error rate (every code but CANCELLED, the client gone, and ABORTED, a superseded frame) minus the
  // primary's over the same window: errors the clients cause weigh on both arms alike.
  double max_error_rate_increase = 0.01;
  // Canary stages: the candidate's p99 latency over the primary's (Submit to answer, in the engine).
  double max_p99_ratio = 1.5;
  // The share of compared answers that diverge: some element differs from the primary's by more than the absolute
  // tolerance (abs_tolerance, or twice the noise floor when that is larger) and by more than rel_tolerance of the
  // primary's value; an answer whose outputs differ in names, types or shapes diverges.
  double max_divergence_rate = 0.01;
  double abs_tolerance = 1e-5;
  double rel_tolerance = 1e-3;
  // Classification-like outputs (floating point, last dimension of 2 or more): the share of rows whose arg max
  // agrees.
  double min_top1_agreement = 0.99;

  friend bool operator==(const RolloutCriteria&, const RolloutCriteria&) = default;
};

// shadow 100% (200 comparisons), then canary 5% (100 answers), 25% (200), 50% (400); 10 s each at least.
std::vector<RolloutStage> DefaultRolloutStages();

struct RolloutSpec {
  // The version to roll out. 0 in a config's policy: whichever new version appears.
  int64_t candidate = 0;
  std::vector<RolloutStage> stages = DefaultRolloutStages();
  RolloutCriteria criteria;
  // A request parameter whose value keeps a client on one arm in canary stages (the same value, the same version, and
  // an arm that grows keeps who it had). Empty: each request is drawn on its own. HTTP's `weft-route-key` header and
  // gRPC's `weft-route-key` metadata fill the parameter `weft_route_key`.
  std::string sticky_key;
  // Shadow copies in flight at once; a copy beyond it is dropped (and counted), never queued.
  uint32_t shadow_max_in_flight = 4;
  // On rollback, unload the candidate (and do not load these files again) instead of keeping it loaded and unused.
  bool unload_on_rollback = false;

  friend bool operator==(const RolloutSpec&, const RolloutSpec&) = default;
};

struct RolloutLimits {
  static constexpr size_t kMaxStages = 16;
  static constexpr uint64_t kMaxMinRequests = 10'000'000;
  static constexpr std::chrono::milliseconds kMaxMinDuration = std::chrono::hours(24 * 7);
  static constexpr uint32_t kMaxShadowInFlight = 4096;
  static constexpr size_t kMaxStickyKey = 256;
};

// Ok, or InvalidArgument naming the first field out of range (shares in (0, 1], rates in [0, 1], ratios >= 1,
// tolerances >= 0 and finite, at least one stage, the limits above).
Status ValidateRolloutSpec(const RolloutSpec& spec);

// The model's rollout policy from its config's parameters (string values, as Triton's config gives them), or
// nullopt when it sets no weft.rollout.* key (new versions then take over as they load, as before):
//   weft.rollout.stages            "shadow:1.0, canary:0.05, canary:0.25, canary:0.5" (kind:share, in order)
//   weft.rollout.min_requests      per stage (default 100)
//   weft.rollout.min_duration_ms   per stage (default 10000)
//   weft.rollout.max_error_rate_increase, weft.rollout.max_p99_ratio, weft.rollout.max_divergence_rate,
//   weft.rollout.abs_tolerance, weft.rollout.rel_tolerance, weft.rollout.min_top1_agreement
//   weft.rollout.sticky_key, weft.rollout.shadow_max_in_flight
//   weft.rollout.on_rollback       "keep" (default) or "unload"
// A key that is not one of these, a value that does not parse or is out of range: InvalidArgument naming it.
Result<std::optional<RolloutSpec>> ParseRolloutPolicy(const ModelConfig& config);

}  // namespace weft
