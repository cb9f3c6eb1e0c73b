#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace weft {

// libtorch (and OpenCV, where it uses BLAS) runs its matrix products on the system's OpenBLAS, which picks its
// kernels for the CPU once, when it is loaded. OpenBLAS 0.3.21 (Debian 12) does not know Intel family 6 CPUs with
// an extended model it has no case for (Emerald Rapids, model 0xCF, among them): its detection falls through to
// the Pentium 4 branch and picks "Prescott", SSE3 kernels, on a CPU with AVX-512. A small matrix product then
// takes three times as long (the peers' MLP at batch 1 under libtorch: 39 against 15 µs). README, "Model
// repository", says what users see.

// The vector instructions that OpenBLAS's kernel sets need, as the CPU and the OS offer them.
struct CpuVectorFeatures {
  bool avx = false;
  bool avx2_fma = false;     // AVX2 and FMA: OpenBLAS's "Haswell" kernels
  bool avx512 = false;       // AVX-512 F, VL, BW, DQ: "SkylakeX"
  bool avx512_bf16 = false;  // and AVX-512 BF16: "Cooperlake"
};

CpuVectorFeatures DetectCpuVectorFeatures();

// The kernel set OpenBLAS should use instead of `chosen` (the name OpenBLAS reports), or nullopt to leave it:
// only a "Prescott" choice on a CPU with AVX is replaced, by the best set the features allow, and never when the
// user chose one (OPENBLAS_CORETYPE set). Pure.
std::optional<std::string> OpenBlasCoreToUse(std::string_view chosen, bool chosen_by_user,
                                             const CpuVectorFeatures& features);

struct OpenBlasCoreChange {
  std::string from;
  std::string to;
};

// Replaces OpenBLAS's kernel set when OpenBlasCoreToUse says so, through OpenBLAS's own re-initialisation with
// OPENBLAS_CORETYPE set (which the process's children inherit). Nothing happens without OpenBLAS in the process
// or with one built for a single CPU (no run-time choice). Call once at start-up, on one thread, before any
// model runs. Returns the change made, if any.
std::optional<OpenBlasCoreChange> FixOpenBlasCoreForThisCpu();

// The kernel set OpenBLAS uses now; empty without a run-time-dispatching OpenBLAS in the process.
std::string OpenBlasCore();

}  // namespace weft
