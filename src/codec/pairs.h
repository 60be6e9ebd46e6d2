// SPDX-License-Identifier: Apache-2.0
// Two 16-bit inputs as one bf16x2 / half2 value: the GPU's paired
// instructions do the work of two scalar ones, and the half-precision ones run
// on the FMA pipe, leaving the integer pipe (the writers' bottleneck) free.
#pragma once

#include <cstdint>

#include "codec/element.h"

namespace mlakv::codec {

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

template <InputDtype kDtype>
struct PairOps;

template <>
struct PairOps<InputDtype::kBf16> {
  using Vec = __nv_bfloat162;
  static constexpr std::uint32_t kCountBase = 0x43004300u;  // 128.0: 128 + c keeps c in the low bits
  static constexpr std::uint32_t kInf = 0x7F807F80u;
  static constexpr int kNanShift = 4;  // __hisnan2 gives 0x3F80; >> 4 leaves bit 3 (and 19) set
  MLAKV_HD static Vec splat(float v) { return __float2bfloat162_rn(v); }
  MLAKV_HD static Vec pair(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
};

template <>
struct PairOps<InputDtype::kFp16> {
  using Vec = __half2;
  static constexpr std::uint32_t kCountBase = 0x64006400u;  // 1024.0
  static constexpr std::uint32_t kInf = 0x7C007C00u;
  static constexpr int kNanShift = 7;  // __hisnan2 gives 0x3C00; >> 7 leaves bit 3 (and 19) set
  MLAKV_HD static Vec splat(float v) { return __float2half2_rn(v); }
  MLAKV_HD static Vec pair(float lo, float hi) { return __floats2half2_rn(lo, hi); }
};

/// The bits of the input-type value nearest to v (high half 0), by the paired
/// conversion splat uses (F2FP); the scalar one compiles to F2F.
template <InputDtype kDtype>
MLAKV_HD std::uint32_t nearest_bits(float v) {
  return bits_of(PairOps<kDtype>::pair(v, 0.0f));
}

/// Half `half` (0: low, 1: high) of `word` in both halves of a word.
MLAKV_HD std::uint32_t both_halves(std::uint32_t word, int half = 0) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(word, 0u, half == 0 ? 0x1010 : 0x3232);
#else
  const std::uint32_t bits = (word >> (16 * half)) & 0xFFFFu;
  return bits | (bits << 16);
#endif
}

/// Inputs 2i (low half) and 2i + 1 (high half) as one word.
MLAKV_HD std::uint32_t input_pair(const std::uint16_t* bits, int i) {
  return static_cast<std::uint32_t>(bits[2 * i]) | (static_cast<std::uint32_t>(bits[2 * i + 1]) << 16);
}

/// Bytes 0 and 2 of `lo` then bytes 0 and 2 of `hi` (CUDA's __byte_perm(lo, hi, 0x6420)).
MLAKV_HD std::uint32_t even_bytes(std::uint32_t lo, std::uint32_t hi) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, 0x6420);
#else
  return (lo & 0xFFu) | ((lo >> 8) & 0xFF00u) | ((hi & 0xFFu) << 16) | ((hi << 8) & 0xFF000000u);
#endif
}

/// 0xFF for each of the four values of two pairs (`lo`'s two, then `hi`'s)
/// whose sign bit is set, else 0x00: one permute whose selector asks for each
/// value's high byte with its sign replicated (PTX prmt's default mode).
MLAKV_HD std::uint32_t sign_bytes(std::uint32_t lo, std::uint32_t hi) {
#if defined(__CUDA_ARCH__)
  std::uint32_t bytes;
  asm("prmt.b32 %0, %1, %2, 0xFDB9;" : "=r"(bytes) : "r"(lo), "r"(hi));
  return bytes;
#else
  const auto mask = [](std::uint32_t word, int bit, std::uint32_t byte) { return (word >> bit & 1u) != 0 ? byte : 0u; };
  return mask(lo, 15, 0xFFu) | mask(lo, 31, 0xFF00u) | mask(hi, 15, 0xFF0000u) | mask(hi, 31, 0xFF000000u);
#endif
}

/// The larger half of a pair of 16-bit values, as f32.
template <InputDtype kDtype, class Vec>
MLAKV_HD float larger_half(Vec v) {
  const std::uint32_t m = bits_of(v);
  return fmaxf(load_input<kDtype>(static_cast<std::uint16_t>(m & 0xFFFFu)),
               load_input<kDtype>(static_cast<std::uint16_t>(m >> 16)));
}

/// max(|x|) over kN inputs (kN even), NaNs ignored, as f32: exactly the
/// scalar fold's value, since the largest of a set does not depend on how it
/// is found.
template <InputDtype kDtype, int kN>
MLAKV_HD float pair_amax(const std::uint16_t* bits) {
  static_assert(kN % 2 == 0, "inputs come in pairs");
  using Vec = typename PairOps<kDtype>::Vec;
  Vec amax = vec_from_bits<Vec>(0u);
  MLAKV_UNROLL
  for (int i = 0; i < kN / 2; ++i) {
    // __hmax2 takes the other operand when one is NaN, as fmaxf does.
    amax = __hmax2(amax, __habs2(vec_from_bits<Vec>(input_pair(bits, i))));
  }
  return larger_half<kDtype>(amax);
}

/// The same max taken NaN-propagating, one max per pair: pair_amax's value
/// when no input is NaN (`nan_free`), else a value to discard. The group
/// encoders' fast path needs both the amax and the flag; a group holding a
/// NaN leaves it and takes pair_amax on the slow path, so the common case
/// makes one max per pair instead of two, with no branch before its scale.
template <InputDtype kDtype, int kN>
MLAKV_HD float pair_amax_or_nan(const std::uint16_t* bits, bool* nan_free) {
  static_assert(kN % 2 == 0, "inputs come in pairs");
  using Vec = typename PairOps<kDtype>::Vec;
  Vec with_nan = vec_from_bits<Vec>(0u);
  MLAKV_UNROLL
  for (int i = 0; i < kN / 2; ++i) with_nan = __hmax2_nan(with_nan, __habs2(vec_from_bits<Vec>(input_pair(bits, i))));
  *nan_free = bits_of(__hisnan2(with_nan)) == 0u;
  return larger_half<kDtype>(with_nan);
}

}  // namespace mlakv::codec
