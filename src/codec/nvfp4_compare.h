// SPDX-License-Identifier: Apache-2.0
// The static NVFP4 recipe's E2M1 codes without a division, for the GPU.
//
// For a 16-bit input x and a scale s > 0 that is an E4M3 value, fl(x / s)
// passes a rounding decision point T of the E2M1 grid exactly when |x| passes
// s * T: s * T has at most 7 significant bits and lies inside x's exponent
// range, so it is itself a value of x's type, and rounding x / s to f32 moves
// it by far less than one step of that type. The code is therefore the number
// of decision points |x| passes, counted two values at a time with bf16x2 /
// half2 comparisons. An exhaustive test over every 16-bit x and every nonzero
// E4M3 s proves it equals E2M1(x / s) as the CPU reference computes it.
#pragma once

#include <cstdint>

#include "codec/element.h"

namespace mlakv::codec {

template <InputDtype kDtype>
struct PairOps;

template <>
struct PairOps<InputDtype::kBf16> {
  using Vec = __nv_bfloat162;
  static constexpr std::uint32_t kCountBase = 0x43004300u;  // 128.0: 128 + c keeps c in the low bits
  static constexpr std::uint32_t kInf = 0x7F807F80u;
  static constexpr int kNanShift = 4;  // __hisnan2 gives 0x3F80; >> 4 leaves bit 3 (and 19) set
  MLAKV_HD static Vec splat(float v) { return __float2bfloat162_rn(v); }
};

template <>
struct PairOps<InputDtype::kFp16> {
  using Vec = __half2;
  static constexpr std::uint32_t kCountBase = 0x64006400u;  // 1024.0
  static constexpr std::uint32_t kInf = 0x7C007C00u;
  static constexpr int kNanShift = 7;  // __hisnan2 gives 0x3C00; >> 7 leaves bit 3 (and 19) set
  MLAKV_HD static Vec splat(float v) { return __float2half2_rn(v); }
};

template <class Vec>
MLAKV_HD Vec vec_from_bits(std::uint32_t bits) {
  Vec v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

template <class Vec>
MLAKV_HD std::uint32_t bits_of(Vec v) {
  std::uint32_t bits;
  memcpy(&bits, &v, sizeof(bits));
  return bits;
}

/// s * T for the seven decision points of RNE onto {0, .5, 1, 1.5, 2, 3, 4, 6}.
template <InputDtype kDtype>
struct E2m1Thresholds {
  typename PairOps<kDtype>::Vec t[7];
  MLAKV_HD explicit E2m1Thresholds(float s) {
    constexpr float kPoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    MLAKV_UNROLL
    for (int k = 0; k < 7; ++k) t[k] = PairOps<kDtype>::splat(s * kPoints[k]);  // exact products
  }
};

/// Codes of the two values in `pair` (element 2i low, 2i+1 high), packed as one byte.
template <InputDtype kDtype>
MLAKV_HD std::uint8_t e2m1_pair_by_compare(std::uint32_t pair, const E2m1Thresholds<kDtype>& thr) {
  using Ops = PairOps<kDtype>;
  using Vec = typename Ops::Vec;
  const Vec x = vec_from_bits<Vec>(pair);
  // NaN counts as +inf (code 7) and loses its sign below; fmin-style min drops NaN.
  const Vec a = __hmin2(__habs2(x), vec_from_bits<Vec>(Ops::kInf));
  Vec count = vec_from_bits<Vec>(Ops::kCountBase);
  // Ties go to the even code: strict where the code below is even, not where it is odd.
  count = __hadd2(count, __hgt2(a, thr.t[0]));
  count = __hadd2(count, __hge2(a, thr.t[1]));
  count = __hadd2(count, __hgt2(a, thr.t[2]));
  count = __hadd2(count, __hge2(a, thr.t[3]));
  count = __hadd2(count, __hgt2(a, thr.t[4]));
  count = __hadd2(count, __hge2(a, thr.t[5]));
  count = __hadd2(count, __hgt2(a, thr.t[6]));
  const std::uint32_t nan = (bits_of(__hisnan2(x)) >> Ops::kNanShift) & 0x00080008u;
  const std::uint32_t sign = (pair >> 12) & 0x00080008u & ~nan;
  const std::uint32_t codes = (bits_of(count) & 0x00070007u) | sign;
  return static_cast<std::uint8_t>((codes & 0xFu) | ((codes >> 12) & 0xF0u));
}

/// The 16 codes of a group with scale s (s == 0: all codes 0).
template <InputDtype kDtype>
MLAKV_HD void encode_e2m1_group_by_compare(const std::uint16_t* bits, float s, std::uint8_t* packed) {
  std::uint8_t bytes[8] = {};
  if (s != 0.0f) {
    const E2m1Thresholds<kDtype> thr(s);
    MLAKV_UNROLL
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t pair =
          static_cast<std::uint32_t>(bits[2 * i]) | (static_cast<std::uint32_t>(bits[2 * i + 1]) << 16);
      bytes[i] = e2m1_pair_by_compare<kDtype>(pair, thr);
    }
  }
  store_aligned<8>(packed, bytes);
}

}  // namespace mlakv::codec
