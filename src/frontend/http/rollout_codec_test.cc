#include "frontend/http/rollout_codec.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <limits>
#include <string>

#include "frontend/http/testing/bytes.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

using weft::testing::Bytes;

// The error of decoding `body`: InvalidArgument whose message holds `needle`.
void ExpectInvalid(std::string_view body, std::string_view needle) {
  Result<RolloutSpec> r = DecodeRolloutRequest(Bytes(body));
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << body << ": '" << r.status().message() << "' does not name " << needle;
}

TEST(RolloutCodecTest, DecodesEveryField) {
  auto r = DecodeRolloutRequest(Bytes(R"({
    "candidate": 7,
    "stages": [{"kind": "shadow", "share": 1, "min_requests": 50, "min_duration_ms": 2000},
               {"kind": "canary", "share": 0.25, "min_requests": 1, "min_duration_ms": 0}],
    "criteria": {"max_error_rate_increase": 0.02, "max_p99_ratio": 2, "max_divergence_rate": 0.5,
                 "abs_tolerance": 1e-4, "rel_tolerance": 0.01, "min_top1_agreement": 0.9},
    "sticky_key": "camera_id", "shadow_max_in_flight": 16, "on_rollback": "unload"})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->candidate, 7);
  ASSERT_EQ(r->stages.size(), 2u);
  EXPECT_EQ(r->stages[0], (RolloutStage{RolloutStage::Kind::kShadow, 1.0, 50, milliseconds(2000)}));
  EXPECT_EQ(r->stages[1], (RolloutStage{RolloutStage::Kind::kCanary, 0.25, 1, milliseconds(0)}));
  EXPECT_EQ(r->criteria, (RolloutCriteria{.max_error_rate_increase = 0.02,
                                          .max_p99_ratio = 2,
                                          .max_divergence_rate = 0.5,
                                          .abs_tolerance = 1e-4,
                                          .rel_tolerance = 0.01,
                                          .min_top1_agreement = 0.9}));
  EXPECT_EQ(r->sticky_key, "camera_id");
  EXPECT_EQ(r->shadow_max_in_flight, 16u);
  EXPECT_TRUE(r->unload_on_rollback);
  EXPECT_FALSE(DecodeRolloutRequest(Bytes(R"({"candidate": 1, "on_rollback": "keep"})"))->unload_on_rollback);
}

TEST(RolloutCodecTest, OmittedFieldsTakeTheDefaults) {
  auto r = DecodeRolloutRequest(Bytes(R"({"candidate": 2})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  RolloutSpec expected;
  expected.candidate = 2;
  EXPECT_EQ(*r, expected);
  EXPECT_EQ(r->stages, DefaultRolloutStages());

  r = DecodeRolloutRequest(
      Bytes(R"({"candidate": 2, "stages": [{"share": 0.5, "kind": "canary"}], "criteria": {"max_p99_ratio": 3}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->stages.size(), 1u);
  EXPECT_EQ(r->stages[0], (RolloutStage{.kind = RolloutStage::Kind::kCanary, .share = 0.5}));
  EXPECT_EQ(r->stages[0].min_requests, RolloutStage{}.min_requests);
  EXPECT_EQ(r->stages[0].min_duration, RolloutStage{}.min_duration);
  EXPECT_EQ(r->criteria, (RolloutCriteria{.max_p99_ratio = 3}));
}

TEST(RolloutCodecTest, RejectsUnknownAndRepeatedKeys) {
  ExpectInvalid(R"({"candidate": 2, "stagse": []})", "'stagse'");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": "canary", "share": 0.5, "min_request": 10}]})",
                "'stages[0].min_request'");
  ExpectInvalid(R"({"candidate": 2, "criteria": {"max_p99": 2}})", "'criteria.max_p99'");
  ExpectInvalid(R"({"candidate": 2, "candidate": 3})", "'candidate' is given twice");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": "canary", "share": 0.5, "share": 0.6}]})",
                "'stages[0].share' is given twice");
  ExpectInvalid(R"({"candidate": 2, "criteria": {"abs_tolerance": 0, "abs_tolerance": 1}})",
                "'criteria.abs_tolerance' is given twice");
}

TEST(RolloutCodecTest, RejectsWrongTypesNamingTheField) {
  ExpectInvalid(R"({"candidate": "2"})", "'candidate' must be an integer");
  ExpectInvalid(R"({"candidate": 2.0})", "'candidate' must be an integer");
  ExpectInvalid(R"({"candidate": 2, "stages": {}})", "'stages' must be an array");
  ExpectInvalid(R"({"candidate": 2, "stages": [1]})", "'stages[0]' must be an object");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": 1, "share": 0.5}]})", "'stages[0].kind' must be a string");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": "blue", "share": 0.5}]})", "'stages[0].kind' must be");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": "canary", "share": "0.5"}]})",
                "'stages[0].share' must be a number");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": "canary", "share": 0.5, "min_requests": 1.5}]})",
                "'stages[0].min_requests' must be an integer");
  ExpectInvalid(R"({"candidate": 2, "criteria": []})", "'criteria' must be an object");
  ExpectInvalid(R"({"candidate": 2, "criteria": {"rel_tolerance": null}})", "'criteria.rel_tolerance' must be");
  ExpectInvalid(R"({"candidate": 2, "sticky_key": 5})", "'sticky_key' must be a string");
  ExpectInvalid(R"({"candidate": 2, "shadow_max_in_flight": true})", "'shadow_max_in_flight' must be an integer");
  ExpectInvalid(R"({"candidate": 2, "on_rollback": true})", "'on_rollback' must be a string");
  ExpectInvalid(R"({"candidate": 2, "on_rollback": "delete"})", "'on_rollback' must be");
}

