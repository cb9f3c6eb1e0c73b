#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace weft {

// The pure decisions of the live repository, for one model: given what should serve (a ModelWish, from the
// repository's files or the API) and what exists (the copies loaded, loading, serving, draining or failed), what to
// do next. No threads, no clock: the caller applies the steps and asks again whenever anything changes.
//
// The rule is TF Serving's availability-preserving policy, made transactional: new copies load beside the serving
// ones; the serving set changes in one step, only once every wanted copy has finished loading and at least one of
// them is ready; a copy leaves service only in that step (or when the model is removed). A wanted copy that fails
// leaves the serving set as it was, unless another wanted copy is ready.

// One load of one version from one source. The source names what was loaded (the config text and the version
// directory's fingerprint): the same version loaded again from new files is another copy, loaded beside the one
// that serves.
struct VersionCopy {
  enum class Phase {
    kLoading,   // checksums, instances and warm-up under way
    kReady,     // loaded and warmed, not serving yet
    kServing,   // in the routing table
    kDraining,  // out of the routing table; finishing the requests it took
    kFailed,    // did not load; `reason` says why
  };
  int64_t version = 0;
  uint64_t source = 0;
  Phase phase = Phase::kLoading;
  Status reason;
};

// A version that should serve, and whether it may be loaded now.
struct WantedVersion {
  enum class Readiness {
    kLoadable,  // load it
    kSettling,  // its files are still being written: wait (`why` says how long)
    kRefused,   // it must not load (`why`): no manifest under --require-checksums, a directory past the limits
  };
  int64_t version = 0;
  uint64_t source = 0;
  Readiness readiness = Readiness::kLoadable;
  Status why;
};

// What the sources say about one model.
struct ModelWish {
  bool serve = true;                    // false: take every copy out of service (the model is removed or unloaded)
  std::vector<WantedVersion> versions;  // ascending by version
  // Why `versions` is empty or not what the files hold: a config that does not load, a policy that selects nothing.
  // The copies that serve keep serving.
  Status problem;
  // The config file itself is still being written: nothing is decided until it has settled (the model counts as
  // loading, and what serves keeps serving).
  bool settling = false;
};

// The next steps for one model. Indices refer to the copies given to PlanModel.
struct ModelSteps {
  std::vector<WantedVersion> load;    // start loading these: no copy of the (version, source) exists
  std::vector<WantedVersion> refuse;  // record these as failed, without loading
  bool swap = false;                  // make `serve` the serving set, in one step
  std::vector<size_t> serve;          // with swap: the copies that serve from now on (ready or serving ones)
  std::vector<size_t> retire;         // take out of service (serving, ready) or forget (failed)
  // Nothing wanted is loading or settling: the model has reached what its wish asks for, as far as it can.
  bool settled = false;
};

ModelSteps PlanModel(const ModelWish& wish, std::span<const VersionCopy> copies);

// Whether the latest wish came true: Ok when every wanted version serves; otherwise the wish's problem and the
// failures of wanted copies (the old copies keep serving). Meaningful once PlanModel says settled.
Status WishOutcome(const ModelWish& wish, std::span<const VersionCopy> copies);

// The repository index's view of the model: one report per version number (a serving copy wins, then a loading
// one, a draining one, a failed one), ascending.
std::vector<VersionReport> ReportVersions(const ModelWish& wish, std::span<const VersionCopy> copies);

// Why nothing serves (when no copy serves): unloaded, loading, or the failures. Ok when a copy serves.
Status UnavailableReason(const ModelWish& wish, std::span<const VersionCopy> copies);

// The model should serve, nothing is loading and nothing serves: with strict readiness, the server is not ready.
bool ModelFailed(const ModelWish& wish, std::span<const VersionCopy> copies);

}  // namespace weft
