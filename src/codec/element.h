// SPDX-License-Identifier: Apache-2.0
// Element conversions of docs/ABI.md, defined by CUDA's own headers so that the
// CPU reference and the kernels share one definition.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <math.h>  // fmaxf, fminf, fabsf: the same functions on host and device

#include <cstdint>
#include <cstring>

#include "format/hd.h"

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

/// fmaxf that ignores a NaN operand, signalling NaNs included: x86's fmaxf
/// returns NaN for a signalling NaN, the GPU's never does, and ABI.md says a
/// NaN input never raises an amax.
MLAKV_HD float max_ignoring_nan(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  if (b != b) return a;
  if (a != a) return b;
  return a > b ? a : b;
#endif
}

/// fminf that ignores a NaN operand (see max_ignoring_nan).
MLAKV_HD float min_ignoring_nan(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fminf(a, b);
#else
  if (b != b) return a;
  if (a != a) return b;
  return a < b ? a : b;
#endif
}

MLAKV_HD float fold_amax(float amax, float x) { return max_ignoring_nan(amax, fabsf(x)); }

/// RN(1/d), the reciprocal the residual-step quotients multiply by: CUDA's
/// correctly rounded reciprocal, which for normal d is the hardware
/// approximation and one Newton step, cheaper than the division 1 / d with
/// its special-case check; rounded once like 1 / d on every architecture.
MLAKV_HD float reciprocal_of(float d) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(d);
#else
  return 1.0f / d;
#endif
}

/// x / d from r = RN(1/d): the product x * r corrected by one FMA residual
/// step (Markstein). Where it equals the division is proven per use.
MLAKV_HD float quotient_by_reciprocal(float x, float d, float r) {
  const float q = x * r;
  return fmaf(fmaf(-q, d, x), r, q);
}

/// Divides many values by one positive divisor d: fn(divide) runs with a
/// divide(x) that the CPU computes as x / d and the GPU as a product with
/// r = reciprocal_of(d) corrected by one FMA residual step (Markstein), which gives the
/// correctly rounded quotient's E4M3 code on the domains mlakv uses it for (an
/// exhaustive GPU test proves it). Below 2^-64 the residual of a quotient that
/// still matters would underflow, so tiny (and infinite) divisors are divided
/// exactly. The sign is copied from x so that -0 / d stays -0.
template <class Fn>
MLAKV_HD void with_divisor(float d, Fn&& fn) {
#if defined(__CUDA_ARCH__)
  if (d >= 0x1p-64f && d < INFINITY) {
    const float r = reciprocal_of(d);
    fn([d, r](float x) { return copysignf(quotient_by_reciprocal(x, d, r), x); });
    return;
  }
#endif
  fn([d](float x) { return div_rn(x, d); });
}

/// x / d as far as its E4M3 code tells, for a 16-bit input x and a divisor
/// d in [2^-64, 2^64] with r = reciprocal_of(d). Below |x * r| = 2^20 it is
/// the residual-step quotient, sign copied from x: while the quotient can
/// still round to a nonzero code below 448 (above 2^-11), every intermediate
/// is a normal f32, so the result does not depend on where in that range d
/// lies, and an exhaustive GPU test over every 16-bit x and every f32 d of
/// three binades proves it gives the correctly rounded quotient's code
/// (cuda_division.k_scale_quotients_give_the_codes_of_the_division_for_every_input).
/// From 2^20 on (inf and NaN included) the product itself is returned: it
/// saturates to the same code as the quotient, which is past 448 too.
MLAKV_HD float quotient_for_e4m3(float x, float d, float r) {
  const float q = x * r;
  if (!(fabsf(q) < 0x1p20f)) return q;
  return copysignf(quotient_by_reciprocal(x, d, r), x);
}

