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
#include "format/specs.h"

namespace mlakv::codec {

template <class PageSpec>
struct CodecDsv41Fp4 {
  using Spec = PageSpec;
  static constexpr int kNope = Spec::kNopeDims;
  static constexpr int kRope = Spec::kRopeDims;
  static constexpr format::Field kDataRow = Spec::kCodes;
  static constexpr format::Field kScaleRow = Spec::kScales;

  /// A part is one tile: 16 values, NoPE for tiles 0..27, RoPE for 28..31.
  static constexpr int kParts = Spec::kTiles;
  static constexpr int kPartValues = Spec::kTileSize;
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

  MLAKV_HD static const std::uint16_t* tile_input(int tile, const std::uint16_t* nope, const std::uint16_t* rope) {
    const int start = tile * Spec::kTileSize;
    return start < kNope ? nope + start : rope + (start - kNope);
  }

  /// Tile `part`: its scale byte and 8 bytes of codes, E2M1(x / scale) with
  /// one f32 division (the scale is never 0; an inf divides to +-inf and
  /// saturates to +-6); a NaN-scale tile stores zero codes.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_part(int part, const std::uint16_t* nope, const std::uint16_t* rope,
                                   std::uint8_t* data_row, std::uint8_t* scale_row) {
    const std::uint16_t* x = tile_input(part, nope, rope);
    float amax = 0.0f;
    MLAKV_UNROLL
    for (int i = 0; i < Spec::kTileSize; ++i) amax = fold_poisoned_amax(amax, load_input<kDtype>(x[i]));
    const std::uint8_t byte = scale_byte(amax);
    const float scale = decode_e4m3(byte);
    std::uint8_t* codes = data_row + part * (Spec::kTileSize / 2);
    MLAKV_UNROLL
    for (int i = 0; i < Spec::kTileSize; i += 2) {
      std::uint8_t pair = 0;
      if (byte != kNanScale) {
        pair = static_cast<std::uint8_t>(encode_e2m1(div_rn(load_input<kDtype>(x[i]), scale)) |
                                         (encode_e2m1(div_rn(load_input<kDtype>(x[i + 1]), scale)) << 4));
      }
      codes[i / 2] = pair;
    }
    scale_row[part] = byte;
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                                    std::uint8_t* scale_row) {
    for (int part = 0; part < kParts; ++part) encode_part<kDtype>(part, nope, rope, data_row, scale_row);
  }

  /// Tile `part` decoded: decode_E2M1(code) * decode_E4M3(scale), exact (at
  /// most 2 + 4 significant bits); the NaN scale reads the tile as NaN.
  MLAKV_HD static void decode_part(int part, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                   float* values) {
    const float scale = decode_e4m3(scale_row[part]);
    const std::uint8_t* codes = data_row + part * (Spec::kTileSize / 2);
    for (int i = 0; i < Spec::kTileSize; i += 2) {
      values[i] = decode_e2m1(codes[i / 2] & 0xF) * scale;
      values[i + 1] = decode_e2m1(codes[i / 2] >> 4) * scale;
    }
  }

  MLAKV_HD static void decode_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope,
                                    float* rope) {
    for (int part = 0; part < kParts; ++part) {
      const int start = part * kPartValues;
      decode_part(part, data_row, scale_row, start < kNope ? nope + start : rope + (start - kNope));
    }
  }
};

using CodecNvfp4DsMlaV41 = CodecDsv41Fp4<format::FormatDsv41Fp4>;
using CodecNvfp4DsMlaV41Planar = CodecDsv41Fp4<format::FormatDsv41Fp4Planar>;

}  // namespace mlakv::codec
