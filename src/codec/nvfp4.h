// SPDX-License-Identifier: Apache-2.0
// NVFP4 groups of 16 E2M1 codes with one E4M3 scale byte: the pieces shared by
// the 432, 368, 368-pts and 352 records. Kernels call these per group.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/nvfp4_compare.h"
#include "codec/token.h"
#include "format/specs.h"

namespace mlakv::codec {

using format::kNvfp4GroupSize;

inline constexpr float kE2m1Max = 6.0f;
inline constexpr float kE4m3Max = 448.0f;
// The nearest f32 to 1/448 and to 1/(448 * 6): ABI.md multiplies by these.
inline constexpr float kInvE4m3Max = 1.0f / kE4m3Max;
inline constexpr float kInvE4m3TimesE2m1Max = 1.0f / (kE4m3Max * kE2m1Max);
// The 352 record's smallest group scale, 2^-9 (E4M3's smallest subnormal,
// code 0x01), and its largest scale byte, 0x7E (448).
inline constexpr float kRoundedUpScaleFloor = 0x1p-9f;
inline constexpr std::uint8_t kE4m3MaxCode = 0x7E;

// Packs 16 codes, element 2i in the low nibble of byte i.
// (packed is 8-byte aligned: a group's codes start at 8g of a 16-byte aligned record.)
template <class ToCode>
MLAKV_HD void pack_e2m1_group(const float* x, ToCode to_code, std::uint8_t* packed) {
  std::uint8_t bytes[kNvfp4GroupSize / 2];
  MLAKV_UNROLL
  for (int i = 0; i < kNvfp4GroupSize / 2; ++i) {
    bytes[i] = static_cast<std::uint8_t>(to_code(x[2 * i]) | (to_code(x[2 * i + 1]) << 4));
  }
  store_aligned<kNvfp4GroupSize / 2>(packed, bytes);
}

MLAKV_HD float group_amax(const float* x) {
  float amax = 0.0f;
  MLAKV_UNROLL
  for (int j = 0; j < kNvfp4GroupSize; ++j) amax = fold_amax(amax, x[j]);
  return amax;
}

/// Static recipe (implicit global scale 1): returns the scale byte.
MLAKV_HD std::uint8_t encode_nvfp4_group_static(const float* x, std::uint8_t* packed) {
  const std::uint8_t sbyte = encode_e4m3(div_rn(group_amax(x), kE2m1Max));
  const float s = decode_e4m3(sbyte);
  pack_e2m1_group(
      x, [s](float v) { return s == 0.0f ? std::uint8_t{0} : encode_e2m1(div_rn(v, s)); }, packed);
  return sbyte;
}

/// Two-level recipe of the pts record: values are first divided by the token
/// scale st (> 0); the caller stores all-zero groups when st == 0.
MLAKV_HD std::uint8_t encode_nvfp4_group_two_level(const float* x, float st, std::uint8_t* packed) {
  const std::uint8_t sbyte = encode_e4m3(div_rn(div_rn(group_amax(x), st), kE2m1Max));
  const float s = decode_e4m3(sbyte);
  pack_e2m1_group(
      x, [s, st](float v) { return s == 0.0f ? std::uint8_t{0} : encode_e2m1(div_rn(div_rn(v, st), s)); }, packed);
  return sbyte;
}

/// The 352 record's (upstream vLLM's) group scale byte from amax / 6:
/// sf = max(amax / 6, 2^-9), E4M3(sf) rounded to nearest, then bumped to the
/// next code where that decodes below sf, so that no |x| <= amax passes
/// 6 * scale (rounding to nearest can land a third low near the 2^-9 floor);
/// 0x7E (448) is never bumped. Positive E4M3 codes rise with their values, so
/// the next code is the next value. Never 0: the floor is code 0x01.
MLAKV_HD std::uint8_t rounded_up_scale_byte(float amax_over_6) {
  const float sf = max_ignoring_nan(amax_over_6, kRoundedUpScaleFloor);
  std::uint8_t sbyte = encode_e4m3(sf);
  if (decode_e4m3(sbyte) < sf && sbyte < kE4m3MaxCode) ++sbyte;
  return sbyte;
}

/// The 352 record's group, literally: codes are E2M1 of x times RN(1 / s), a
/// product with the correctly rounded reciprocal (upstream's recipe), not a
/// division. s >= 2^-9, so the reciprocal is finite.
MLAKV_HD std::uint8_t encode_nvfp4_group_rounded_up(const float* x, std::uint8_t* packed) {
  const std::uint8_t sbyte = rounded_up_scale_byte(div_rn(group_amax(x), kE2m1Max));
  const float inv_s = reciprocal_of(decode_e4m3(sbyte));
  pack_e2m1_group(
      x, [inv_s](float v) { return encode_e2m1(v * inv_s); }, packed);
  return sbyte;
}

/// Decodes 16 values as (decode_E2M1(code) * scale) * outer_scale, the
/// product order of ABI.md (the first product is exact).
MLAKV_HD void decode_nvfp4_group(const std::uint8_t* packed, float scale, float outer_scale, float* out) {
  std::uint8_t bytes[kNvfp4GroupSize / 2];
  load_aligned<kNvfp4GroupSize / 2>(bytes, packed);
  MLAKV_UNROLL
  for (int i = 0; i < kNvfp4GroupSize / 2; ++i) {
    out[2 * i] = decode_e2m1(bytes[i] & 0xF) * scale * outer_scale;
    out[2 * i + 1] = decode_e2m1(bytes[i] >> 4) * scale * outer_scale;
  }
}

/// A lane's two E4M3 RoPE codes decoded, multiplied by `scale` and rounded to
/// bf16, the first in the low half (one paired conversion on the GPU).
MLAKV_HD std::uint32_t decode_rope_pair_bf16(const std::uint8_t* codes, float scale) {
  std::uint16_t rope[2];
  decode_e4m3_times_scale_bf16<2>(codes, scale, rope);
  return static_cast<std::uint32_t>(rope[0]) | static_cast<std::uint32_t>(rope[1]) << 16;
}

/// Four RoPE pairs' E4M3 codes (8 bytes, 8-byte aligned), each decoded as
/// decode_rope_pair_bf16 does, from one load.
MLAKV_HD void decode_rope_quad_bf16(const std::uint8_t* codes, float scale, std::uint32_t (&pairs)[4]) {
  alignas(8) std::uint8_t bytes[8];
  load_aligned<8>(bytes, codes);
  MLAKV_UNROLL
  for (int i = 0; i < 4; ++i) pairs[i] = decode_rope_pair_bf16(bytes + 2 * i, scale);
}

}  // namespace mlakv::codec

