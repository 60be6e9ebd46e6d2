// SPDX-License-Identifier: Apache-2.0
// An NVFP4 latent group decoded for the tensor cores: its 16 values as 8 bf16
// pairs, each value the codec's bf16 decode times kFragmentScale, the pairs in
// the order of fragment_dim. Device only; a GPU test checks every (code, scale
// byte) pair against decode_nvfp4_group.
//
// Why scaled: an E2M1 code s e1 e0 m placed as the bf16 bits
// (s << 15) | (e1 e0 m << 6) is the code's value times 2^-126 exactly (code
// 0.5 lands on a bf16 subnormal), so a group decodes with a few integer
// operations and one bf16x2 product per pair. The 2^126 cannot all go into
// the scale (448 * 2^126 overflows bf16); 2^118 can (at most 448 * 2^118 <
// 2^127), leaving values times 2^-8, which the attention undoes in f32 on the
// scores and the output (a power of two: exact). Why that pair order: codes
// k and k + 4 of a 32-bit word sit 16 bits apart, where one mask, one multiply
// and one mask put both into a bf16 pair; the dot product does not care about
// the order of the dims as long as the query uses the same one.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/pairs.h"

namespace mlakv::codec {

/// Fragment values are the codec's bf16 values times this.
inline constexpr float kFragmentScale = 0x1p-8f;

/// The dim (0..15, within its group) of half `half` (0: low) of fragment pair
/// `pair` (0..7): pair 4w + k holds the codes k and k + 4 of the group's
/// 32-bit code word w, dims 8w + k and 8w + k + 4.
MLAKV_HD constexpr int fragment_dim(int pair, int half) { return 8 * (pair / 4) + pair % 4 + 4 * half; }

#if defined(__CUDACC__)

/// Codes k and k + 4 (k = 0..3) of a word of 8 codes as the bf16 bits of
/// their values times 2^-126: the nibble at bit 4k (and 16 + 4k) is copied
/// to bits 6..9 and 12..15 by one multiply (the copies cannot overlap), and
/// the mask keeps the magnitude from the first copy and the sign from the second.
template <int kCode>
__device__ __forceinline__ std::uint32_t e2m1_pair_bits(std::uint32_t codes) {
  static_assert(kCode >= 0 && kCode < 4, "codes 0..3 pair with 4..7");
  constexpr std::uint32_t kNibbles = 0x000F000Fu << (4 * (kCode & 1));
  constexpr std::uint32_t kCopies = (kCode & 1) != 0 ? (1u << 2) | (1u << 8) : (1u << 6) | (1u << 12);
  const std::uint32_t word = kCode < 2 ? codes : codes >> 8;
  return ((word & kNibbles) * kCopies) & 0x81C081C0u;
}

/// A group's 8 code bytes (8-byte aligned) with scale byte `sbyte` as
/// fragment pairs: decode_E2M1(code) * decode_E4M3(sbyte) * kFragmentScale,
/// exact in bf16 (at most 5 significant bits, at least 2^-18 in magnitude); a
/// NaN scale makes NaN values.
__device__ __forceinline__ void decode_group_fragment(const std::uint8_t* codes, std::uint8_t sbyte,
                                                      std::uint32_t (&pairs)[8]) {
  const uint2 words = *reinterpret_cast<const uint2*>(codes);
  const __nv_bfloat162 scale = __float2bfloat162_rn(decode_e4m3(sbyte) * 0x1p118f);
  const std::uint32_t word[2] = {words.x, words.y};
  MLAKV_UNROLL
  for (int w = 0; w < 2; ++w) {
    pairs[4 * w + 0] = bits_of(__hmul2(vec_from_bits<__nv_bfloat162>(e2m1_pair_bits<0>(word[w])), scale));
    pairs[4 * w + 1] = bits_of(__hmul2(vec_from_bits<__nv_bfloat162>(e2m1_pair_bits<1>(word[w])), scale));
    pairs[4 * w + 2] = bits_of(__hmul2(vec_from_bits<__nv_bfloat162>(e2m1_pair_bits<2>(word[w])), scale));
    pairs[4 * w + 3] = bits_of(__hmul2(vec_from_bits<__nv_bfloat162>(e2m1_pair_bits<3>(word[w])), scale));
  }
}

/// The same group with a per-token outer scale (the pts record): the values
/// encode_bf16((decode_E2M1(code) * s) * outer) as the codec computes them,
/// unscaled (a NaN may keep another payload). The products code * s come
/// exact from the integer decode, and times outer * 2^8 (exact while
/// |outer| < 2^120) they round once, as the codec's f32 product does. Returns
/// false, writing nothing useful, for other outer scales (inf, NaN, huge):
/// the caller then takes the codec's path.
__device__ __forceinline__ bool decode_group_fragment_outer(const std::uint8_t* codes, std::uint8_t sbyte, float outer,
                                                            std::uint32_t (&pairs)[8]) {
  if (!(fabsf(outer) < 0x1p120f)) return false;
  decode_group_fragment(codes, sbyte, pairs);
  const float undo = outer * (1.0f / kFragmentScale);
  MLAKV_UNROLL
  for (int p = 0; p < 8; ++p) {
    const float low = __uint_as_float(pairs[p] << 16) * undo;
    const float high = __uint_as_float(pairs[p] & 0xFFFF0000u) * undo;
    pairs[p] = bits_of(__floats2bfloat162_rn(low, high));
  }
  return true;
}

/// 16 values in dim order (8 words of 2) regrouped into fragment pairs.
__device__ __forceinline__ void fragment_pairs_from_dim_order(const std::uint32_t (&in_order)[8],
                                                              std::uint32_t (&pairs)[8]) {
  MLAKV_UNROLL
  for (int p = 0; p < 8; ++p) {
    const int low = fragment_dim(p, 0);  // the high half is low + 4: the same half of the word two on
    pairs[p] = __byte_perm(in_order[low / 2], in_order[low / 2 + 2], low % 2 == 0 ? 0x5410 : 0x7632);
  }
}

#endif

}  // namespace mlakv::codec
