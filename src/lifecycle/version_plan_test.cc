#include "lifecycle/version_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace weft {
namespace {

using Phase = VersionCopy::Phase;
using Readiness = WantedVersion::Readiness;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

WantedVersion Want(int64_t version, uint64_t source, Readiness readiness = Readiness::kLoadable, Status why = {}) {
  return {version, source, readiness, std::move(why)};
}

ModelWish Wishing(std::vector<WantedVersion> versions) {
  ModelWish wish;
  wish.versions = std::move(versions);
  return wish;
}

VersionCopy Copy(int64_t version, uint64_t source, Phase phase, Status reason = {}) {
  return {version, source, phase, std::move(reason)};
}

std::vector<int64_t> Versions(const std::vector<WantedVersion>& wanted) {
  std::vector<int64_t> out;
  for (const auto& w : wanted) out.push_back(w.version);
  return out;
}

TEST(PlanModelTest, AFirstVersionLoadsThenServes) {
  ModelWish wish = Wishing({Want(1, 10)});
  ModelSteps steps = PlanModel(wish, {});
  EXPECT_THAT(Versions(steps.load), ElementsAre(1));
  EXPECT_FALSE(steps.settled);
  EXPECT_FALSE(steps.swap);

  std::vector<VersionCopy> copies = {Copy(1, 10, Phase::kLoading)};
  steps = PlanModel(wish, copies);
  EXPECT_THAT(steps.load, IsEmpty());
  EXPECT_FALSE(steps.settled);
  EXPECT_FALSE(ModelFailed(wish, copies));
  EXPECT_EQ(UnavailableReason(wish, copies).message(), "loading");

  copies[0].phase = Phase::kReady;
  steps = PlanModel(wish, copies);
  EXPECT_TRUE(steps.settled);
  EXPECT_TRUE(steps.swap);
  EXPECT_THAT(steps.serve, ElementsAre(0));
  EXPECT_THAT(steps.retire, IsEmpty());

  copies[0].phase = Phase::kServing;
  steps = PlanModel(wish, copies);
  EXPECT_FALSE(steps.swap);
  EXPECT_TRUE(steps.settled);
  EXPECT_TRUE(WishOutcome(wish, copies).ok());
  EXPECT_TRUE(UnavailableReason(wish, copies).ok());
}

// TF Serving's availability-preserving rule: version 2 leaves only in the step that makes version 3 serve.
TEST(PlanModelTest, ANewVersionReplacesTheOldOnlyOnceReady) {
  ModelWish wish = Wishing({Want(3, 30)});
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kServing)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_THAT(Versions(steps.load), ElementsAre(3));
  EXPECT_FALSE(steps.swap);
  EXPECT_THAT(steps.retire, IsEmpty());

  copies.push_back(Copy(3, 30, Phase::kLoading));
  steps = PlanModel(wish, copies);
  EXPECT_FALSE(steps.swap);
  EXPECT_THAT(steps.retire, IsEmpty());
  EXPECT_THAT(ReportVersions(wish, copies),
              ElementsAre(::testing::Field(&VersionReport::state, VersionState::kReady),
                          ::testing::Field(&VersionReport::state, VersionState::kLoading)));

  copies[1].phase = Phase::kReady;
  steps = PlanModel(wish, copies);
  EXPECT_TRUE(steps.swap);
  EXPECT_THAT(steps.serve, ElementsAre(1));
  EXPECT_THAT(steps.retire, ElementsAre(0));
}

TEST(PlanModelTest, ABrokenNewVersionLeavesTheOldServingAndSaysWhy) {
  ModelWish wish = Wishing({Want(3, 30)});
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kServing),
                                     Copy(3, 30, Phase::kFailed, InvalidArgument("3/model.pt: not a model"))};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_TRUE(steps.settled);
  EXPECT_FALSE(steps.swap);
  EXPECT_THAT(steps.load, IsEmpty());  // the same files are not tried again
  EXPECT_THAT(steps.retire, IsEmpty());
  Status outcome = WishOutcome(wish, copies);
  EXPECT_THAT(outcome.message(), HasSubstr("version 3: 3/model.pt: not a model"));
  EXPECT_THAT(outcome.message(), HasSubstr("still serve"));
  std::vector<VersionReport> reports = ReportVersions(wish, copies);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].state, VersionState::kReady);
  EXPECT_EQ(reports[1].state, VersionState::kUnavailable);
  EXPECT_EQ(reports[1].reason, "3/model.pt: not a model");
  EXPECT_FALSE(ModelFailed(wish, copies));
}

TEST(PlanModelTest, FilesReplacedInPlaceLoadASecondCopyOfTheSameVersion) {
  ModelWish wish = Wishing({Want(2, 21)});
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kServing)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_THAT(Versions(steps.load), ElementsAre(2));
  copies.push_back(Copy(2, 21, Phase::kLoading));
  std::vector<VersionReport> reports = ReportVersions(wish, copies);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, VersionState::kReady);
  EXPECT_EQ(reports[0].reason, "serving; a new copy is loading");

  copies[1].phase = Phase::kReady;
  steps = PlanModel(wish, copies);
  EXPECT_TRUE(steps.swap);
  EXPECT_THAT(steps.serve, ElementsAre(1));
  EXPECT_THAT(steps.retire, ElementsAre(0));

  // A failed replacement: the serving copy says so.
  copies[1] = Copy(2, 21, Phase::kFailed, InvalidArgument("bad bytes"));
  reports = ReportVersions(wish, copies);
  EXPECT_EQ(reports[0].reason, "serving; the new copy failed: bad bytes");
}

