#include "lifecycle/model_wish.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "repository/repository.h"

namespace weft {
namespace {

std::string Seconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ns) / 1e9);
  return text;
}

std::string JoinVersions(const std::vector<int64_t>& versions) {
  if (versions.empty()) return "none";
  std::string s;
  for (int64_t v : versions) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

}  // namespace

uint64_t VersionSource(uint64_t config_source, uint64_t fingerprint) {
  return Fnv1a(&fingerprint, sizeof(fingerprint), config_source);
}

Wish WishFromScan(const WishInput& input, const WishOptions& options) {
  Wish out;
  const ModelDirScan& scan = *input.scan;
  ModelWish& wish = out.wish;
  if (!scan.exists) {
    wish.serve = false;
    return out;
  }
  const int64_t settle = options.settle.count();
  auto settled_at = [&](int64_t changed) { return changed + settle; };
  auto note_recheck = [&](int64_t at) {
    out.recheck_at_ns = out.recheck_at_ns == 0 ? at : std::min(out.recheck_at_ns, at);
  };
  if (settle > 0 && input.config_change_ns > 0 && input.now_ns < settled_at(input.config_change_ns)) {
    wish.settling = true;
    note_recheck(settled_at(input.config_change_ns));
    return out;
  }
  if (!scan.error.ok()) {
    wish.problem = scan.error;
    return out;
  }
  if (!input.config->ok()) {
    wish.problem = input.config->status();
    return out;
  }
  const ModelConfig& config = **input.config;

  std::vector<int64_t> present;
  for (const VersionDirScan& v : scan.versions) present.push_back(v.version);
  std::vector<int64_t> selected = SelectVersions(config.version_policy, present);
  for (int64_t v : input.also) {
    if (std::binary_search(present.begin(), present.end(), v)) selected.push_back(v);
  }
  std::sort(selected.begin(), selected.end());
  selected.erase(std::unique(selected.begin(), selected.end()), selected.end());
  if (selected.empty()) {
    wish.problem = NotFound(scan.name + ": no version directory matches the version policy (" +
                            VersionPolicyToString(config.version_policy) +
                            "; version directories: " + JoinVersions(present) + ")");
    return out;
  }
  for (const VersionDirScan& v : scan.versions) {
    if (!std::binary_search(selected.begin(), selected.end(), v.version)) continue;
    WantedVersion wanted;
    wanted.version = v.version;
    wanted.source = VersionSource(input.config_source, v.fingerprint);
    if (input.excluded && input.excluded->first == v.version && input.excluded->second == wanted.source) continue;
    if (!v.error.ok()) {
      wanted.readiness = WantedVersion::Readiness::kRefused;
      wanted.why = v.error;
    } else if (settle > 0 && input.now_ns < settled_at(v.newest_change_ns)) {
      wanted.readiness = WantedVersion::Readiness::kSettling;
      wanted.why = Unavailable("its files changed " + Seconds(input.now_ns - v.newest_change_ns) +
                               " ago; it loads once they have been quiet for " + Seconds(settle));
      note_recheck(settled_at(v.newest_change_ns));
    } else if (options.require_checksums && !v.has_manifest) {
      wanted.readiness = WantedVersion::Readiness::kRefused;
      wanted.why =
          Unavailable("no SHA256SUMS in " + scan.name + "/" + std::to_string(v.version) + " (--require-checksums)");
    }
    wish.versions.push_back(std::move(wanted));
  }
  return out;
}

}  // namespace weft
