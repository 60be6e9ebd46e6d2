// SPDX-License-Identifier: Apache-2.0
// Codec of the "fp8_ds_mla_v4" page (584 B per token, DeepSeek V4: FlashMLA
// V4_FP8Sparse, vLLM fp8_ds_mla for V4): a token's data row holds its 448
// NoPE values as E4M3 in 7 tiles of 64 and its 64 RoPE values as bf16; its
// scale row holds the 7 tiles' UE8M0 scales and a zero byte. The rows live in
// different regions of a block-planar page (format::page_offset places them).
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/nvfp4.h"
#include "codec/token.h"
#include "codec/v4_lanes.h"
#include "format/specs.h"

namespace mlakv::codec {

struct CodecFp8DsMlaV4 {
  using Spec = format::FormatDsv4Fp8Sparse;
  static constexpr int kNope = Spec::kNopeDims;
  static constexpr int kRope = Spec::kRopeDims;
  /// The token's two rows as the writers and readers address them: the data
  /// row and the scale row, in their regions of the page.
  static constexpr format::Field kDataRow{0, Spec::kDataRowBytes, format::kDataRegion};
  static constexpr format::Field kScaleRow{0, Spec::kScaleRowBytes, format::kScaleRegion};

  /// The UE8M0 byte e + 127 of a tile, e the smallest integer with
  /// 2^e >= max(amax, 1e-4) / 448 (one f32 division): vLLM's writer, which
  /// floors the amax (FlashMLA's reference floors the quotient instead).
  /// An inf amax gives 0xFF.
  MLAKV_HD static std::uint8_t scale_byte(float amax) {
    const float ratio = div_rn(max_ignoring_nan(amax, Spec::kAmaxFloor), kE4m3Max);
    std::uint32_t bits = 0;
    memcpy(&bits, &ratio, sizeof(bits));
    const std::uint32_t biased = (bits >> 23) & 0xFFu;  // ratio >= 1e-4 / 448 is a positive normal or inf
    if (biased == 0xFFu) return 0xFF;
    return static_cast<std::uint8_t>(biased + ((bits & 0x7FFFFFu) != 0 ? 1u : 0u));
  }

  /// 2^(byte - 127) exactly (byte 0 is the subnormal 2^-127); 0xFF is UE8M0's
  /// NaN, decoded as NaN (FlashMLA's float8_e8m0fnu) and encoded with as inf
  /// (vLLM's exp2(128)), so a tile holding an inf stores zeros and NaN codes.
  MLAKV_HD static float scale_value(std::uint8_t byte, bool for_encoding) {
    std::uint32_t bits = byte == 0 ? 0x00400000u : static_cast<std::uint32_t>(byte) << 23;
    if (byte == 0xFF) bits = for_encoding ? 0x7F800000u : 0x7FC00000u;
    float value = 0.0f;
    memcpy(&value, &bits, sizeof(value));
    return value;
  }

  /// Lanes 0..27 each own a quarter of a tile of NoPE values; lanes 28..31 the RoPE (codec/v4_lanes.h).
  static constexpr int kTileLanes = Spec::kTileSize / kV4LaneValues;
  static_assert(kNope == kV4NopeDims && kRope == (kV4Lanes - kV4NopeLanes) * kV4LaneValues);

  /// max |x| over the lane's 16 inputs, NaN ignored (the RoPE lanes' is never used).
  template <InputDtype kDtype>
  MLAKV_HD static float lane_amax(const std::uint16_t* x) {
    return amax_of<kDtype, kV4LaneValues>(x);
  }

