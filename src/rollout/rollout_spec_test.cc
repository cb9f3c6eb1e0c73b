#include "rollout/rollout_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace weft {
namespace {

using std::chrono::milliseconds;
using Kind = RolloutStage::Kind;

ModelConfig Classifier(std::map<std::string, std::string> parameters = {}) {
  ModelConfig c;
  c.name = "cls";
  c.platform = "pytorch_libtorch";
  c.max_batch_size = 8;
  c.inputs = {{"images", DataType::kFp32, {3, 224, 224}, std::nullopt}};
  c.outputs = {{"logits", DataType::kFp32, {1000}, std::nullopt}};
  c.parameters = std::move(parameters);
  return c;
}

// The error of parsing `parameters`, with a check that it is an InvalidArgument.
std::string ErrorOf(std::map<std::string, std::string> parameters) {
  Result<std::optional<RolloutSpec>> r = ParseRolloutPolicy(Classifier(std::move(parameters)));
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

RolloutSpec Parsed(std::map<std::string, std::string> parameters) {
  Result<std::optional<RolloutSpec>> r = ParseRolloutPolicy(Classifier(std::move(parameters)));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->has_value()) return {};
  return **r;
}

// The error of validating `spec` after `change`.
template <typename Change>
std::string ValidationErrorOf(Change change) {
  RolloutSpec spec;
  change(spec);
  Status s = ValidateRolloutSpec(spec);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(RolloutSpecTest, KindNames) {
  EXPECT_EQ(RolloutStageKindName(Kind::kShadow), "shadow");
  EXPECT_EQ(RolloutStageKindName(Kind::kCanary), "canary");
}

TEST(RolloutSpecTest, DefaultStages) {
  const std::vector<RolloutStage> stages = DefaultRolloutStages();
  ASSERT_EQ(stages.size(), 4u);
  const std::vector<RolloutStage> expected = {
      {.kind = Kind::kShadow, .share = 1.0, .min_requests = 200, .min_duration = milliseconds(10000)},
      {.kind = Kind::kCanary, .share = 0.05, .min_requests = 100, .min_duration = milliseconds(10000)},
      {.kind = Kind::kCanary, .share = 0.25, .min_requests = 200, .min_duration = milliseconds(10000)},
      {.kind = Kind::kCanary, .share = 0.5, .min_requests = 400, .min_duration = milliseconds(10000)},
  };
  EXPECT_EQ(stages, expected);
  EXPECT_EQ(RolloutSpec{}.stages, expected);
  EXPECT_TRUE(ValidateRolloutSpec(RolloutSpec{}).ok());
}

TEST(RolloutSpecTest, NoRolloutKeysIsNoPolicy) {
  Result<std::optional<RolloutSpec>> r =
      ParseRolloutPolicy(Classifier({{"weft.breaker.enabled", "false"}, {"weft.rollouts", "x"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
}

TEST(RolloutSpecTest, ParsesEveryKey) {
  const RolloutSpec spec = Parsed({
      {"weft.rollout.stages", " shadow:0.5 ,canary:0.1, canary:1 "},
      {"weft.rollout.min_requests", "50"},
      {"weft.rollout.min_duration_ms", " 0 "},
      {"weft.rollout.max_error_rate_increase", "0.02"},
      {"weft.rollout.max_p99_ratio", "2"},
      {"weft.rollout.max_divergence_rate", "0"},
      {"weft.rollout.abs_tolerance", "1e-3"},
      {"weft.rollout.rel_tolerance", "0.05"},
      {"weft.rollout.min_top1_agreement", "1"},
      {"weft.rollout.sticky_key", " user "},
      {"weft.rollout.shadow_max_in_flight", "16"},
      {"weft.rollout.on_rollback", "unload"},
  });
  RolloutSpec expected;
  expected.stages = {
      {.kind = Kind::kShadow, .share = 0.5, .min_requests = 50, .min_duration = milliseconds(0)},
      {.kind = Kind::kCanary, .share = 0.1, .min_requests = 50, .min_duration = milliseconds(0)},
      {.kind = Kind::kCanary, .share = 1.0, .min_requests = 50, .min_duration = milliseconds(0)},
  };
  expected.criteria = {.max_error_rate_increase = 0.02,
                       .max_p99_ratio = 2,
                       .max_divergence_rate = 0,
                       .abs_tolerance = 1e-3,
                       .rel_tolerance = 0.05,
                       .min_top1_agreement = 1};
  expected.sticky_key = "user";
  expected.shadow_max_in_flight = 16;
  expected.unload_on_rollback = true;
  EXPECT_EQ(spec, expected);
}

TEST(RolloutSpecTest, OneKeyKeepsTheOtherDefaults) {
  const RolloutSpec spec = Parsed({{"weft.rollout.on_rollback", "keep"}});
  EXPECT_EQ(spec, RolloutSpec{});
}

TEST(RolloutSpecTest, StagesWithoutMinimumsTakeTheStageDefaults) {
  const RolloutSpec spec = Parsed({{"weft.rollout.stages", "canary:0.1"}});
  ASSERT_EQ(spec.stages.size(), 1u);
  EXPECT_EQ(spec.stages[0], (RolloutStage{.kind = Kind::kCanary, .share = 0.1}));
  EXPECT_EQ(spec.stages[0].min_requests, 100u);
  EXPECT_EQ(spec.stages[0].min_duration, milliseconds(10000));
}

TEST(RolloutSpecTest, MinimumsApplyToTheDefaultStagesToo) {
  const RolloutSpec spec = Parsed({{"weft.rollout.min_requests", "7"}, {"weft.rollout.min_duration_ms", "1500"}});
  ASSERT_EQ(spec.stages.size(), DefaultRolloutStages().size());
  for (size_t i = 0; i < spec.stages.size(); ++i) {
    EXPECT_EQ(spec.stages[i].kind, DefaultRolloutStages()[i].kind);
    EXPECT_EQ(spec.stages[i].share, DefaultRolloutStages()[i].share);
    EXPECT_EQ(spec.stages[i].min_requests, 7u);
    EXPECT_EQ(spec.stages[i].min_duration, milliseconds(1500));
  }
}

TEST(RolloutSpecTest, AcceptsTheLimits) {
  const RolloutSpec spec = Parsed({
      {"weft.rollout.min_requests", "10000000"},
      {"weft.rollout.min_duration_ms", std::to_string(RolloutLimits::kMaxMinDuration.count())},
      {"weft.rollout.shadow_max_in_flight", "4096"},
      {"weft.rollout.max_p99_ratio", "1"},
      {"weft.rollout.max_error_rate_increase", "1"},
      {"weft.rollout.min_top1_agreement", "0"},
      {"weft.rollout.sticky_key", std::string(256, 'k')},
      {"weft.rollout.stages",
       "canary:1,canary:1,canary:1,canary:1,canary:1,canary:1,canary:1,canary:1,"
       "canary:1,canary:1,canary:1,canary:1,canary:1,canary:1,canary:1,canary:1"},
  });
  EXPECT_EQ(spec.stages.size(), RolloutLimits::kMaxStages);
  EXPECT_EQ(spec.stages[0].min_requests, RolloutLimits::kMaxMinRequests);
  EXPECT_EQ(spec.shadow_max_in_flight, RolloutLimits::kMaxShadowInFlight);
}

TEST(RolloutSpecTest, UnknownKeyIsAnError) {
  const std::string message = ErrorOf({{"weft.rollout.min_request", "100"}});
  EXPECT_NE(message.find("'weft.rollout.min_request'"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown rollout parameter"), std::string::npos) << message;
  EXPECT_NE(ErrorOf({{"weft.rollout.", "1"}}).find("unknown"), std::string::npos);
}

TEST(RolloutSpecTest, CriteriaMustBeFiniteNumbersInRange) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"weft.rollout.max_error_rate_increase", "1.5"}, {"weft.rollout.max_error_rate_increase", "-0.1"},
      {"weft.rollout.max_error_rate_increase", "nan"}, {"weft.rollout.max_error_rate_increase", ""},
      {"weft.rollout.max_p99_ratio", "0.99"},          {"weft.rollout.max_p99_ratio", "inf"},
      {"weft.rollout.max_p99_ratio", "1e400"},         {"weft.rollout.max_divergence_rate", "2"},
      {"weft.rollout.max_divergence_rate", "0.1x"},    {"weft.rollout.abs_tolerance", "-1e-9"},
      {"weft.rollout.abs_tolerance", "infinity"},      {"weft.rollout.rel_tolerance", "+0.1"},
      {"weft.rollout.rel_tolerance", "0x10"},          {"weft.rollout.min_top1_agreement", "1.01"},
      {"weft.rollout.min_top1_agreement", "NAN"},
  };
  for (const auto& [key, value] : bad) {
    const std::string message = ErrorOf({{key, value}});
    EXPECT_NE(message.find("'" + key + "'"), std::string::npos) << key << "=" << value << ": " << message;
    EXPECT_NE(message.find("'" + value + "'"), std::string::npos) << key << "=" << value << ": " << message;
  }
}

TEST(RolloutSpecTest, IntegersAreStrict) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"weft.rollout.min_requests", "0"},
      {"weft.rollout.min_requests", "-1"},
      {"weft.rollout.min_requests", "1.5"},
      {"weft.rollout.min_requests", "10000001"},
      {"weft.rollout.min_requests", "99999999999999999999999"},
      {"weft.rollout.min_requests", "1 2"},
      {"weft.rollout.min_duration_ms", "-5"},
      {"weft.rollout.min_duration_ms", std::to_string(RolloutLimits::kMaxMinDuration.count() + 1)},
      {"weft.rollout.min_duration_ms", "10s"},
      {"weft.rollout.shadow_max_in_flight", "0"},
      {"weft.rollout.shadow_max_in_flight", "4097"},
      {"weft.rollout.shadow_max_in_flight", ""},
  };
  for (const auto& [key, value] : bad) {
    const std::string message = ErrorOf({{key, value}});
    EXPECT_NE(message.find("'" + key + "'"), std::string::npos) << key << "=" << value << ": " << message;
  }
}

TEST(RolloutSpecTest, OnRollbackIsKeepOrUnload) {
  EXPECT_FALSE(Parsed({{"weft.rollout.on_rollback", " keep "}}).unload_on_rollback);
  const std::string message = ErrorOf({{"weft.rollout.on_rollback", "Unload"}});
  EXPECT_NE(message.find("keep or unload"), std::string::npos) << message;
  EXPECT_NE(message.find("'Unload'"), std::string::npos) << message;
}

TEST(RolloutSpecTest, StickyKeyIsBounded) {
  EXPECT_EQ(Parsed({{"weft.rollout.sticky_key", "  "}}).sticky_key, "");
  const std::string message = ErrorOf({{"weft.rollout.sticky_key", std::string(257, 'k')}});
  EXPECT_NE(message.find("weft.rollout.sticky_key"), std::string::npos) << message;
}

TEST(RolloutSpecTest, StageListErrorsSayWhichStage) {
  struct Case {
    std::string value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "at least one stage"},
      {"   ", "at least one stage"},
      {"canary", "stage 1 is 'canary'"},
      {"canary:0.1,,canary:0.2", "stage 2 is ''"},
      {"canary:0.1,", "stage 2 is ''"},
      {"blue:0.5", "stage 1 has kind 'blue'"},
      {"Canary:0.5", "stage 1 has kind 'Canary'"},
      {"shadow:1, canary:", "stage 2 has share ''"},
      {"canary:0", "stage 1 has share '0'"},
      {"canary:-0.5", "stage 1 has share '-0.5'"},
      {"canary:1.5", "stage 1 has share '1.5'"},
      {"canary:nan", "stage 1 has share 'nan'"},
      {"canary:0.5:0.5", "stage 1 has share '0.5:0.5'"},
  };
  for (const Case& c : cases) {
    const std::string message = ErrorOf({{"weft.rollout.stages", c.value}});
    EXPECT_NE(message.find("'weft.rollout.stages'"), std::string::npos) << c.value << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.value << ": " << message;
  }
}

TEST(RolloutSpecTest, TooManyStages) {
  std::string stages = "shadow:1";
  for (int i = 0; i < 16; ++i) stages += ",canary:0.5";
  const std::string message = ErrorOf({{"weft.rollout.stages", stages}});
  EXPECT_NE(message.find("more than 16 stages"), std::string::npos) << message;
}

TEST(RolloutSpecTest, MessagesQuoteAtMost64BytesOfAValue) {
  const std::string long_value = "0." + std::string(1000, '5') + "x";
  const std::string message = ErrorOf({{"weft.rollout.max_p99_ratio", long_value}});
  EXPECT_LT(message.size(), 300u) << message;
  EXPECT_NE(message.find("more bytes"), std::string::npos) << message;
  const std::string long_key = "weft.rollout." + std::string(1000, 'k');
  EXPECT_LT(ErrorOf({{long_key, "1"}}).size(), 500u);
  const std::string long_stage = ErrorOf({{"weft.rollout.stages", "canary:" + std::string(1000, '9')}});
  EXPECT_LT(long_stage.size(), 300u) << long_stage;
}

TEST(RolloutSpecTest, ValidationNamesTheField) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.candidate = -1; }).find("candidate"), std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.stages.clear(); }).find("stages"), std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.stages.resize(17, RolloutStage{.share = 1}); }).find("stages"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.stages[1].share = 0; }).find("stages[1].share"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.stages[2].share = 1.0001; }).find("stages[2].share"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([&](RolloutSpec& s) { s.stages[0].share = kNan; }).find("stages[0].share"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.stages[3].min_requests = 0; }).find("stages[3].min_requests"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) {
              s.stages[0].min_requests = RolloutLimits::kMaxMinRequests + 1;
            }).find("stages[0].min_requests"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) {
              s.stages[0].min_duration = milliseconds(-1);
            }).find("stages[0].min_duration_ms"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) {
              s.stages[0].min_duration = RolloutLimits::kMaxMinDuration + milliseconds(1);
            }).find("stages[0].min_duration_ms"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.sticky_key = std::string(257, 'k'); }).find("sticky_key"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.shadow_max_in_flight = 0; }).find("shadow_max_in_flight"),
            std::string::npos);
  EXPECT_NE(ValidationErrorOf([](RolloutSpec& s) { s.shadow_max_in_flight = 4097; }).find("shadow_max_in_flight"),
            std::string::npos);

  struct Case {
    double RolloutCriteria::*member;
    std::string field;
    std::vector<double> bad;
  };
  const std::vector<Case> cases = {
      {&RolloutCriteria::max_error_rate_increase, "criteria.max_error_rate_increase", {-0.01, 1.01, kNan, kInf}},
      {&RolloutCriteria::max_p99_ratio, "criteria.max_p99_ratio", {0.99, 0, kNan, kInf}},
      {&RolloutCriteria::max_divergence_rate, "criteria.max_divergence_rate", {-1, 1.5, kNan}},
      {&RolloutCriteria::abs_tolerance, "criteria.abs_tolerance", {-1e-12, kNan, kInf}},
      {&RolloutCriteria::rel_tolerance, "criteria.rel_tolerance", {-1, kNan, kInf}},
      {&RolloutCriteria::min_top1_agreement, "criteria.min_top1_agreement", {-0.5, 1.5, kNan}},
  };
  for (const Case& c : cases) {
    for (double value : c.bad) {
      const std::string message = ValidationErrorOf([&](RolloutSpec& s) { s.criteria.*c.member = value; });
      EXPECT_NE(message.find(c.field), std::string::npos) << c.field << "=" << value << ": " << message;
    }
  }
}

TEST(RolloutSpecTest, ValidationAcceptsTheBoundaries) {
  RolloutSpec spec;
  spec.candidate = 0;
  spec.stages = {{.kind = Kind::kCanary,
                  .share = 1,
                  .min_requests = RolloutLimits::kMaxMinRequests,
                  .min_duration = RolloutLimits::kMaxMinDuration},
                 {.kind = Kind::kShadow, .share = 1e-9, .min_requests = 1, .min_duration = milliseconds(0)}};
  spec.criteria = {.max_error_rate_increase = 0,
                   .max_p99_ratio = 1,
                   .max_divergence_rate = 1,
                   .abs_tolerance = 0,
                   .rel_tolerance = 0,
                   .min_top1_agreement = 1};
  spec.sticky_key = std::string(256, 'k');
  spec.shadow_max_in_flight = 1;
  EXPECT_TRUE(ValidateRolloutSpec(spec).ok()) << ValidateRolloutSpec(spec).ToString();
  spec.shadow_max_in_flight = RolloutLimits::kMaxShadowInFlight;
  spec.candidate = 7;
  EXPECT_TRUE(ValidateRolloutSpec(spec).ok());
}

}  // namespace
}  // namespace weft