/// Divides many values by one caller-given scale d for their E4M3 codes:
/// fn(divide) runs with a divide(x) that the CPU computes as x / d. The GPU
/// multiplies by 1/d when d is a power of two whose reciprocal is a normal
/// f32 (x / 2^k and x * 2^-k are the same real number rounded once, so the
/// two agree for every x, subnormal, infinite and NaN results included);
/// takes quotient_for_e4m3 for any other d in [2^-64, 2^64] (a calibrated
/// k_scale: a product, two FMAs and a range check per value where a division
/// takes about ten instructions and a branch); and divides the rest.
template <class Fn>
MLAKV_HD void with_scale_divisor(float d, Fn&& fn) {
#if defined(__CUDA_ARCH__)
  std::uint32_t bits;
  memcpy(&bits, &d, sizeof(bits));
  if ((bits & 0x807FFFFFu) == 0 && bits >= 0x00800000u && bits <= 0x7E800000u) {  // 2^-126 <= d <= 2^126
    const float r = __uint_as_float(0x7F000000u - bits);  // 2^-k for d = 2^k: the exponent negated
    fn([r](float x) { return x * r; });
    return;
  }
  if (d >= 0x1p-64f && d <= 0x1p64f) {
    const float r = reciprocal_of(d);
    fn([d, r](float x) { return quotient_for_e4m3(x, d, r); });
    return;
  }
#endif
  fn([d](float x) { return div_rn(x, d); });
}

/// Stores n bytes to a destination aligned to n (n = 2, 4, 8 or 16) as one access on the GPU.
template <int kBytes>
MLAKV_HD void store_aligned(std::uint8_t* dst, const std::uint8_t* src) {
#if defined(__CUDA_ARCH__)
  if constexpr (kBytes == 16) {
    uint4 v;
    memcpy(&v, src, 16);
    *reinterpret_cast<uint4*>(dst) = v;
  } else if constexpr (kBytes == 8) {
    uint2 v;
    memcpy(&v, src, 8);
    *reinterpret_cast<uint2*>(dst) = v;
  } else if constexpr (kBytes == 4) {
    unsigned v;
    memcpy(&v, src, 4);
    *reinterpret_cast<unsigned*>(dst) = v;
  } else {
    memcpy(dst, src, kBytes);
  }
#else
  memcpy(dst, src, kBytes);
#endif
}

/// E4M3FN: round-to-nearest-even, saturate to +-448, NaN -> 0x7F.
MLAKV_HD std::uint8_t encode_e4m3(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

/// encode_e4m3 of two values, `lo` in the low byte: one conversion instruction
/// for both on the GPU (CUDA's paired form of the same conversion).
MLAKV_HD std::uint16_t encode_e4m3x2(float lo, float hi) {
  return static_cast<std::uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

MLAKV_HD float decode_e4m3(std::uint8_t code) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3))); }

/// decode_e4m3 of two codes, `pair`'s low byte first: CUDA's paired conversion
/// (one instruction on sm_89+), each value the single conversion's.
MLAKV_HD float2 decode_e4m3x2(std::uint16_t pair) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
}

/// E2M1 by comparing |x| with the round-to-nearest-even decision points of
/// the E2M1 grid {0, .5, 1, 1.5, 2, 3, 4, 6}; a tie goes to the even code, so
/// the comparison is strict or not by the parity of the code below it. NaN ->
/// 0x7, sign kept (-0 -> 0x8), saturates to +-6. Hopper has no E2M1
/// conversion instruction and CUDA's header falls back to double arithmetic
/// there; an exhaustive GPU test over all 2^32 floats proves this equals it.
MLAKV_HD std::uint8_t encode_e2m1_by_thresholds(float x) {
  std::uint32_t bits;
  memcpy(&bits, &x, sizeof(bits));
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7;                                           // NaN
  const std::uint32_t code = static_cast<std::uint32_t>(mag > 0x3E800000u) +   // 0.25: tie -> 0
                             static_cast<std::uint32_t>(mag >= 0x3F400000u) +  // 0.75: tie -> 1.0
                             static_cast<std::uint32_t>(mag > 0x3FA00000u) +   // 1.25: tie -> 1.0
                             static_cast<std::uint32_t>(mag >= 0x3FE00000u) +  // 1.75: tie -> 2.0
                             static_cast<std::uint32_t>(mag > 0x40200000u) +   // 2.5:  tie -> 2.0
                             static_cast<std::uint32_t>(mag >= 0x40600000u) +  // 3.5:  tie -> 4.0
                             static_cast<std::uint32_t>(mag > 0x40A00000u);    // 5.0:  tie -> 4.0
  return static_cast<std::uint8_t>(code | ((bits >> 28) & 0x8u));
}

