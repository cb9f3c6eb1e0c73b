#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace weft {

// How far one answer of the candidate is from the primary's answer to the same request. Pure.
struct Comparison {
  // Over every element of every compared output: the largest |candidate - primary|, and the largest of that over
  // |primary| (elements where the primary is 0 count only when the candidate is not: then the ratio is infinite).
  // NaN against NaN is equal; NaN against a number differs infinitely.
  double max_abs = 0;
  double max_rel = 0;
  // Classification-like outputs (floating point, last dimension >= 2): rows compared, and rows whose arg max agrees.
  // A row's arg max is its first largest value; NaN ranks above every number (as numpy's and torch's argmax).
  uint64_t top1_rows = 0;
  uint64_t top1_agree = 0;
  // The answers cannot be compared element by element: an output missing on one side, or differing in type or
  // shape. Counts as a divergence.
  bool mismatch = false;
  // Outputs not in host memory (a GPU tensor) are left out (their names, types and shapes are still checked); with
  // nothing compared the answer is not counted.
  bool compared = false;
};

// Compares the outputs by name. Numeric types are compared as doubles; BYTES (and any other non-numeric type) by
// their bytes: equal, or a mismatch.
Comparison CompareOutputs(std::span<const Tensor> primary, std::span<const Tensor> candidate);

}  // namespace weft