TEST(PlanModelTest, TheServingSetChangesOnlyWhenEveryWantedCopyHasFinished) {
  ModelWish wish = Wishing({Want(3, 30), Want(4, 40)});
  std::vector<VersionCopy> copies = {Copy(1, 10, Phase::kServing), Copy(2, 20, Phase::kServing),
                                     Copy(3, 30, Phase::kReady), Copy(4, 40, Phase::kLoading)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_FALSE(steps.swap);
  EXPECT_FALSE(steps.settled);

  copies[3].phase = Phase::kFailed;  // one of two fails: the other serves
  steps = PlanModel(wish, copies);
  EXPECT_TRUE(steps.swap);
  EXPECT_THAT(steps.serve, ElementsAre(2));
  EXPECT_THAT(steps.retire, ElementsAre(0, 1));
  EXPECT_FALSE(WishOutcome(wish, copies).ok());
}

TEST(PlanModelTest, SettlingVersionsWaitAndSayWhy) {
  ModelWish wish = Wishing({Want(3, 30, Readiness::kSettling, Unavailable("its files changed 0.2 s ago"))});
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kServing)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_THAT(steps.load, IsEmpty());
  EXPECT_FALSE(steps.settled);
  EXPECT_FALSE(steps.swap);
  std::vector<VersionReport> reports = ReportVersions(wish, copies);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].state, VersionState::kLoading);
  EXPECT_EQ(reports[1].reason, "its files changed 0.2 s ago");
}

TEST(PlanModelTest, RefusedVersionsAreRecordedAsFailedWithoutLoading) {
  ModelWish wish = Wishing({Want(1, 10, Readiness::kRefused, Unavailable("no SHA256SUMS"))});
  ModelSteps steps = PlanModel(wish, {});
  EXPECT_THAT(steps.load, IsEmpty());
  EXPECT_THAT(Versions(steps.refuse), ElementsAre(1));
  EXPECT_TRUE(steps.settled);
  EXPECT_TRUE(ModelFailed(wish, {}));
  EXPECT_THAT(UnavailableReason(wish, {}).message(), HasSubstr("version 1: no SHA256SUMS"));
}

TEST(PlanModelTest, UnloadingRetiresEverythingButWhatIsStillLoading) {
  ModelWish wish;
  wish.serve = false;
  std::vector<VersionCopy> copies = {Copy(1, 10, Phase::kServing), Copy(2, 20, Phase::kReady),
                                     Copy(3, 30, Phase::kFailed), Copy(4, 40, Phase::kLoading),
                                     Copy(5, 50, Phase::kDraining)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_TRUE(steps.swap);
  EXPECT_THAT(steps.serve, IsEmpty());
  EXPECT_THAT(steps.retire, ElementsAre(0, 1, 2));
  EXPECT_THAT(steps.load, IsEmpty());
  EXPECT_TRUE(steps.settled);
  EXPECT_FALSE(ModelFailed(wish, copies));

  std::vector<VersionCopy> draining = {Copy(1, 10, Phase::kDraining)};
  EXPECT_EQ(UnavailableReason(wish, draining).message(), "unloading");
  EXPECT_EQ(UnavailableReason(wish, {}).message(), "unloaded");
  EXPECT_THAT(ReportVersions(wish, draining),
              ElementsAre(::testing::Field(&VersionReport::state, VersionState::kUnloading)));
}

TEST(PlanModelTest, ACopyThatIsNoLongerWantedIsRetiredOnceLoaded) {
  ModelWish wish = Wishing({Want(3, 31)});
  std::vector<VersionCopy> copies = {Copy(3, 30, Phase::kLoading)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_THAT(Versions(steps.load), ElementsAre(3));  // the new files load beside the stale load
  EXPECT_THAT(steps.retire, IsEmpty());               // a load cannot be interrupted
  copies[0].phase = Phase::kReady;
  copies.push_back(Copy(3, 31, Phase::kLoading));
  steps = PlanModel(wish, copies);
  EXPECT_THAT(steps.retire, ElementsAre(0));
  EXPECT_FALSE(steps.swap);
}

TEST(PlanModelTest, AConfigProblemKeepsWhatServesAndIsReported) {
  ModelWish wish;
  wish.problem = InvalidArgument("m/config.pbtxt:3:1: syntax error");
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kServing), Copy(3, 30, Phase::kFailed)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_FALSE(steps.swap);
  EXPECT_THAT(steps.retire, ElementsAre(1));  // failures of an older wish are forgotten
  EXPECT_TRUE(steps.settled);
  std::vector<VersionCopy> serving = {copies[0]};
  std::vector<VersionReport> reports = ReportVersions(wish, serving);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].reason, "serving; m/config.pbtxt:3:1: syntax error");
  EXPECT_THAT(WishOutcome(wish, copies).message(), HasSubstr("syntax error"));
  EXPECT_TRUE(ModelFailed(wish, {}));
}

TEST(PlanModelTest, ASettlingConfigChangesNothing) {
  ModelWish wish;
  wish.settling = true;
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kServing), Copy(3, 30, Phase::kReady)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_FALSE(steps.swap);
  EXPECT_THAT(steps.retire, IsEmpty());
  EXPECT_FALSE(steps.settled);
  EXPECT_FALSE(ModelFailed(wish, {}));
}

TEST(PlanModelTest, ADrainingCopyIsNotReusedForTheSameSource) {
  ModelWish wish = Wishing({Want(2, 20)});
  std::vector<VersionCopy> copies = {Copy(2, 20, Phase::kDraining)};
  ModelSteps steps = PlanModel(wish, copies);
  EXPECT_THAT(Versions(steps.load), ElementsAre(2));
}

}  // namespace
}  // namespace weft
