#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "base/result.h"
#include "lifecycle/version_plan.h"
#include "model/model_config.h"
#include "repository/repository_scan.h"

namespace weft {

// How the files of a model directory become a ModelWish: the version policy picks the versions, and each is
// loadable once its files have been quiet for the settle time (so that a directory being copied is never loaded half
// way) and, under --require-checksums, when it has a SHA256SUMS (which the load then verifies). Pure: the scan, the
// parsed config and the time come in.

struct WishOptions {
  std::chrono::nanoseconds settle{0};  // quiet time a version directory and the config need; 0 = none
  bool require_checksums = false;
};

struct WishInput {
  const ModelDirScan* scan = nullptr;
  // The config the versions load with: parsed from the scan's text (or the API's override), or why not. Unused
  // when the directory is gone.
  const Result<ModelConfig>* config = nullptr;
  uint64_t config_source = 0;  // a hash of the config's text: part of every version's source
  // The last change of the config: its file's, or 0 for an override (an API call is complete when it arrives).
  int64_t config_change_ns = 0;
  int64_t now_ns = 0;  // CLOCK_REALTIME, the clock of file times
  // Versions wanted beside the policy's, when their directories exist: a rollout's primary and candidate, the
  // version a rollout left serving. Ascending or not; duplicates are fine.
  std::vector<int64_t> also;
  // A version not to load while its source is this one: a candidate a rollout rolled back and unloaded.
  std::optional<std::pair<int64_t, uint64_t>> excluded;
};

struct Wish {
  ModelWish wish;
  // When a settling version or config will have been quiet long enough (ns, CLOCK_REALTIME); 0 = nothing settles.
  int64_t recheck_at_ns = 0;
};

Wish WishFromScan(const WishInput& input, const WishOptions& options);

// The source of version `version` loaded with a config of source `config_source` from a directory of fingerprint
// `fingerprint`.
uint64_t VersionSource(uint64_t config_source, uint64_t fingerprint);

}  // namespace weft
