#include "backends/common/openblas_core.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace weft {
namespace {

constexpr CpuVectorFeatures kSse3Only{};
constexpr CpuVectorFeatures kAvx{.avx = true};
constexpr CpuVectorFeatures kAvx2{.avx = true, .avx2_fma = true};
constexpr CpuVectorFeatures kAvx512{.avx = true, .avx2_fma = true, .avx512 = true};
constexpr CpuVectorFeatures kAvx512Bf16{.avx = true, .avx2_fma = true, .avx512 = true, .avx512_bf16 = true};

TEST(OpenBlasCoreToUseTest, APrescottChoiceOnACpuWithAvxBecomesTheBestSetItsFeaturesAllow) {
  EXPECT_EQ(OpenBlasCoreToUse("Prescott", false, kAvx512Bf16), "Cooperlake");
  EXPECT_EQ(OpenBlasCoreToUse("Prescott", false, kAvx512), "SkylakeX");
  EXPECT_EQ(OpenBlasCoreToUse("Prescott", false, kAvx2), "Haswell");
  EXPECT_EQ(OpenBlasCoreToUse("Prescott", false, kAvx), "Sandybridge");
}

TEST(OpenBlasCoreToUseTest, ARealPrescottAnyOtherChoiceAndTheUsersOwnAreLeftAlone) {
  EXPECT_EQ(OpenBlasCoreToUse("Prescott", false, kSse3Only), std::nullopt);
  EXPECT_EQ(OpenBlasCoreToUse("Haswell", false, kAvx512Bf16), std::nullopt);  // OpenBLAS knew this CPU
  EXPECT_EQ(OpenBlasCoreToUse("Zen", false, kAvx2), std::nullopt);
  EXPECT_EQ(OpenBlasCoreToUse("Prescott", true, kAvx512Bf16), std::nullopt);  // OPENBLAS_CORETYPE=Prescott
}

TEST(DetectCpuVectorFeaturesTest, EachLevelImpliesTheOnesBelowIt) {
  const CpuVectorFeatures features = DetectCpuVectorFeatures();
  EXPECT_TRUE(!features.avx512_bf16 || features.avx512);
  EXPECT_TRUE(!features.avx512 || features.avx2_fma);
  EXPECT_TRUE(!features.avx2_fma || features.avx);
}

// The real library, loaded as the runtimes load it: its own choice at load, then weft's, then a product through
// the kernels chosen.
TEST(FixOpenBlasCoreForThisCpuTest, OpenBlasEndsOnKernelsThisCpuRunsAndTheyMultiplyRight) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice";
  void* library = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) GTEST_SKIP() << "no OpenBLAS here: " << ::dlerror();
  const std::string at_load = OpenBlasCore();
  if (at_load.empty()) GTEST_SKIP() << "this OpenBLAS has no run-time choice of kernels";

  const std::optional<OpenBlasCoreChange> change = FixOpenBlasCoreForThisCpu();
  const std::optional<std::string> expected = OpenBlasCoreToUse(at_load, false, DetectCpuVectorFeatures());
  ASSERT_EQ(change.has_value(), expected.has_value()) << "OpenBLAS chose " << at_load;
  if (change) {
    EXPECT_EQ(change->from, at_load);
    EXPECT_EQ(change->to, *expected);
    EXPECT_EQ(OpenBlasCore(), *expected);
  }
  if (DetectCpuVectorFeatures().avx) {
    EXPECT_NE(OpenBlasCore(), "Prescott");
  }
  EXPECT_EQ(FixOpenBlasCoreForThisCpu(), std::nullopt) << "a second call changes nothing";

  // C = A (3x70) times B (70x5), row-major, through cblas_sgemm: sizes that take the kernels' edge cases too.
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
  auto sgemm = reinterpret_cast<Sgemm>(::dlsym(library, "cblas_sgemm"));
  ASSERT_NE(sgemm, nullptr);
  constexpr int kM = 3, kK = 70, kN = 5;
  std::vector<float> a(kM * kK), b(kK * kN), c(kM * kN, -1.0f);
  for (int i = 0; i < kM * kK; ++i) a[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (int i = 0; i < kK * kN; ++i) b[i] = static_cast<float>((i * 5) % 13) - 6.0f;
  constexpr int kRowMajor = 101, kNoTrans = 111;
  sgemm(kRowMajor, kNoTrans, kNoTrans, kM, kN, kK, 1.0f, a.data(), kK, b.data(), kN, 0.0f, c.data(), kN);
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      float expected_value = 0;
      for (int k = 0; k < kK; ++k) expected_value += a[i * kK + k] * b[k * kN + j];
      EXPECT_EQ(c[i * kN + j], expected_value) << i << "," << j;  // small integers: exact in float
    }
  }
}

}  // namespace
}  // namespace weft