  /// A NoPE lane: its 16 codes E4M3(x / 2^e) (one aligned store; the GPU
  /// multiplies by 2^-e, the same real number rounded once) and, for a
  /// tile's first lane, the tile's scale byte. A RoPE lane: its 16 values as
  /// bf16, and lane 28 the scale row's zero pad.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, float tile_amax, const std::uint16_t* x, std::uint8_t* data_row,
                                   std::uint8_t* scale_row) {
    if (lane < kV4NopeLanes) {
      const std::uint8_t byte = scale_byte(tile_amax);
      alignas(16) std::uint8_t codes[kV4LaneValues];
      with_scale_divisor(scale_value(byte, /*for_encoding=*/true),
                         [&](auto divide) { encode_e4m3_quotients<kDtype, kV4LaneValues>(x, divide, codes); });
      store_aligned<kV4LaneValues>(data_row + Spec::kNope.offset + lane * kV4LaneValues, codes);
      if (lane % kTileLanes == 0) scale_row[Spec::kScales.offset + lane / kTileLanes] = byte;
      return;
    }
    alignas(16) std::uint16_t bf16[kV4LaneValues];
    MLAKV_UNROLL
    for (int i = 0; i < kV4LaneValues; ++i) bf16[i] = input_as_bf16_bits<kDtype>(x[i]);
    std::uint8_t* dst = data_row + Spec::kRope.offset + 2 * kV4LaneValues * (lane - kV4NopeLanes);
    store_aligned<16>(dst, reinterpret_cast<const std::uint8_t*>(bf16));
    store_aligned<16>(dst + 16, reinterpret_cast<const std::uint8_t*>(bf16) + 16);
    if (lane == kV4NopeLanes) scale_row[Spec::kScalePad.offset] = 0;
  }

  /// Every byte of the token's data row and scale row.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                                    std::uint8_t* scale_row) {
    encode_v4_token<CodecFp8DsMlaV4, kDtype>(nope, rope, data_row, scale_row);
  }

  /// The lane's 16 values: NoPE as decode_E4M3(code) * 2^(byte - 127)
  /// (exact), or RoPE (bf16).
  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                   float* values) {
    if (lane < kV4NopeLanes) {
      decode_e4m3_times_scale<kV4LaneValues>(data_row + Spec::kNope.offset + lane * kV4LaneValues,
                                             lane_scale(lane, scale_row), values);
      return;
    }
    alignas(16) std::uint16_t bits[kV4LaneValues];
    load_rope_lane(lane, data_row, bits);
    MLAKV_UNROLL
    for (int i = 0; i < kV4LaneValues; ++i) values[i] = load_input<InputDtype::kBf16>(bits[i]);
  }

  /// decode_lane's values as bf16 bits (encode_bf16 of each): codes
  /// converted two at a time, products rounded in pairs; RoPE bits kept but
  /// for NaNs, stored as 0x7FFF.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                        std::uint16_t* values) {
    if (lane < kV4NopeLanes) {
      decode_e4m3_times_scale_bf16<kV4LaneValues>(data_row + Spec::kNope.offset + lane * kV4LaneValues,
                                                  lane_scale(lane, scale_row), values);
      return;
    }
    load_rope_lane(lane, data_row, values);
    MLAKV_UNROLL
    for (int i = 0; i < kV4LaneValues; ++i) values[i] = encode_bf16(load_input<InputDtype::kBf16>(values[i]));
  }

  MLAKV_HD static void decode_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope,
                                    float* rope) {
    decode_v4_token<CodecFp8DsMlaV4>(data_row, scale_row, nope, rope);
  }

 private:
  /// The scale of a NoPE lane's tile; byte 0xFF reads as NaN.
  MLAKV_HD static float lane_scale(int lane, const std::uint8_t* scale_row) {
    return scale_value(scale_row[Spec::kScales.offset + lane / kTileLanes], /*for_encoding=*/false);
  }

  /// A RoPE lane's 16 bf16 values (two aligned 16-byte loads on the GPU).
  MLAKV_HD static void load_rope_lane(int lane, const std::uint8_t* data_row, std::uint16_t* bits) {
    const std::uint8_t* src = data_row + Spec::kRope.offset + 2 * kV4LaneValues * (lane - kV4NopeLanes);
    load_aligned<16>(reinterpret_cast<std::uint8_t*>(bits), src);
    load_aligned<16>(reinterpret_cast<std::uint8_t*>(bits) + 16, src + 16);
  }
};

}  // namespace mlakv::codec
