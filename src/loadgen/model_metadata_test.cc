#include "loadgen/model_metadata.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(ModelMetadataTest, ParsesInputsAndOutputs) {
  auto m = ParseModelMetadata(R"({"name":"sleep","versions":["1"],"platform":"weft_builtin",
      "inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,1]},{"name":"T","datatype":"BYTES","shape":[2]}],
      "outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,1]}]})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, "sleep");
  ASSERT_EQ(m->inputs.size(), 2u);
  EXPECT_EQ(m->inputs[0].name, "INPUT0");
  EXPECT_EQ(m->inputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(m->inputs[0].shape, (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(m->inputs[1].datatype, DataType::kBytes);
  ASSERT_EQ(m->outputs.size(), 1u);
}

TEST(ModelMetadataTest, RejectsMalformedMetadata) {
  EXPECT_FALSE(ParseModelMetadata("not json").ok());
  EXPECT_FALSE(ParseModelMetadata("[]").ok());
  EXPECT_FALSE(ParseModelMetadata(R"({"name":"m"})").ok());
  EXPECT_FALSE(ParseModelMetadata(R"({"inputs":[{"name":"a","datatype":"FP33","shape":[1]}]})").ok());
  EXPECT_FALSE(ParseModelMetadata(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[-2]}]})").ok());
  EXPECT_FALSE(ParseModelMetadata(R"({"inputs":[{"name":"a","datatype":"FP32"}]})").ok());
  auto error = ParseModelMetadata(R"({"inputs":[{"name":"x","datatype":"FP32","shape":["a"]}]})");
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.status().message().find("'x'"), std::string::npos) << error.status().message();
}

TEST(ModelMetadataTest, ReadsMaxBatchSizeAbsentMeansZero) {
  EXPECT_EQ(*ParseMaxBatchSize(R"({"name":"m","max_batch_size":64})"), 64);
  EXPECT_EQ(*ParseMaxBatchSize(R"({"name":"m"})"), 0);
  EXPECT_FALSE(ParseMaxBatchSize(R"({"max_batch_size":"x"})").ok());
  EXPECT_FALSE(ParseMaxBatchSize("nope").ok());
}

}  // namespace
}  // namespace weft