namespace mlakv::codec {

using format::Nvfp4Latent;

MLAKV_HD std::uint8_t* group_codes(std::uint8_t* record, int g) {
  return record + Nvfp4Latent::kCodes.offset + g * (kNvfp4GroupSize / 2);
}
MLAKV_HD const std::uint8_t* group_codes(const std::uint8_t* record, int g) {
  return record + Nvfp4Latent::kCodes.offset + g * (kNvfp4GroupSize / 2);
}

/// amax / 6 as a product with RN(1/6) and one FMA residual step: the
/// correctly rounded quotient for every 16-bit amax (a CPU test checks all of
/// them against the division), in a third of the division's instructions.
/// The pts scale byte applies it to f32 quotients amax / st; its own
/// exhaustive GPU test covers those.
MLAKV_HD float divide_amax_by_e2m1_max(float amax) {
  return amax < INFINITY ? quotient_by_reciprocal(amax, kE2m1Max, 1.0f / kE2m1Max) : amax;
}

/// amax / 448 the same way, for the fp8_ds_mla tile scale: the correctly
/// rounded quotient for every 16-bit amax (a CPU test checks all of them).
MLAKV_HD float divide_amax_by_e4m3_max(float amax) {
  return amax < INFINITY ? quotient_by_reciprocal(amax, kE4m3Max, kInvE4m3Max) : amax;
}

/// Group g of the static NVFP4 latent (the 432 and 368 records). The CPU
/// follows ABI.md literally; the GPU counts decision points instead of
/// dividing (codec/nvfp4_compare.h), proven equal exhaustively, and takes
/// the amax of input pairs.
template <InputDtype kDtype>
MLAKV_HD void encode_latent_group_static(int g, const std::uint16_t* bits, std::uint8_t* record) {
#if defined(__CUDA_ARCH__)
  bool nan_free = true;
  const float amax = pair_amax_or_nan<kDtype, kNvfp4GroupSize>(bits, &nan_free);
  const std::uint8_t sbyte = encode_e4m3(divide_amax_by_e2m1_max(amax));
  const float s = decode_e4m3(sbyte);
  if (nan_free && s != 0.0f) {
    record[Nvfp4Latent::kGroupScales.offset + g] = sbyte;
    encode_e2m1_group_nan_free<kDtype>(bits, E2m1Thresholds<kDtype>(s), group_codes(record, g));
    return;
  }
  // A group holding a NaN takes its amax again, ignoring the NaN; s == 0 gives all-zero codes.
  const std::uint8_t slow_sbyte =
      nan_free ? sbyte : encode_e4m3(divide_amax_by_e2m1_max(pair_amax<kDtype, kNvfp4GroupSize>(bits)));
  record[Nvfp4Latent::kGroupScales.offset + g] = slow_sbyte;
  encode_e2m1_group_by_compare<kDtype>(bits, decode_e4m3(slow_sbyte), group_codes(record, g));
#else
  float x[kNvfp4GroupSize];
  load_inputs<kDtype, kNvfp4GroupSize>(bits, x);
  record[Nvfp4Latent::kGroupScales.offset + g] = encode_nvfp4_group_static(x, group_codes(record, g));
#endif
}

/// Group g of the 352 record's latent, its scale byte stored at `scale`
/// (the record permutes them): on the GPU, groups without NaN count decision
/// points against their scale byte's row of a table built at compile time
/// (E2m1Thresholds::for_reciprocal_scale_byte, proven equal exhaustively);
/// the CPU, and groups holding a NaN, follow ABI.md literally.
template <InputDtype kDtype>
MLAKV_HD void encode_latent_group_rounded_up(int g, const std::uint16_t* bits, std::uint8_t* scale,
                                             std::uint8_t* record) {
#if defined(__CUDA_ARCH__)
  bool nan_free = true;
  const float amax = pair_amax_or_nan<kDtype, kNvfp4GroupSize>(bits, &nan_free);  // the amax where nan_free
  if (nan_free) {
    const std::uint8_t sbyte = rounded_up_scale_byte(divide_amax_by_e2m1_max(amax));
    *scale = sbyte;
    encode_e2m1_group_nan_free<kDtype>(bits, E2m1Thresholds<kDtype>::for_reciprocal_scale_byte(sbyte),
                                       group_codes(record, g));
    return;
  }
#endif
  float x[kNvfp4GroupSize];
  load_inputs<kDtype, kNvfp4GroupSize>(bits, x);
  *scale = encode_nvfp4_group_rounded_up(x, group_codes(record, g));
}

/// The pts record's scale byte of a group: E4M3(RN(RN(amax / st) / 6)). On
/// the GPU both divisions are reciprocal products with a residual step;
/// a GPU test checks every group amax <= every token amax of the input type.
MLAKV_HD std::uint8_t two_level_scale_byte(float group_amax, const TokenScaleDivider& divide) {
#if defined(__CUDA_ARCH__)
  return encode_e4m3(divide_amax_by_e2m1_max(divide(group_amax)));
#else
  return encode_e4m3(div_rn(div_rn(group_amax, divide.token_scale()), kE2m1Max));
#endif
}

/// Group g of the pts record's two-level latent, token scale st > 0: on the
/// GPU, groups without NaN (and a finite st) count decision points
/// (E2m1Thresholds::for_two_level, proven equal exhaustively) instead of two
/// divisions per value; the CPU, and the other groups, follow ABI.md literally.
template <InputDtype kDtype>
MLAKV_HD void encode_latent_group_two_level(int g, const std::uint16_t* bits, const TokenScaleDivider& divide,
                                            std::uint8_t* record) {
  std::uint8_t* scale = record + Nvfp4Latent::kGroupScales.offset + g;
#if defined(__CUDA_ARCH__)
  bool nan_free = true;
  const float amax = pair_amax_or_nan<kDtype, kNvfp4GroupSize>(bits, &nan_free);  // the amax where nan_free
  if (nan_free && divide.token_scale() < INFINITY) {
    const std::uint8_t sbyte = two_level_scale_byte(amax, divide);
    const float s = decode_e4m3(sbyte);
    *scale = sbyte;
    if (s != 0.0f) {
      encode_e2m1_group_nan_free<kDtype>(bits, E2m1Thresholds<kDtype>::for_two_level(divide, s),
                                         group_codes(record, g));
    } else {
      encode_e2m1_group_by_compare<kDtype>(bits, s, group_codes(record, g));  // all zeros for s == 0
    }
    return;
  }
#endif
  float x[kNvfp4GroupSize];
  load_inputs<kDtype, kNvfp4GroupSize>(bits, x);
  *scale = encode_nvfp4_group_two_level(x, divide.token_scale(), group_codes(record, g));
}

/// The scale byte of group g in the records that keep them in group order (432, 368, 368-pts).
MLAKV_HD std::uint8_t in_order_scale_byte(const std::uint8_t* record, int g) {
  return record[Nvfp4Latent::kGroupScales.offset + g];
}

/// The scale bytes of groups first + 8 i (i < 4, first < 8) in the records
/// that keep them in group order: two 16-byte loads of all 32 (which the 8
/// lanes of a token share), each byte picked by word and shift (a byte array
/// indexed by `first` would go to local memory).
MLAKV_HD void in_order_scale_bytes_strided(const std::uint8_t* record, int first,
                                           std::uint8_t (&bytes)[kStridedGroups]) {
  static_assert(Nvfp4Latent::kGroupScales.offset % 16 == 0 && Nvfp4Latent::kGroupScales.bytes == 32,
                "two aligned 16-byte loads hold every group's scale");
  alignas(16) std::uint32_t words[8];
  load_aligned<16>(reinterpret_cast<std::uint8_t*>(words), record + Nvfp4Latent::kGroupScales.offset);
  load_aligned<16>(reinterpret_cast<std::uint8_t*>(words + 4), record + Nvfp4Latent::kGroupScales.offset + 16);
  MLAKV_UNROLL
  for (int i = 0; i < kStridedGroups; ++i) {
    // Byte first + 8 i is in word 2 i + first / 4, at byte first % 4.
    const std::uint32_t word = (first & 4) != 0 ? words[2 * i + 1] : words[2 * i];
    bytes[i] = static_cast<std::uint8_t>(word >> (8 * (first & 3)));
  }
}

/// Decodes group g with scale byte `sbyte`; values are finally multiplied by `outer_scale`.
MLAKV_HD void decode_latent_group(int g, const std::uint8_t* record, std::uint8_t sbyte, float outer_scale,
                                  float* out) {
  decode_nvfp4_group(group_codes(record, g), decode_e4m3(sbyte), outer_scale, out);
}

/// The scaled E4M3 RoPE of the 368-byte records: rs = amax * (1/448).
MLAKV_HD float rope_scale(float rope_amax) { return rope_amax * kInvE4m3Max; }

/// A thread's one or two RoPE codes rs == 0 ? 0 : E4M3(r / rs), stored as
/// one access. They are kept in one 16-bit word, low byte first: a byte array
/// costs the GPU byte extractions and a permute to put the word back together.
template <InputDtype kDtype, int kN>
MLAKV_HD void encode_rope_scaled_e4m3(const std::uint16_t* bits, float rs, std::uint8_t* codes) {
  static_assert(kN == 1 || kN == 2, "one or two RoPE values per thread");
  std::uint16_t word = 0;
  if (rs != 0.0f) {
    with_divisor(rs, [&](auto divide) {
      encode_e4m3_quotients<kDtype, kN>(bits, divide, reinterpret_cast<std::uint8_t*>(&word));
    });
  }
  store_aligned<kN>(codes, reinterpret_cast<const std::uint8_t*>(&word));
}

}  // namespace mlakv::codec

