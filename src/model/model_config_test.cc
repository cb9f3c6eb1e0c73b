#include "model/model_config.h"

#include <gtest/gtest.h>

#include "model/backend.h"

namespace weft {
namespace {

ModelConfig Mlp() {
  ModelConfig c;
  c.name = "mlp";
  c.platform = "pytorch_libtorch";
  c.max_batch_size = 8;
  c.inputs = {{"INPUT0", DataType::kFp32, {64}, std::nullopt}};
  c.outputs = {{"OUTPUT0", DataType::kFp32, {10}, std::nullopt}};
  return c;
}

TEST(ModelConfigTest, AcceptsValidConfig) {
  EXPECT_TRUE(ValidateModelConfig(Mlp()).ok());
  EXPECT_EQ(FullShape(Mlp(), Mlp().inputs[0]), (Shape{-1, 64}));
}

TEST(ModelConfigTest, RejectsDuplicatesBadDimsAndReshape) {
  auto c = Mlp();
  c.inputs.push_back(c.inputs[0]);
  EXPECT_NE(ValidateModelConfig(c).message().find("duplicate"), std::string::npos);
  c = Mlp();
  c.outputs[0].dims = {0};
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  c = Mlp();
  c.inputs[0].reshape = Shape{8, 9};
  EXPECT_NE(ValidateModelConfig(c).message().find("reshape"), std::string::npos);
  c = Mlp();
  c.dynamic_batching = DynamicBatchingConfig{};
  c.dynamic_batching->preferred_batch_size = {16};
  EXPECT_NE(ValidateModelConfig(c).message().find("preferred_batch_size"), std::string::npos);
}

class NullBackend : public Backend {
 public:
  Status Validate(const ModelConfig&) const override { return Status::Ok(); }
  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig&, const std::filesystem::path&,
                                                        int) const override {
    return Unimplemented("null");
  }
  std::string DefaultModelFilename() const override { return ""; }
};

// Triton's rule: a group's count is per listed GPU, and the instances go `count` to each GPU in the listed order.
TEST(ModelConfigTest, InstanceGroupCountIsPerListedGpu) {
  auto c = Mlp();
  EXPECT_EQ(c.InstanceCount(), 1);
  c.instance_groups = {{.name = "gpus", .count = 2, .kind = InstanceKind::kGpu, .gpus = {3, 1}},
                       {.name = "cpu", .count = 3, .kind = InstanceKind::kCpu, .gpus = {}}};
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  EXPECT_EQ(c.instance_groups[0].Instances(), 4);
  EXPECT_EQ(c.InstanceCount(), 7);
  std::vector<int> placed;
  for (int i = 0; i < c.instance_groups[0].Instances(); ++i) placed.push_back(c.instance_groups[0].GpuOf(i));
  EXPECT_EQ(placed, (std::vector<int>{3, 3, 1, 1}));
  EXPECT_EQ(c.instance_groups[1].GpuOf(0), -1);
}

TEST(ModelConfigTest, RejectsGpusOnCpuGroupsAndNegativeGpus) {
  auto c = Mlp();
  c.instance_groups = {{.name = "cpu", .count = 1, .kind = InstanceKind::kCpu, .gpus = {0}}};
  EXPECT_NE(ValidateModelConfig(c).message().find("KIND_CPU"), std::string::npos);
  c.instance_groups = {{.name = "gpu", .count = 1, .kind = InstanceKind::kGpu, .gpus = {-1}}};
  EXPECT_NE(ValidateModelConfig(c).message().find("negative"), std::string::npos);
}

TEST(BackendRegistryTest, ResolvesPlatformAndBackend) {
  BackendRegistry registry;
  auto backend = std::make_shared<NullBackend>();
  registry.Register("pytorch", {"pytorch_libtorch"}, backend);
  auto c = Mlp();
  EXPECT_EQ(registry.Find(c).value().get(), backend.get());
  c.platform = "";
  c.backend = "pytorch";
  EXPECT_TRUE(registry.Find(c).ok());
  c.backend = "tensorrt";
  EXPECT_NE(registry.Find(c).status().message().find("not available"), std::string::npos);
  c.backend = "";
  c.platform = "tensorrt_plan";
  EXPECT_NE(registry.Find(c).status().message().find("not supported"), std::string::npos);
}

}  // namespace
}  // namespace weft
