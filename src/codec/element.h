// SPDX-License-Identifier: Apache-2.0
// Element conversions of docs/ABI.md, defined by CUDA's own headers so that the
// CPU reference and the kernels share one definition.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <math.h>  // fmaxf, fminf, fabsf: the same functions on host and device

#include "codec/hd.h"

namespace mlakv::codec {

/// The two 16-bit input types; inputs travel as raw bits.
enum class InputDtype : std::uint8_t { kBf16, kFp16 };

// Exact widening of a 16-bit input to f32 (ABI: promotion before any arithmetic).
template <InputDtype kDtype>
MLAKV_HD float load_input(std::uint16_t bits) {
  if constexpr (kDtype == InputDtype::kBf16) {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

// One IEEE-754 f32 division rounded to nearest even, never an approximate reciprocal.
MLAKV_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}


// fmaxf ignores a NaN operand, so NaN inputs never raise an amax (ABI.md).
MLAKV_HD float fold_amax(float amax, float x) { return fmaxf(amax, fabsf(x)); }

/// E4M3FN: round-to-nearest-even, saturate to +-448, NaN -> 0x7F.
MLAKV_HD std::uint8_t encode_e4m3(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

MLAKV_HD float decode_e4m3(std::uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
}

/// E2M1 (4-bit code in the low nibble): round-to-nearest-even, saturate to
/// +-6, NaN -> 0x7, -0 -> 0x8.
MLAKV_HD std::uint8_t encode_e2m1(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest));
}

MLAKV_HD float decode_e2m1(std::uint8_t code) {
  return __half2float(__half(__nv_cvt_fp4_to_halfraw(code & 0xF, __NV_E2M1)));
}

/// f32 -> bf16 bits, round-to-nearest-even, every NaN stored as 0x7FFF.
MLAKV_HD std::uint16_t encode_bf16(float x) {
  if (x != x) return 0x7FFF;
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Little-endian f32 field access; memcpy keeps it free of alignment demands.
MLAKV_HD void store_f32(std::uint8_t* dst, float value) { memcpy(dst, &value, sizeof(float)); }
MLAKV_HD float load_f32(const std::uint8_t* src) {
  float value;
  memcpy(&value, src, sizeof(float));
  return value;
}
MLAKV_HD void store_u16(std::uint8_t* dst, std::uint16_t value) { memcpy(dst, &value, sizeof(value)); }
MLAKV_HD std::uint16_t load_u16(const std::uint8_t* src) {
  std::uint16_t value;
  memcpy(&value, src, sizeof(value));
  return value;
}

}  // namespace mlakv::codec
