#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rollout/rollout_decision.h"
#include "rollout/rollout_spec.h"

namespace weft {

// What GET /v2/models/{m}/rollout answers: a rollout in progress, or the model's last one once it has ended.

// One decision of a rollout, with the figures it was taken on.
struct RolloutDecisionRecord {
  std::string time;    // UTC, RFC 3339 with milliseconds
  size_t stage = 0;    // the stage it was taken in (0-based)
  std::string action;  // "start", "next_stage", "promote", "rollback", "abort", "candidate_failed"
  std::string reason;
  StageFigures figures;
};

struct RolloutReport {
  std::string model;
  // "loading" (the candidate is loading), "shadow", "canary" (the current stage's kind), "promoted", "rolled_back".
  std::string state;
  bool automatic = false;  // started by the config's policy when the version appeared, not by the API
  int64_t primary = 0;
  int64_t candidate = 0;
  size_t stage = 0;  // the current stage (0-based); once ended, the stage it ended in
  RolloutSpec spec;
  StageFigures figures;  // the current stage's so far; once ended, the last stage's at the end
  std::string started;   // UTC, RFC 3339 with milliseconds
  std::string ended;     // empty while in progress
  std::vector<RolloutDecisionRecord> decisions;
};

}  // namespace weft
