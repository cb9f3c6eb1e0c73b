#include "lifecycle/version_plan.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace weft {
namespace {

using Phase = VersionCopy::Phase;
using Readiness = WantedVersion::Readiness;

// The copy of (version, source) that is not draining, if any. A draining copy never comes back: a wish for its
// source again loads a new copy.
std::optional<size_t> FindCopy(std::span<const VersionCopy> copies, int64_t version, uint64_t source) {
  for (size_t i = 0; i < copies.size(); ++i) {
    const VersionCopy& c = copies[i];
    if (c.version == version && c.source == source && c.phase != Phase::kDraining) return i;
  }
  return std::nullopt;
}

bool Wanted(const ModelWish& wish, const VersionCopy& copy) {
  if (!wish.serve) return false;
  return std::any_of(wish.versions.begin(), wish.versions.end(),
                     [&](const WantedVersion& w) { return w.version == copy.version && w.source == copy.source; });
}

// A wanted version not finished: settling, or loading (a copy loading, or none yet, about to be loaded).
bool Pending(const ModelWish& wish, std::span<const VersionCopy> copies) {
  if (!wish.serve) return false;
  if (wish.settling) return true;
  for (const WantedVersion& w : wish.versions) {
    std::optional<size_t> copy = FindCopy(copies, w.version, w.source);
    if (copy) {
      if (copies[*copy].phase == Phase::kLoading) return true;
    } else if (w.readiness != Readiness::kRefused) {
      return true;
    }
  }
  return false;
}

bool AnyServing(std::span<const VersionCopy> copies) {
  return std::any_of(copies.begin(), copies.end(), [](const VersionCopy& c) { return c.phase == Phase::kServing; });
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// The failures of the wish: its problem, then each wanted copy that failed or was refused, by version.
std::vector<std::string> Failures(const ModelWish& wish, std::span<const VersionCopy> copies) {
  std::vector<std::string> out;
  if (!wish.problem.ok()) out.push_back(wish.problem.message());
  if (!wish.serve) return out;
  for (const WantedVersion& w : wish.versions) {
    std::optional<size_t> copy = FindCopy(copies, w.version, w.source);
    const Status* why = nullptr;
    if (copy && copies[*copy].phase == Phase::kFailed) why = &copies[*copy].reason;
    if (!copy && w.readiness == Readiness::kRefused) why = &w.why;
    if (why) out.push_back("version " + std::to_string(w.version) + ": " + why->message());
  }
  return out;
}

}  // namespace

ModelSteps PlanModel(const ModelWish& wish, std::span<const VersionCopy> copies) {
  ModelSteps steps;
  if (wish.serve && wish.settling) return steps;  // nothing is known yet: change nothing
  if (wish.serve) {
    for (const WantedVersion& w : wish.versions) {
      if (FindCopy(copies, w.version, w.source)) continue;
      if (w.readiness == Readiness::kLoadable) steps.load.push_back(w);
      if (w.readiness == Readiness::kRefused) steps.refuse.push_back(w);
    }
  }
  steps.settled = !Pending(wish, copies);

  for (size_t i = 0; i < copies.size(); ++i) {
    const VersionCopy& c = copies[i];
    if (Wanted(wish, c)) continue;
    // Loading copies finish first (a load cannot be interrupted); the next plan retires them.
    if (c.phase == Phase::kReady || c.phase == Phase::kFailed) steps.retire.push_back(i);
    if (c.phase == Phase::kServing && !wish.serve) steps.retire.push_back(i);
  }
  if (!wish.serve) {
    steps.swap = AnyServing(copies);
    return steps;
  }
  if (!steps.settled || wish.versions.empty()) return steps;

  std::vector<size_t> serve;
  for (const WantedVersion& w : wish.versions) {
    std::optional<size_t> copy = FindCopy(copies, w.version, w.source);
    if (copy && (copies[*copy].phase == Phase::kReady || copies[*copy].phase == Phase::kServing))
      serve.push_back(*copy);
  }
  if (serve.empty()) return steps;  // every wanted copy failed: what serves keeps serving
  std::vector<size_t> serving;
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].phase == Phase::kServing) serving.push_back(i);
  }
  if (serve == serving) return steps;  // both ascending by index
  steps.swap = true;
  steps.serve = serve;
  for (size_t i : serving) {
    if (std::find(serve.begin(), serve.end(), i) == serve.end()) steps.retire.push_back(i);
  }
  std::sort(steps.retire.begin(), steps.retire.end());
  steps.retire.erase(std::unique(steps.retire.begin(), steps.retire.end()), steps.retire.end());
  return steps;
}