namespace mlakv::codec {

/// The 16 values of group g as bf16 bits: encode_bf16((decode_E2M1(code) * s)
/// * outer_scale) with s = decode_E4M3(sbyte), exactly as the CPU
/// computes it. On the GPU the E2M1 values come from a byte-permute table; with
/// no outer scale the products (at most 5 significant bits) are exact in bf16
/// and computed as bf16x2, otherwise in f32 as on the CPU (rounded to bf16 in
/// pairs when the outer scale is finite). A GPU test checks every (code, scale
/// byte) pair with finite, infinite and NaN outer scales.
MLAKV_HD void decode_latent_group_bf16(int g, const std::uint8_t* record, std::uint8_t sbyte, float outer_scale,
                                       std::uint16_t* out) {
  const float s = decode_e4m3(sbyte);
#if defined(__CUDA_ARCH__)
  std::uint32_t words[2];
  load_aligned<8>(reinterpret_cast<std::uint8_t*>(words), group_codes(record, g));
  std::uint32_t pairs[8];
  const bool exact_bf16 = outer_scale == 1.0f;
  // A finite outer scale makes no NaN (s is finite here), so the pair converts in one instruction.
  const bool finite_outer = outer_scale - outer_scale == 0.0f;
  if (s != s) {  // scale byte 0x7F / 0xFF: every value is NaN, stored as 0x7FFF
    MLAKV_UNROLL
    for (int i = 0; i < 8; ++i) pairs[i] = 0x7FFF7FFFu;
  } else {
    const __nv_bfloat162 scale2 = __float2bfloat162_rn(s);  // exact: 4 significant bits
    MLAKV_UNROLL
    for (int w = 0; w < 2; ++w) {
      const std::uint32_t codes = words[w];
      const std::uint32_t mag = codes & 0x77777777u;
      MLAKV_UNROLL
      for (int half = 0; half < 2; ++half) {
        // bf16 of |E2M1| {0, .5, 1, 1.5, 2, 3, 4, 6}: high bytes and low bytes by lookup.
        const std::uint32_t sel = half == 0 ? (mag & 0xFFFFu) : (mag >> 16);
        const std::uint32_t hi = __byte_perm(0x3F3F3F00u, 0x40404040u, sel);
        const std::uint32_t lo = __byte_perm(0xC0800000u, 0xC0804000u, sel);
        const std::uint32_t c = half == 0 ? codes : codes >> 16;  // this half's 4 codes in bits 0..15
        const std::uint32_t v[2] = {__byte_perm(lo, hi, 0x5140) | ((c << 12) & 0x8000u) | ((c << 24) & 0x80000000u),
                                    __byte_perm(lo, hi, 0x7362) | ((c << 4) & 0x8000u) | ((c << 16) & 0x80000000u)};
        MLAKV_UNROLL
        for (int k = 0; k < 2; ++k) {
          if (exact_bf16) {
            pairs[4 * w + 2 * half + k] = bits_of(__hmul2(vec_from_bits<__nv_bfloat162>(v[k]), scale2));
          } else if (finite_outer) {
            const float lo_value = __uint_as_float(v[k] << 16) * s * outer_scale;
            const float hi_value = __uint_as_float(v[k] & 0xFFFF0000u) * s * outer_scale;
            pairs[4 * w + 2 * half + k] = bits_of(__floats2bfloat162_rn(lo_value, hi_value));
          } else {
            const float lo_value = __uint_as_float(v[k] << 16) * s * outer_scale;
            const float hi_value = __uint_as_float(v[k] & 0xFFFF0000u) * s * outer_scale;
            pairs[4 * w + 2 * half + k] =
                encode_bf16(lo_value) | (static_cast<std::uint32_t>(encode_bf16(hi_value)) << 16);
          }
        }
      }
    }
  }
  memcpy(out, pairs, sizeof(pairs));
#else
  float values[kNvfp4GroupSize];
  decode_nvfp4_group(group_codes(record, g), s, outer_scale, values);
  for (int i = 0; i < kNvfp4GroupSize; ++i) out[i] = encode_bf16(values[i]);
#endif
}

}  // namespace mlakv::codec