/// The k-th decision point T of round-to-nearest-even onto the E2M1 grid
/// {0, .5, 1, 1.5, 2, 3, 4, 6}: ties at even k go down, at odd k up.
MLAKV_HD constexpr float e2m1_decision_point(int k) {
  constexpr float kPoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  return kPoints[k];
}

/// E2M1 (4-bit code in the low nibble): round-to-nearest-even, saturate to
/// +-6, NaN -> 0x7, -0 -> 0x8. CUDA's definition on the host and where the GPU
/// converts in hardware (Blackwell); the proven-equal comparison on Hopper.
MLAKV_HD std::uint8_t encode_e2m1(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1000
  return encode_e2m1_by_thresholds(x);
#else
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest));
#endif
}

/// CUDA's own E2M1 conversion, whatever the architecture: the reference the
/// exhaustive test compares encode_e2m1 with.
MLAKV_HD std::uint8_t encode_e2m1_cuda(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest));
}

/// E2M1 code -> value by building the f32 bits (e = code bits 2..1, m = bit 0):
/// 0, 0.5, then (1 + m/2) * 2^(e-1). Used on the GPU, where CUDA's header has
/// no conversion instruction before Blackwell; a test checks all 16 codes.
MLAKV_HD float decode_e2m1_by_bits(std::uint8_t code) {
  const std::uint32_t mag = code & 0x7u;
  const std::uint32_t normal = (((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22);
  std::uint32_t bits = mag >= 2 ? normal : (mag == 1 ? 0x3F000000u : 0u);
  bits |= static_cast<std::uint32_t>(code & 0x8u) << 28;
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

MLAKV_HD float decode_e2m1(std::uint8_t code) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1000
  return decode_e2m1_by_bits(code);
#else
  return __half2float(__half(__nv_cvt_fp4_to_halfraw(code & 0xF, __NV_E2M1)));
#endif
}

/// Readers store f32 NaN as the one canonical quiet NaN, so CPU and GPU
/// outputs agree bit for bit (their arithmetic makes NaNs of different signs).
MLAKV_HD float canonical_nan(float v) {
  if (v == v) return v;
  const std::uint32_t bits = 0x7FC00000u;
  float nan;
  memcpy(&nan, &bits, sizeof(nan));
  return nan;
}

/// f32 -> bf16 bits, round-to-nearest-even, every NaN stored as 0x7FFF.
MLAKV_HD std::uint16_t encode_bf16(float x) {
  if (x != x) return 0x7FFF;
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

/// encode_bf16 of two values, `lo` in the low half: on the GPU one paired
/// conversion instruction, which already stores every NaN as 0x7FFF
/// (conversion_proofs_test proves it equals encode_bf16 for every float in
/// either half).
MLAKV_HD std::uint32_t encode_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  std::uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));
  return bits;
#else
  return static_cast<std::uint32_t>(encode_bf16(lo)) | static_cast<std::uint32_t>(encode_bf16(hi)) << 16;
#endif
}

/// A 16-bit input as bf16 bits: bf16 copied bit for bit, fp16 rounded to
/// bf16 (NaN -> 0x7FFF). The bf16 RoPE fields of the 432 and V4 records.
template <InputDtype kDtype>
MLAKV_HD std::uint16_t input_as_bf16_bits(std::uint16_t bits) {
  if constexpr (kDtype == InputDtype::kBf16) {
    return bits;
  } else {
    return encode_bf16(load_input<kDtype>(bits));
  }
}

