#pragma once

#include <cstdint>

namespace weft {

// IEEE 754 binary16 (FP16) and bfloat16 (BF16) from and to float, rounding to nearest even. Values too large
// become infinities; NaN stays NaN. JSON carries these types as ordinary numbers, so the codec converts here.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bits);

}  // namespace weft
