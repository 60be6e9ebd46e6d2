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

  /// Tile `tile` (NoPE values [64 tile, 64 tile + 64)): its amax, scale byte and codes.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_tile(int tile, const std::uint16_t* nope, std::uint8_t* data_row,
                                   std::uint8_t* scale_row) {
    const std::uint16_t* x = nope + tile * Spec::kTileSize;
    float amax = 0.0f;
    MLAKV_UNROLL
    for (int i = 0; i < Spec::kTileSize; ++i) amax = fold_amax(amax, load_input<kDtype>(x[i]));
    const std::uint8_t byte = scale_byte(amax);
    const float scale = scale_value(byte, /*for_encoding=*/true);
    MLAKV_UNROLL
    for (int i = 0; i < Spec::kTileSize; ++i) {
      data_row[Spec::kNope.offset + tile * Spec::kTileSize + i] = encode_e4m3(div_rn(load_input<kDtype>(x[i]), scale));
    }
    scale_row[Spec::kScales.offset + tile] = byte;
  }

  /// The RoPE values of the data row and the scale row's zero pad.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_rope(const std::uint16_t* rope, std::uint8_t* data_row, std::uint8_t* scale_row) {
    for (int i = 0; i < kRope; ++i)
      store_u16(data_row + Spec::kRope.offset + 2 * i, input_as_bf16_bits<kDtype>(rope[i]));
    scale_row[Spec::kScalePad.offset] = 0;
  }

  /// A token is kParts independent parts (the 7 tiles, then the RoPE and the
  /// pad), each writing its own bytes: the CPU runs them in order, a CUDA
  /// thread runs one.
  static constexpr int kParts = Spec::kTiles + 1;

  template <InputDtype kDtype>
  MLAKV_HD static void encode_part(int part, const std::uint16_t* nope, const std::uint16_t* rope,
                                   std::uint8_t* data_row, std::uint8_t* scale_row) {
    if (part < Spec::kTiles) {
      encode_tile<kDtype>(part, nope, data_row, scale_row);
    } else {
      encode_rope<kDtype>(rope, data_row, scale_row);
    }
  }

  /// Every byte of the token's data row and scale row.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                                    std::uint8_t* scale_row) {
    for (int part = 0; part < kParts; ++part) encode_part<kDtype>(part, nope, rope, data_row, scale_row);
  }

  /// Part `part` decoded into its 64 values: tile k's NoPE values [64k,
  /// 64k + 64) as decode_E4M3(code) * 2^(byte - 127) (exact), or the 64 RoPE
  /// values (bf16).
  static constexpr int kPartValues = Spec::kTileSize;
  static_assert(Spec::kTileSize == kRope, "a tile and the RoPE are both 64 values");

  MLAKV_HD static void decode_part(int part, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                   float* values) {
    if (part < Spec::kTiles) {
      const float scale = scale_value(scale_row[Spec::kScales.offset + part], /*for_encoding=*/false);
      for (int i = 0; i < Spec::kTileSize; ++i) {
        values[i] = decode_e4m3(data_row[Spec::kNope.offset + part * Spec::kTileSize + i]) * scale;
      }
    } else {
      for (int i = 0; i < kRope; ++i) {
        values[i] = load_input<InputDtype::kBf16>(load_u16(data_row + Spec::kRope.offset + 2 * i));
      }
    }
  }

  MLAKV_HD static void decode_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope,
                                    float* rope) {
    for (int part = 0; part < kParts; ++part) {
      decode_part(part, data_row, scale_row, part < Spec::kTiles ? nope + part * Spec::kTileSize : rope);
    }
  }
};

}  // namespace mlakv::codec
