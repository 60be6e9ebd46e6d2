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
#include "codec/v4_lanes.h"
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

  /// A tile is 32 values, two lanes (codec/v4_lanes.h): tiles 0..13 the NoPE, 14 and 15 the RoPE.
  static constexpr int kTileLanes = Spec::kTileSize / kV4LaneValues;
  static_assert(kNope == kV4NopeDims && Spec::kCodes.offset == 0 && Spec::kScales.bytes == kV4Lanes / kTileLanes);

  /// max |x| over the lane's 16 inputs, NaN ignored.
  template <InputDtype kDtype>
  MLAKV_HD static float lane_amax(const std::uint16_t* x) {
    return amax_of<kDtype, kV4LaneValues>(x);
  }

  /// The lane's 16 codes E4M3(x / 2^e) (one aligned store; the GPU multiplies
  /// by 2^-e, the same real number rounded once) and, for a tile's first
  /// lane, the tile's UE8M0 byte (the V4 page's rule).
  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, float tile_amax, const std::uint16_t* x, std::uint8_t* data_row,
                                   std::uint8_t* scale_row) {
    const std::uint8_t byte = CodecFp8DsMlaV4::scale_byte(tile_amax);
    alignas(16) std::uint8_t codes[kV4LaneValues];
    with_scale_divisor(CodecFp8DsMlaV4::scale_value(byte, /*for_encoding=*/true),
                       [&](auto divide) { encode_e4m3_quotients<kDtype, kV4LaneValues>(x, divide, codes); });
    store_aligned<kV4LaneValues>(data_row + lane * kV4LaneValues, codes);
    if (lane % kTileLanes == 0) scale_row[lane / kTileLanes] = byte;
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                                    std::uint8_t* scale_row) {
    encode_v4_token<CodecDsv41Mxfp8, kDtype>(nope, rope, data_row, scale_row);
  }

  /// The lane's values: decode_E4M3(code) * 2^(byte - 127), exact; byte 0xFF reads as NaN.
  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                   float* values) {
    decode_e4m3_times_scale<kV4LaneValues>(data_row + lane * kV4LaneValues, lane_scale(lane, scale_row), values);
  }

  /// decode_lane's values as bf16 bits (encode_bf16 of each), converted in pairs.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                        std::uint16_t* values) {
    decode_e4m3_times_scale_bf16<kV4LaneValues>(data_row + lane * kV4LaneValues, lane_scale(lane, scale_row), values);
  }

  MLAKV_HD static void decode_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope,
                                    float* rope) {
    decode_v4_token<CodecDsv41Mxfp8>(data_row, scale_row, nope, rope);
  }

 private:
  MLAKV_HD static float lane_scale(int lane, const std::uint8_t* scale_row) {
    return CodecFp8DsMlaV4::scale_value(scale_row[lane / kTileLanes], /*for_encoding=*/false);
  }
};

using CodecFp8DsMlaV41 = CodecDsv41Mxfp8<format::FormatDsv41Mxfp8>;
using CodecFp8DsMlaV41Planar = CodecDsv41Mxfp8<format::FormatDsv41Mxfp8Planar>;

}  // namespace mlakv::codec