TEST(RolloutCodecTest, RequiresTheCandidateAndEachStagesKindAndShare) {
  ExpectInvalid("{}", "'candidate' is required");
  ExpectInvalid(R"({"stages": []})", "'candidate' is required");
  ExpectInvalid(R"({"candidate": 0})", "'candidate' must be an integer in [1,");
  ExpectInvalid(R"({"candidate": -1})", "'candidate'");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"share": 0.5}]})", "'stages[0].kind' is required");
  ExpectInvalid(R"({"candidate": 2, "stages": [{"kind": "shadow", "share": 1}, {"kind": "canary"}]})",
                "'stages[1].share' is required");
}

TEST(RolloutCodecTest, AppliesValidateRolloutSpec) {
  for (const char* body :
       {R"({"candidate": 2, "stages": [{"kind": "canary", "share": 0}]})",
        R"({"candidate": 2, "stages": [{"kind": "canary", "share": 1.5}]})",
        R"({"candidate": 2, "stages": [{"kind": "canary", "share": -0.5}]})", R"({"candidate": 2, "stages": []})",
        R"({"candidate": 2, "criteria": {"max_divergence_rate": 2}})",
        R"({"candidate": 2, "criteria": {"abs_tolerance": -1}})"}) {
    Result<RolloutSpec> r = DecodeRolloutRequest(Bytes(body));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
  }
}

std::string Stages(size_t n) {
  std::string stages;
  for (size_t i = 0; i < n; ++i) stages += std::string(i ? "," : "") + R"({"kind": "canary", "share": 0.5})";
  return R"({"candidate": 2, "stages": [)" + stages + "]}";
}

