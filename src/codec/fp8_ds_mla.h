// SPDX-License-Identifier: Apache-2.0
// Codec of the "fp8_ds_mla" record (656 B, FlashMLA): 4 tiles of 128 E4M3
// values with f32 tile scales, then k_pe's raw 16-bit values.
#pragma once

#include <cfloat>

#include "codec/nvfp4.h"
#include "codec/token.h"

namespace mlakv::codec {

struct CodecFp8DsMla {
  using Spec = format::FormatFp8DsMla;
  static constexpr int kTileSize = format::kFp8TileSize;

  /// ts = max(amax / 448, FLT_MIN): never zero, so a zero tile divides cleanly.
  MLAKV_HD static float tile_scale(float amax) { return fmaxf(div_rn(amax, kE4m3Max), FLT_MIN); }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_tile(const std::uint16_t* kv_c_tile, std::uint8_t* codes, std::uint8_t* scale_field) {
    float amax = 0.0f;
    for (int i = 0; i < kTileSize; ++i) amax = fold_amax(amax, load_input<kDtype>(kv_c_tile[i]));
    const float ts = tile_scale(amax);
    store_f32(scale_field, ts);
    for (int i = 0; i < kTileSize; ++i) codes[i] = encode_e4m3(div_rn(load_input<kDtype>(kv_c_tile[i]), ts));
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams&,
                              std::uint8_t* record) {
    for (int t = 0; t < format::kFp8Tiles; ++t) {
      encode_tile<kDtype>(kv_c + t * kTileSize, record + Spec::kLatent.offset + t * kTileSize,
                          record + Spec::kTileScales.offset + t * static_cast<int>(sizeof(float)));
    }
    for (int i = 0; i < kRopeDim; ++i) store_u16(record + Spec::kRope.offset + 2 * i, k_pe[i]);
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams& params, float* kv_c, float* k_pe) {
    for (int t = 0; t < format::kFp8Tiles; ++t) {
      const float ts = load_f32(record + Spec::kTileScales.offset + t * static_cast<int>(sizeof(float)));
      for (int i = 0; i < kTileSize; ++i) {
        kv_c[t * kTileSize + i] = decode_e4m3(record[Spec::kLatent.offset + t * kTileSize + i]) * ts;
      }
    }
    for (int i = 0; i < kRopeDim; ++i) {
      const std::uint16_t bits = load_u16(record + Spec::kRope.offset + 2 * i);
      k_pe[i] = params.rope_dtype == InputDtype::kBf16 ? load_input<InputDtype::kBf16>(bits)
                                                       : load_input<InputDtype::kFp16>(bits);
    }
  }
};

}  // namespace mlakv::codec