/// Loads n bytes from a source aligned to n (n = 2, 4, 8 or 16) as one access
/// on the GPU, where records are 16-byte aligned; the CPU reader takes any
/// cache alignment, so the host copies bytes.
template <int kBytes>
MLAKV_HD void load_aligned(std::uint8_t* dst, const std::uint8_t* src) {
#if defined(__CUDA_ARCH__)
  if constexpr (kBytes == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(src);
    memcpy(dst, &v, 16);
  } else if constexpr (kBytes == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    memcpy(dst, &v, 8);
  } else if constexpr (kBytes == 4) {
    const unsigned v = *reinterpret_cast<const unsigned*>(src);
    memcpy(dst, &v, 4);
  } else if constexpr (kBytes == 2) {
    const unsigned short v = *reinterpret_cast<const unsigned short*>(src);
    memcpy(dst, &v, 2);
  } else {
    memcpy(dst, src, kBytes);
  }
#else
  memcpy(dst, src, kBytes);
#endif
}

// Little-endian fields; every f32 and 16-bit field of every record is naturally aligned.
MLAKV_HD void store_f32(std::uint8_t* dst, float value) { memcpy(dst, &value, sizeof(float)); }
MLAKV_HD float load_f32(const std::uint8_t* src) {
  float value;
  load_aligned<sizeof(float)>(reinterpret_cast<std::uint8_t*>(&value), src);
  return value;
}
MLAKV_HD void store_u16(std::uint8_t* dst, std::uint16_t value) { memcpy(dst, &value, sizeof(value)); }
MLAKV_HD std::uint16_t load_u16(const std::uint8_t* src) {
  std::uint16_t value;
  load_aligned<sizeof(value)>(reinterpret_cast<std::uint8_t*>(&value), src);
  return value;
}
MLAKV_HD std::uint32_t load_u32(const std::uint8_t* src) {
  std::uint32_t value;
  load_aligned<sizeof(value)>(reinterpret_cast<std::uint8_t*>(&value), src);
  return value;
}
/// Two 16-bit values kept in one word (the first in the low half) stored in order.
MLAKV_HD void store_pair_bits(std::uint16_t* dst, std::uint32_t pair) {
  dst[0] = static_cast<std::uint16_t>(pair & 0xFFFFu);
  dst[1] = static_cast<std::uint16_t>(pair >> 16);
}

/// decode_e4m3(code) * scale of the kCount codes at `src` (aligned to kCount
/// on the GPU): the E4M3 RoPE of the 368 and 352 records, the V4 family's tiles.
template <int kCount>
MLAKV_HD void decode_e4m3_times_scale(const std::uint8_t* src, float scale, float* out) {
  std::uint8_t codes[kCount];
  load_aligned<kCount>(codes, src);
  MLAKV_UNROLL
  for (int i = 0; i < kCount; ++i) out[i] = decode_e4m3(codes[i]) * scale;
}

/// encode_bf16(decode_e4m3(code) * scale) of the kCount codes at `src`
/// (aligned to kCount), converting the codes two at a time (CUDA's paired
/// conversion) and rounding the products in pairs: the fp8 codecs' bf16 decode.
template <int kCount>
MLAKV_HD void decode_e4m3_times_scale_bf16(const std::uint8_t* src, float scale, std::uint16_t* out) {
  static_assert(kCount % 2 == 0 && kCount <= 16, "pairs of codes, one aligned load");
  std::uint32_t codes[(kCount + 3) / 4] = {};  // 4 codes a word, the first in the low byte
  load_aligned<kCount>(reinterpret_cast<std::uint8_t*>(codes), src);
  MLAKV_UNROLL
  for (int i = 0; i < kCount; i += 2) {
    const float2 v = decode_e4m3x2(static_cast<std::uint16_t>(codes[i / 4] >> (8 * (i % 4))));
    store_pair_bits(out + i, encode_bf16x2(v.x * scale, v.y * scale));
  }
}

}  // namespace mlakv::codec