TEST(RolloutCodecTest, BoundsTheStagesAndTheIntegers) {
  Result<RolloutSpec> most = DecodeRolloutRequest(Bytes(Stages(RolloutLimits::kMaxStages)));
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(most->stages.size(), RolloutLimits::kMaxStages);
  ExpectInvalid(Stages(RolloutLimits::kMaxStages + 1), "at most 16 stages");
  ExpectInvalid(Stages(10000), "at most 16 stages");

  // Above INT64_MAX, and above UINT64_MAX (which simdjson does not parse).
  ExpectInvalid(R"({"candidate": 9223372036854775808})", "'candidate' must be an integer in");
  ExpectInvalid(R"({"candidate": 18446744073709551616})", "malformed JSON");
  const std::string stage = R"({"candidate": 2, "stages": [{"kind": "canary", "share": 0.5, )";
  ExpectInvalid(stage + R"("min_requests": 10000001}]})",
                "'stages[0].min_requests' must be an integer in [1, 10000000]");
  ExpectInvalid(stage + R"("min_requests": 0}]})", "'stages[0].min_requests'");
  ExpectInvalid(stage + R"("min_requests": -1}]})", "'stages[0].min_requests'");
  ExpectInvalid(stage + R"("min_requests": 18446744073709551615}]})", "'stages[0].min_requests'");
  ExpectInvalid(stage + R"("min_duration_ms": 604800001}]})", "'stages[0].min_duration_ms'");
  EXPECT_TRUE(DecodeRolloutRequest(Bytes(stage + R"("min_duration_ms": 604800000}]})")).ok());
  // 2^32 + 1 would wrap to 1 in a uint32_t.
  ExpectInvalid(R"({"candidate": 2, "shadow_max_in_flight": 4294967297})", "'shadow_max_in_flight'");
  ExpectInvalid(R"({"candidate": 2, "shadow_max_in_flight": 4097})", "'shadow_max_in_flight'");
  ExpectInvalid(R"({"candidate": 2, "shadow_max_in_flight": 0})", "'shadow_max_in_flight'");
  ExpectInvalid(R"({"candidate": 2, "criteria": {"max_p99_ratio": 1e300}})", "'criteria.max_p99_ratio'");
  ExpectInvalid(R"({"candidate": 2, "criteria": {"max_p99_ratio": 1e400}})", "malformed JSON");
}

TEST(RolloutCodecTest, RejectsBodiesThatAreNotAnObject) {
  ExpectInvalid("", "empty");
  ExpectInvalid(" \r\n\t", "empty");
  ExpectInvalid("{", "malformed JSON");
  ExpectInvalid(R"({"candidate": 2,})", "malformed JSON");
  ExpectInvalid(R"({"candidate": NaN})", "malformed JSON");
  ExpectInvalid("[]", "must be a JSON object");
  ExpectInvalid(R"("candidate")", "must be a JSON object");
  ExpectInvalid("2", "must be a JSON object");
}

TEST(RolloutCodecTest, EncodesEveryField) {
  RolloutSpec spec;
  spec.candidate = 3;
  spec.stages = {{RolloutStage::Kind::kShadow, 0.5, 7, milliseconds(250)}};
  spec.sticky_key = "k\"ey";
  EXPECT_EQ(EncodeRolloutSpec(spec),
            R"({"candidate":3,"stages":[{"kind":"shadow","share":0.5,"min_requests":7,"min_duration_ms":250}],)"
            R"("criteria":{"max_error_rate_increase":0.01,"max_p99_ratio":1.5,"max_divergence_rate":0.01,)"
            R"("abs_tolerance":1e-05,"rel_tolerance":0.001,"min_top1_agreement":0.99},)"
            R"("sticky_key":"k\"ey","shadow_max_in_flight":4,"on_rollback":"keep"})");
}

TEST(RolloutCodecTest, DecodesWhatItEncodes) {
  RolloutSpec defaults;
  defaults.candidate = 1;
  RolloutSpec odd;
  odd.candidate = std::numeric_limits<int64_t>::max();
  odd.stages = {{RolloutStage::Kind::kShadow, 1.0 / 3, 1, milliseconds(0)},
                {RolloutStage::Kind::kCanary, 1e-300, RolloutLimits::kMaxMinRequests, RolloutLimits::kMaxMinDuration},
                {RolloutStage::Kind::kCanary, 1, 1, milliseconds(1)}};
  odd.criteria = {.max_error_rate_increase = 0,
                  .max_p99_ratio = 999999999.5,
                  .max_divergence_rate = 1,
                  .abs_tolerance = std::numeric_limits<double>::denorm_min(),
                  .rel_tolerance = 0.1 + 0.2,
                  .min_top1_agreement = 0};
  odd.sticky_key = "\xc3\xa9\n\\ \x01";
  odd.shadow_max_in_flight = RolloutLimits::kMaxShadowInFlight;
  odd.unload_on_rollback = true;
  for (const RolloutSpec& spec : {defaults, odd}) {
    ASSERT_TRUE(ValidateRolloutSpec(spec).ok()) << ValidateRolloutSpec(spec).ToString();
    const std::string json = EncodeRolloutSpec(spec);
    Result<RolloutSpec> back = DecodeRolloutRequest(Bytes(json));
    ASSERT_TRUE(back.ok()) << json << ": " << back.status().ToString();
    EXPECT_EQ(*back, spec) << json;
  }
}

