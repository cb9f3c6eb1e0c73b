#include "resilience/fallback_compat.h"

#include <gtest/gtest.h>

#include <string>

namespace weft {
namespace {

ModelConfig Det() {
  ModelConfig c;
  c.name = "det";
  c.max_batch_size = 8;
  c.inputs = {{"images", DataType::kFp32, {3, 640, 640}, std::nullopt},
              {"threshold", DataType::kFp32, {1}, std::nullopt}};
  c.outputs = {{"boxes", DataType::kFp32, {100, 6}, std::nullopt}, {"count", DataType::kInt32, {1}, std::nullopt}};
  return c;
}

ModelConfig DetSmall() {
  ModelConfig c = Det();
  c.name = "det_small";
  return c;
}

// The message after "fallback 'det_small' is not compatible with 'det': ", with a check that it is there.
std::string Why(const ModelConfig& primary, const ModelConfig& fallback) {
  Status s = CheckFallbackCompatible(primary, fallback);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  const std::string prefix = "fallback '" + fallback.name + "' is not compatible with '" + primary.name + "': ";
  EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << s.message();
  return s.message().substr(std::min(prefix.size(), s.message().size()));
}

TEST(FallbackCompatTest, AnIdenticalModelIsCompatible) { EXPECT_TRUE(CheckFallbackCompatible(Det(), DetSmall()).ok()); }

TEST(FallbackCompatTest, ExtraOutputsReshapeAndTensorOrderDoNotMatter) {
  ModelConfig fallback = DetSmall();
  fallback.outputs.push_back({"scores", DataType::kFp16, {100}, std::nullopt});
  std::swap(fallback.inputs[0], fallback.inputs[1]);
  fallback.inputs[1].reshape = Shape{1, 3, 640, 640};
  EXPECT_TRUE(CheckFallbackCompatible(Det(), fallback).ok());
}

TEST(FallbackCompatTest, BatchingFallbackMustTakeEveryBatch) {
  ModelConfig fallback = DetSmall();
  fallback.max_batch_size = 16;
  EXPECT_TRUE(CheckFallbackCompatible(Det(), fallback).ok());
  fallback.max_batch_size = 4;
  EXPECT_EQ(Why(Det(), fallback),
            "max_batch_size is 4 there, 8 here (the fallback must take every batch this model takes)");
  fallback.max_batch_size = 0;
  EXPECT_EQ(Why(Det(), fallback),
            "max_batch_size is 0 there, 8 here (the fallback must take every batch this model takes)");
}

TEST(FallbackCompatTest, ANonBatchingPrimaryNeedsANonBatchingFallback) {
  ModelConfig primary = Det();
  primary.max_batch_size = 0;
  ModelConfig fallback = DetSmall();
  fallback.max_batch_size = 0;
  EXPECT_TRUE(CheckFallbackCompatible(primary, fallback).ok());
  fallback.max_batch_size = 8;
  EXPECT_EQ(Why(primary, fallback),
            "max_batch_size is 8 there, 0 here (requests to a model that does not batch have no batch dimension)");
}

TEST(FallbackCompatTest, EveryPrimaryInputMustExistWithTheSameDatatype) {
  ModelConfig fallback = DetSmall();
  fallback.inputs.pop_back();
  EXPECT_EQ(Why(Det(), fallback), "input 'threshold' is missing there");
  fallback = DetSmall();
  fallback.inputs[0].data_type = DataType::kFp16;
  EXPECT_EQ(Why(Det(), fallback), "input 'images' is TYPE_FP16 there, TYPE_FP32 here");
  EXPECT_EQ(CheckFallbackCompatible(Det(), fallback).message(),
            "fallback 'det_small' is not compatible with 'det': input 'images' is TYPE_FP16 there, TYPE_FP32 here");
}

TEST(FallbackCompatTest, EveryFallbackInputMustExistInThePrimary) {
  ModelConfig fallback = DetSmall();
  fallback.inputs.push_back({"mask", DataType::kBool, {640, 640}, std::nullopt});
  EXPECT_EQ(Why(Det(), fallback), "input 'mask' is required there and missing here (requests to this model lack it)");
}

TEST(FallbackCompatTest, InputDimsOfTheFallbackMustTakeEveryPrimaryShape) {
  ModelConfig primary = Det();
  primary.inputs[0].dims = {3, -1, -1};
  ModelConfig fallback = DetSmall();
  fallback.inputs[0].dims = {3, -1, -1};
  EXPECT_TRUE(CheckFallbackCompatible(primary, fallback).ok());
  // A fallback -1 takes a fixed primary dim.
  EXPECT_TRUE(CheckFallbackCompatible(Det(), fallback).ok());
  // A primary -1 needs a fallback -1.
  fallback.inputs[0].dims = {3, 640, -1};
  EXPECT_EQ(Why(primary, fallback),
            "input 'images' has dims [3,640,-1] there, [3,-1,-1] here (each dim there must be -1 or the one here)");
  // Different fixed dims.
  fallback.inputs[0].dims = {3, 320, 320};
  EXPECT_NE(Why(Det(), fallback).find("input 'images' has dims [3,320,320] there, [3,640,640] here"),
            std::string::npos);
  // Different rank.
  fallback.inputs[0].dims = {3, -1};
  EXPECT_NE(Why(Det(), fallback).find("input 'images' has dims [3,-1] there, [3,640,640] here"), std::string::npos);
}

TEST(FallbackCompatTest, EveryPrimaryOutputMustExistWithTheSameDatatype) {
  ModelConfig fallback = DetSmall();
  fallback.outputs.pop_back();
  EXPECT_EQ(Why(Det(), fallback), "output 'count' is missing there");
  fallback = DetSmall();
  fallback.outputs[1].data_type = DataType::kInt64;
  EXPECT_EQ(Why(Det(), fallback), "output 'count' is TYPE_INT64 there, TYPE_INT32 here");
}

TEST(FallbackCompatTest, OutputDimsOfTheFallbackMustBeOnesThePrimaryClientsTake) {
  ModelConfig primary = Det();
  primary.outputs[0].dims = {-1, 6};
  ModelConfig fallback = DetSmall();
  // A primary -1 takes a fixed fallback dim, or a -1.
  fallback.outputs[0].dims = {50, 6};
  EXPECT_TRUE(CheckFallbackCompatible(primary, fallback).ok());
  fallback.outputs[0].dims = {-1, 6};
  EXPECT_TRUE(CheckFallbackCompatible(primary, fallback).ok());
  // A fixed primary dim needs the same fixed fallback dim: a fallback -1 may answer another size.
  EXPECT_EQ(Why(Det(), fallback),
            "output 'boxes' has dims [-1,6] there, [100,6] here (each dim there must be the one here, unless the one "
            "here is -1)");
  fallback.outputs[0].dims = {100, 5};
  EXPECT_NE(Why(Det(), fallback).find("output 'boxes' has dims [100,5] there, [100,6] here"), std::string::npos);
  fallback.outputs[0].dims = {600};
  EXPECT_NE(Why(Det(), fallback).find("output 'boxes' has dims [600] there"), std::string::npos);
}

TEST(FallbackCompatTest, MessagesQuoteAtMost64BytesOfAName) {
  ModelConfig primary = Det();
  primary.name = std::string(10000, 'p');
  ModelConfig fallback = DetSmall();
  fallback.name = std::string(10000, 'f');
  fallback.inputs[0].name = primary.inputs[0].name = std::string(10000, 'i');
  fallback.inputs[0].data_type = DataType::kFp16;
  Status s = CheckFallbackCompatible(primary, fallback);
  EXPECT_FALSE(s.ok());
  EXPECT_LT(s.message().size(), 400u) << s.message();
}

}  // namespace
}  // namespace weft
