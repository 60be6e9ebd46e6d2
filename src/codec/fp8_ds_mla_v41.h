// SPDX-License-Identifier: Apache-2.0
// Codec of DeepSeek V4.1's MXFP8 rows (528 B per token): the token's 512
// values (448 NoPE ++ 64 RoPE) as E4M3 in 16 tiles of 32 (its code row), and
// the 16 tiles' UE8M0 scales (its scale row). One definition for both pages:
// "fp8_ds_mla_v41" (FlashMLA ModelType::V41, token-major: the scale row right
// after the code row) and "fp8_ds_mla_v41_planar" (vLLM / SGLang, block-planar:
// the rows in the two regions of the page); the page spec gives only where the
// rows lie. The UE8M0 rule is the V4 page's (CodecFp8DsMlaV4::scale_byte), so
// all three records give a tile the same scale.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/fp8_ds_mla_v4.h"
#include "format/specs.h"

namespace mlakv::codec {

template <class PageSpec>
struct CodecDsv41Mxfp8 {
  using Spec = PageSpec;
  static constexpr int kNope = Spec::kNopeDims;
  static constexpr int kRope = Spec::kRopeDims;
  /// The token's two rows as the writers and readers address them: the code
  /// row and the scale row, in the token's record or in the page's regions.
  static constexpr format::Field kDataRow = Spec::kCodes;
  static constexpr format::Field kScaleRow = Spec::kScales;

  /// A part is one tile: 32 values, NoPE for tiles 0..13, RoPE for 14 and 15.
  static constexpr int kParts = Spec::kTiles;
  static constexpr int kPartValues = Spec::kTileSize;

  /// The 16-bit inputs of tile `tile` (no tile straddles NoPE and RoPE).
  MLAKV_HD static const std::uint16_t* tile_input(int tile, const std::uint16_t* nope, const std::uint16_t* rope) {
    const int start = tile * Spec::kTileSize;
    return start < kNope ? nope + start : rope + (start - kNope);
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_part(int part, const std::uint16_t* nope, const std::uint16_t* rope,
                                   std::uint8_t* data_row, std::uint8_t* scale_row) {
    const std::uint16_t* x = tile_input(part, nope, rope);
    float amax = 0.0f;
    MLAKV_UNROLL
    for (int i = 0; i < Spec::kTileSize; ++i) amax = fold_amax(amax, load_input<kDtype>(x[i]));
    const std::uint8_t byte = CodecFp8DsMlaV4::scale_byte(amax);
    const float scale = CodecFp8DsMlaV4::scale_value(byte, /*for_encoding=*/true);
    MLAKV_UNROLL
    for (int i = 0; i < Spec::kTileSize; ++i) {
      data_row[part * Spec::kTileSize + i] = encode_e4m3(div_rn(load_input<kDtype>(x[i]), scale));
    }
    scale_row[part] = byte;
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                                    std::uint8_t* scale_row) {
    for (int part = 0; part < kParts; ++part) encode_part<kDtype>(part, nope, rope, data_row, scale_row);
  }

  /// Tile `part` decoded: decode_E4M3(code) * 2^(byte - 127), exact; byte 0xFF reads as NaN.
  MLAKV_HD static void decode_part(int part, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                   float* values) {
    const float scale = CodecFp8DsMlaV4::scale_value(scale_row[part], /*for_encoding=*/false);
    for (int i = 0; i < Spec::kTileSize; ++i) values[i] = decode_e4m3(data_row[part * Spec::kTileSize + i]) * scale;
  }

  MLAKV_HD static void decode_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope,
                                    float* rope) {
    for (int part = 0; part < kParts; ++part) {
      const int start = part * kPartValues;
      decode_part(part, data_row, scale_row, start < kNope ? nope + start : rope + (start - kNope));
    }
  }
};

using CodecFp8DsMlaV41 = CodecDsv41Mxfp8<format::FormatDsv41Mxfp8>;
using CodecFp8DsMlaV41Planar = CodecDsv41Mxfp8<format::FormatDsv41Mxfp8Planar>;

}  // namespace mlakv::codec
