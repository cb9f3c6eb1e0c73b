#include "lifecycle/model_wish.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft {
namespace {

using Readiness = WantedVersion::Readiness;
using ::testing::HasSubstr;

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kNow = 1'700'000'000 * kSecond;

ModelConfig LatestConfig(int n) {
  ModelConfig config;
  config.name = "m";
  config.version_policy.kind = VersionPolicyConfig::Kind::kLatest;
  config.version_policy.num_versions = n;
  return config;
}

ModelDirScan Scan(std::vector<VersionDirScan> versions) {
  ModelDirScan scan;
  scan.name = "m";
  scan.exists = true;
  scan.config = "name: \"m\"";
  scan.versions = std::move(versions);
  return scan;
}

VersionDirScan Dir(int64_t version, uint64_t fingerprint, int64_t changed = kNow - 60 * kSecond,
                   bool manifest = false) {
  VersionDirScan v;
  v.version = version;
  v.fingerprint = fingerprint;
  v.newest_change_ns = changed;
  v.has_manifest = manifest;
  return v;
}

Wish WishOf(const ModelDirScan& scan, const Result<ModelConfig>& config, WishOptions options = {},
            uint64_t config_source = 7, int64_t config_changed = kNow - 60 * kSecond) {
  return WishFromScan({.scan = &scan,
                       .config = &config,
                       .config_source = config_source,
                       .config_change_ns = config_changed,
                       .now_ns = kNow},
                      options);
}

TEST(WishFromScanTest, AGoneDirectoryMeansUnload) {
  ModelDirScan scan;
  scan.name = "m";
  Result<ModelConfig> config = LatestConfig(1);
  EXPECT_FALSE(WishOf(scan, config).wish.serve);
}

TEST(WishFromScanTest, ThePolicyPicksTheVersions) {
  ModelDirScan scan = Scan({Dir(1, 100), Dir(2, 200), Dir(3, 300)});
  Result<ModelConfig> latest2 = LatestConfig(2);
  Wish wish = WishOf(scan, latest2);
  ASSERT_EQ(wish.wish.versions.size(), 2u);
  EXPECT_EQ(wish.wish.versions[0].version, 2);
  EXPECT_EQ(wish.wish.versions[1].version, 3);
  EXPECT_EQ(wish.wish.versions[1].readiness, Readiness::kLoadable);
  EXPECT_EQ(wish.recheck_at_ns, 0);
  EXPECT_TRUE(wish.wish.problem.ok());
}

TEST(WishFromScanTest, ASourceChangesWithTheFilesOrTheConfig) {
  ModelDirScan scan = Scan({Dir(1, 100)});
  Result<ModelConfig> config = LatestConfig(1);
  const uint64_t a = WishOf(scan, config, {}, 7).wish.versions[0].source;
  const uint64_t b = WishOf(scan, config, {}, 8).wish.versions[0].source;
  scan.versions[0].fingerprint = 101;
  const uint64_t c = WishOf(scan, config, {}, 7).wish.versions[0].source;
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, VersionSource(7, 100));
}

TEST(WishFromScanTest, APolicyThatSelectsNothingIsAProblemNamingWhatIsThere) {
  ModelDirScan scan = Scan({Dir(1, 100)});
  ModelConfig specific = LatestConfig(1);
  specific.version_policy.kind = VersionPolicyConfig::Kind::kSpecific;
  specific.version_policy.versions = {4};
  Result<ModelConfig> config = specific;
  Wish wish = WishOf(scan, config);
  EXPECT_TRUE(wish.wish.versions.empty());
  EXPECT_THAT(wish.wish.problem.message(), HasSubstr("specific [4]; version directories: 1"));
}

TEST(WishFromScanTest, AConfigErrorIsTheProblem) {
  ModelDirScan scan = Scan({Dir(1, 100)});
  Result<ModelConfig> config = InvalidArgument("m/config.pbtxt:2:1: bad");
  Wish wish = WishOf(scan, config);
  EXPECT_TRUE(wish.wish.serve);
  EXPECT_TRUE(wish.wish.versions.empty());
  EXPECT_EQ(wish.wish.problem.message(), "m/config.pbtxt:2:1: bad");
}

TEST(WishFromScanTest, RecentlyWrittenVersionsSettleFirst) {
  ModelDirScan scan = Scan({Dir(1, 100), Dir(2, 200, kNow - kSecond / 4)});
  Result<ModelConfig> config = LatestConfig(2);
  Wish wish = WishOf(scan, config, {.settle = std::chrono::seconds(1)});
  ASSERT_EQ(wish.wish.versions.size(), 2u);
  EXPECT_EQ(wish.wish.versions[0].readiness, Readiness::kLoadable);
  EXPECT_EQ(wish.wish.versions[1].readiness, Readiness::kSettling);
  EXPECT_THAT(wish.wish.versions[1].why.message(), HasSubstr("quiet for 1.0 s"));
  EXPECT_EQ(wish.recheck_at_ns, kNow - kSecond / 4 + kSecond);

  // Without a settle time (start-up, API loads) the same files load at once.
  wish = WishOf(scan, config);
  EXPECT_EQ(wish.wish.versions[1].readiness, Readiness::kLoadable);
}

TEST(WishFromScanTest, ARecentlyWrittenConfigSettlesTheWholeModel) {
  ModelDirScan scan = Scan({Dir(1, 100)});
  Result<ModelConfig> config = InvalidArgument("half written");
  Wish wish = WishOf(scan, config, {.settle = std::chrono::seconds(2)}, 7, kNow - kSecond);
  EXPECT_TRUE(wish.wish.settling);
  EXPECT_TRUE(wish.wish.problem.ok());
  EXPECT_EQ(wish.recheck_at_ns, kNow + kSecond);
}

TEST(WishFromScanTest, RequiredChecksumsRefuseAVersionWithoutAManifest) {
  ModelDirScan scan = Scan({Dir(1, 100, kNow - 60 * kSecond, /*manifest=*/true), Dir(2, 200)});
  Result<ModelConfig> config = LatestConfig(2);
  Wish wish = WishOf(scan, config, {.require_checksums = true});
  EXPECT_EQ(wish.wish.versions[0].readiness, Readiness::kLoadable);
  EXPECT_EQ(wish.wish.versions[1].readiness, Readiness::kRefused);
  EXPECT_THAT(wish.wish.versions[1].why.message(), HasSubstr("no SHA256SUMS in m/2"));
}

TEST(WishFromScanTest, AVersionThatCannotBeListedIsRefused) {
  VersionDirScan bad = Dir(1, 100);
  bad.error = InvalidArgument("m/1: more than 100000 files and directories: not loaded");
  ModelDirScan scan = Scan({bad});
  Result<ModelConfig> config = LatestConfig(1);
  Wish wish = WishOf(scan, config);
  EXPECT_EQ(wish.wish.versions[0].readiness, Readiness::kRefused);
  EXPECT_THAT(wish.wish.versions[0].why.message(), HasSubstr("more than 100000"));
}

}  // namespace
}  // namespace weft