TEST(RolloutCodecTest, EncodesTheReportAsValidJson) {
  RolloutReport report;
  report.model = "det";
  report.state = "canary";
  report.primary = 1;
  report.candidate = 2;
  report.stage = 1;
  report.spec.candidate = 2;
  report.started = "2024-05-01T10:00:00.000Z";
  report.figures.elapsed = std::chrono::milliseconds(1500) + std::chrono::microseconds(700);
  report.figures.primary = {.requests = 200, .errors = 2, .p50_seconds = 0.004, .p99_seconds = 0.02};
  report.figures.candidate.p99_seconds = std::numeric_limits<double>::quiet_NaN();
  report.figures.divergence = {.compared = 10, .diverged = 1, .max_abs = std::numeric_limits<double>::infinity()};
  report.figures.noise.max_rel = -std::numeric_limits<double>::infinity();
  report.figures.shadow_sent = 9;
  report.decisions.push_back({.time = "2024-05-01T10:00:00.000Z", .stage = 0, .action = "start", .reason = "by API"});
  report.decisions.push_back({.time = "2024-05-01T10:01:00.000Z",
                              .stage = 0,
                              .action = "next_stage",
                              .reason = "passed",
                              .figures = report.figures});

  std::string json = EncodeRolloutReport(report);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_FALSE(parser.parse(simdjson::padded_string(json)).get(root)) << json;
  EXPECT_EQ(std::string_view(root["model"]), "det");
  EXPECT_EQ(std::string_view(root["state"]), "canary");
  EXPECT_FALSE(bool(root["automatic"]));
  EXPECT_EQ(int64_t(root["candidate"]), 2);
  EXPECT_EQ(uint64_t(root["stage"]), 1u);
  EXPECT_EQ(int64_t(root["spec"]["candidate"]), 2);
  EXPECT_EQ(simdjson::dom::array(root["spec"]["stages"]).size(), DefaultRolloutStages().size());
  EXPECT_TRUE(root["ended"].error() == simdjson::NO_SUCH_FIELD) << json;

  simdjson::dom::element figures = root["figures"];
  EXPECT_EQ(int64_t(figures["elapsed_ms"]), 1500);
  EXPECT_EQ(uint64_t(figures["primary"]["requests"]), 200u);
  EXPECT_DOUBLE_EQ(double(figures["primary"]["error_rate"]), 0.01);
  EXPECT_DOUBLE_EQ(double(figures["primary"]["p99_ms"]), 20);
  EXPECT_EQ(std::string_view(figures["candidate"]["p99_ms"]), "NaN");
  EXPECT_EQ(std::string_view(figures["divergence"]["max_abs"]), "Infinity");
  EXPECT_DOUBLE_EQ(double(figures["divergence"]["divergence_rate"]), 0.1);
  EXPECT_DOUBLE_EQ(double(figures["divergence"]["top1_agreement"]), 1);
  EXPECT_EQ(std::string_view(figures["noise"]["max_rel"]), "-Infinity");
  EXPECT_EQ(uint64_t(figures["shadow"]["sent"]), 9u);

  simdjson::dom::array decisions = root["decisions"];
  ASSERT_EQ(decisions.size(), 2u);
  EXPECT_EQ(std::string_view(decisions.at(0)["action"]), "start");
  EXPECT_EQ(std::string_view(decisions.at(1)["action"]), "next_stage");
  EXPECT_EQ(std::string_view(decisions.at(1)["figures"]["candidate"]["p99_ms"]), "NaN");

  report.state = "promoted";
  report.ended = "2024-05-01T10:05:00.000Z";
  json = EncodeRolloutReport(report);
  ASSERT_FALSE(parser.parse(simdjson::padded_string(json)).get(root)) << json;
  EXPECT_EQ(std::string_view(root["ended"]), "2024-05-01T10:05:00.000Z");
}

}  // namespace
}  // namespace weft
