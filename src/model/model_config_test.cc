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
