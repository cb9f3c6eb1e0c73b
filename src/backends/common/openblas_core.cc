#include "backends/common/openblas_core.h"

#include <dlfcn.h>

#include <cstdlib>

namespace weft {
namespace {

// OpenBLAS's own entry points, looked up at run time: a build without libtorch and OpenCV has no OpenBLAS, and a
// user may have switched the BLAS alternative to another library. gotoblas_dynamic_quit and gotoblas_dynamic_init
// are what OpenBLAS's constructor runs to choose the kernels (exported by every DYNAMIC_ARCH build: Debian's);
// init returns at once while a choice is held, hence quit first.
struct OpenBlasEntryPoints {
  using CoreName = char* (*)();
  using Hook = void (*)();
  CoreName core_name = nullptr;
  Hook quit = nullptr;
  Hook init = nullptr;

  static OpenBlasEntryPoints Find() {
    OpenBlasEntryPoints found;
    found.core_name = reinterpret_cast<CoreName>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    found.quit = reinterpret_cast<Hook>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
    found.init = reinterpret_cast<Hook>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
    return found;
  }
  bool dispatches() const { return core_name != nullptr && quit != nullptr && init != nullptr; }
};

}  // namespace

CpuVectorFeatures DetectCpuVectorFeatures() {
  __builtin_cpu_init();
  CpuVectorFeatures features;
  // GCC's and clang's checks include the OS's saving of the registers (XGETBV), as OpenBLAS's do.
  features.avx = __builtin_cpu_supports("avx");
  features.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  features.avx512 = features.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  features.avx512_bf16 = features.avx512 && __builtin_cpu_supports("avx512bf16");
  return features;
}

std::optional<std::string> OpenBlasCoreToUse(std::string_view chosen, bool chosen_by_user,
                                             const CpuVectorFeatures& features) {
  // A real Prescott has no AVX; with AVX, "Prescott" is the fall-through for an Intel family 6 model that 0.3.21
  // has no case for (the only misreading in its detection: unknown AMD families and other unknown Intel models
  // get the best set their features allow, and old sets on a CPU with AVX are otherwise deliberate, as Bobcat's
  // on AMD's Jaguar).
  if (chosen_by_user || chosen != "Prescott" || !features.avx) return std::nullopt;
  // OpenBLAS 0.3.21 does not find "Cooperlake" by name (its lookup stops one short of it), then picks by the
  // CPU's features, as here: Cooperlake all the same.
  if (features.avx512_bf16) return "Cooperlake";
  if (features.avx512) return "SkylakeX";
  if (features.avx2_fma) return "Haswell";
  return "Sandybridge";
}

std::optional<OpenBlasCoreChange> FixOpenBlasCoreForThisCpu() {
  const OpenBlasEntryPoints openblas = OpenBlasEntryPoints::Find();
  if (!openblas.dispatches()) return std::nullopt;
  const std::string before = openblas.core_name();
  const bool chosen_by_user = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  const std::optional<std::string> better = OpenBlasCoreToUse(before, chosen_by_user, DetectCpuVectorFeatures());
  if (!better) return std::nullopt;
  ::setenv("OPENBLAS_CORETYPE", better->c_str(), /*overwrite=*/0);
  openblas.quit();
  openblas.init();
  return OpenBlasCoreChange{.from = before, .to = openblas.core_name()};
}

std::string OpenBlasCore() {
  const OpenBlasEntryPoints openblas = OpenBlasEntryPoints::Find();
  return openblas.core_name != nullptr ? openblas.core_name() : "";
}

}  // namespace weft