Status WishOutcome(const ModelWish& wish, std::span<const VersionCopy> copies) {
  std::vector<std::string> failures = Failures(wish, copies);
  if (failures.empty()) return Status::Ok();
  const bool serving = AnyServing(copies);
  return InvalidArgument(Join(failures) + (serving ? " (the versions that served before still serve)" : ""));
}

std::vector<VersionReport> ReportVersions(const ModelWish& wish, std::span<const VersionCopy> copies) {
  struct Seen {
    const VersionCopy* serving = nullptr;
    const VersionCopy* loading = nullptr;
    const VersionCopy* ready = nullptr;
    const VersionCopy* draining = nullptr;
    const VersionCopy* failed = nullptr;
    const WantedVersion* settling = nullptr;
  };
  std::map<int64_t, Seen> by_version;
  for (const VersionCopy& c : copies) {
    Seen& seen = by_version[c.version];
    switch (c.phase) {
      case Phase::kServing: seen.serving = &c; break;
      case Phase::kLoading: seen.loading = &c; break;
      case Phase::kReady: seen.ready = &c; break;
      case Phase::kDraining: seen.draining = &c; break;
      case Phase::kFailed: seen.failed = &c; break;
    }
  }
  if (wish.serve) {
    for (const WantedVersion& w : wish.versions) {
      if (FindCopy(copies, w.version, w.source)) continue;
      if (w.readiness == Readiness::kSettling) by_version[w.version].settling = &w;
    }
  }
  std::vector<VersionReport> out;
  for (const auto& [version, seen] : by_version) {
    VersionReport report{version, VersionState::kUnavailable, ""};
    if (seen.serving) {
      report.state = VersionState::kReady;
      if (seen.loading || seen.ready || seen.settling) {
        report.reason = "serving; a new copy is loading";
      } else if (seen.failed && Wanted(wish, *seen.failed)) {
        report.reason = "serving; the new copy failed: " + seen.failed->reason.message();
      }
    } else if (seen.loading || seen.ready) {
      report.state = VersionState::kLoading;
    } else if (seen.settling) {
      report.state = VersionState::kLoading;
      report.reason = seen.settling->why.message();
    } else if (seen.draining) {
      report.state = VersionState::kUnloading;
    } else if (seen.failed) {
      report.reason = seen.failed->reason.message();
    } else {
      continue;
    }
    if (report.state == VersionState::kReady && !wish.problem.ok()) {
      report.reason += (report.reason.empty() ? "serving; " : "; ") + wish.problem.message();
    }
    out.push_back(std::move(report));
  }
  return out;
}

Status UnavailableReason(const ModelWish& wish, std::span<const VersionCopy> copies) {
  if (AnyServing(copies)) return Status::Ok();
  const bool draining =
      std::any_of(copies.begin(), copies.end(), [](const VersionCopy& c) { return c.phase == Phase::kDraining; });
  if (!wish.serve) return Unavailable(draining ? "unloading" : "unloaded");
  if (Pending(wish, copies)) return Unavailable("loading");
  std::vector<std::string> failures = Failures(wish, copies);
  if (failures.empty()) return Unavailable("no version is loaded");
  return Unavailable(Join(failures));
}

bool ModelFailed(const ModelWish& wish, std::span<const VersionCopy> copies) {
  return wish.serve && !Pending(wish, copies) && !AnyServing(copies);
}

}  // namespace weft
