// SPDX-License-Identifier: Apache-2.0
// Codec of DeepSeek V4.1's FP4 rows (288 B per token): the token's 512
// values (448 NoPE ++ 64 RoPE) as packed E2M1 in 32 tiles of 16 (its code
// row), and the 32 tiles' E4M3 scales in tile order (its scale row). One
// definition for both pages: "nvfp4_ds_mla_v41" (FlashMLA ModelType::V41_FP4,
// token-major) and "nvfp4_ds_mla_v41_planar" (vLLM / SGLang, block-planar);
// the page spec gives only where the rows lie. A tile's scale is E4M3 round-to-nearest of
// clamp(amax / 6, 2^-9, 448) (no step-up, no outer scale). As in FlashMLA's
// reference, a NaN in the tile makes its scale the E4M3 NaN, which reads the
// whole tile as NaN, and an inf counts as FLT_MAX: its tile's scale is 448
// and the inf is coded +-6 (what vLLM's writer stores too).
#pragma once

#include <math.h>

#include <cfloat>
#include <cstdint>

#include "codec/element.h"
#include "codec/nvfp4.h"
#include "codec/v4_lanes.h"
#include "format/specs.h"

namespace mlakv::codec {

template <class PageSpec>
struct CodecDsv41Fp4 {
  using Spec = PageSpec;
  static constexpr int kNope = Spec::kNopeDims;
  static constexpr int kRope = Spec::kRopeDims;
  static constexpr format::Field kDataRow = Spec::kCodes;
  static constexpr format::Field kScaleRow = Spec::kScales;

  /// A tile is 16 values, one lane (codec/v4_lanes.h): tiles 0..27 the NoPE, 28..31 the RoPE.
  static constexpr int kTileLanes = Spec::kTileSize / kV4LaneValues;
  static_assert(kTileLanes == 1 && kNope == kV4NopeDims && Spec::kCodes.offset == 0);
  static constexpr std::uint8_t kNanScale = 0x7F;  // E4M3's NaN

  /// |x| folded into the amax as FlashMLA's reference folds it
  /// (nan_to_num(|x|, nan=inf), posinf left at its default, FLT_MAX): a NaN
  /// makes the amax inf, so the tile's scale NaN; an inf counts as FLT_MAX.
  MLAKV_HD static float fold_poisoned_amax(float amax, float x) {
    const float a = fabsf(x);
    return x != x ? INFINITY : max_ignoring_nan(amax, a < INFINITY ? a : FLT_MAX);
  }

  /// The E4M3 scale byte of a tile of amax `amax` (an inf amax, from a NaN, gives the NaN byte).
  MLAKV_HD static std::uint8_t scale_byte(float amax) {
    if (!(amax < INFINITY)) return kNanScale;
    const float s = div_rn(amax, kE2m1Max);  // finite, >= 0
    return encode_e4m3(s < Spec::kMinScale ? Spec::kMinScale : (s > Spec::kMaxScale ? Spec::kMaxScale : s));
  }

  /// The tile's amax, a NaN counting as inf and an inf as FLT_MAX: on the GPU
  /// one NaN-propagating max per input pair, inf where it met a NaN.
  template <InputDtype kDtype>
  MLAKV_HD static float lane_amax(const std::uint16_t* x) {
#if defined(__CUDA_ARCH__)
    bool nan_free = true;
    const float amax = pair_amax_or_nan<kDtype, kV4LaneValues>(x, &nan_free);
    return nan_free ? fminf(amax, FLT_MAX) : INFINITY;  // an inf counts as FLT_MAX, as fold_poisoned_amax
#else
    float amax = 0.0f;
    for (int i = 0; i < kV4LaneValues; ++i) amax = fold_poisoned_amax(amax, load_input<kDtype>(x[i]));
    return amax;
#endif
  }

  /// The tile's scale byte and 8 bytes of codes, E2M1(x / scale) with one f32
  /// division (the scale is never 0; an inf divides to +-inf and saturates to
  /// +-6); a NaN-scale tile stores zero codes. On the GPU a finite amax means
  /// no input is NaN (an inf counts as FLT_MAX), and the codes count decision
  /// points (E2m1Thresholds: the static NVFP4 recipe's E2M1(x / s), proven
  /// equal for every 16-bit x, infs included, and nonzero E4M3 s).
  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, float tile_amax, const std::uint16_t* x, std::uint8_t* data_row,
                                   std::uint8_t* scale_row) {
    const std::uint8_t byte = scale_byte(tile_amax);
    std::uint8_t* codes = data_row + lane * (kV4LaneValues / 2);
    scale_row[lane] = byte;
    if (byte == kNanScale) {
      const std::uint8_t zeros[kV4LaneValues / 2] = {};
      store_aligned<kV4LaneValues / 2>(codes, zeros);
      return;
    }
    const float scale = decode_e4m3(byte);
#if defined(__CUDA_ARCH__)
    encode_e2m1_group_nan_free<kDtype>(x, E2m1Thresholds<kDtype>(scale), codes);
#else
    for (int i = 0; i < kV4LaneValues; i += 2) {
      codes[i / 2] = static_cast<std::uint8_t>(encode_e2m1(div_rn(load_input<kDtype>(x[i]), scale)) |
                                               (encode_e2m1(div_rn(load_input<kDtype>(x[i + 1]), scale)) << 4));
    }
#endif
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                                    std::uint8_t* scale_row) {
    encode_v4_token<CodecDsv41Fp4, kDtype>(nope, rope, data_row, scale_row);
  }

  /// The lane's values: decode_E2M1(code) * decode_E4M3(scale), exact (at
  /// most 2 + 4 significant bits); the NaN scale reads the tile as NaN.
  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                   float* values) {
    decode_nvfp4_group(data_row + lane * (kV4LaneValues / 2), decode_e4m3(scale_row[lane]), 1.0f, values);
  }

  /// decode_lane's values as bf16 bits: the NVFP4 groups' bf16 decode with no
  /// outer scale (decode_latent_group_bf16, group `lane` of codes at offset 0).
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                        std::uint16_t* values) {
    static_assert(Nvfp4Latent::kCodes.offset == 0 && kV4LaneValues == kNvfp4GroupSize,
                  "lane l's codes are the 432 record's group l");
    decode_latent_group_bf16(lane, data_row, scale_row[lane], 1.0f, values);
  }

  MLAKV_HD static void decode_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope,
                                    float* rope) {
    decode_v4_token<CodecDsv41Fp4>(data_row, scale_row, nope, rope);
  }
};

using CodecNvfp4DsMlaV41 = CodecDsv41Fp4<format::FormatDsv41Fp4>;
using CodecNvfp4DsMlaV41Planar = CodecDsv41Fp4<format::FormatDsv41Fp4Planar>;

}  // namespace mlakv::codec
