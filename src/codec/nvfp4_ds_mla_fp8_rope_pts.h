// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_ds_mla_fp8_rope_pts" record (368 B): as the compact record,
// but the latent is two-level, with a per-token f32 scale st = amax / 2688.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4DsMlaFp8RopePts {
  using Spec = format::FormatNvfp4DsMlaFp8RopePts;

  template <InputDtype kDtype>
  MLAKV_HD static float token_scale(const std::uint16_t* kv_c) {
    float amax = 0.0f;
    for (int i = 0; i < kLatentDim; ++i) amax = fold_amax(amax, load_input<kDtype>(kv_c[i]));
    return amax * kInvE4m3TimesE2m1Max;
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams&,
                              std::uint8_t* record) {
    const float st = token_scale<kDtype>(kv_c);
    for (int g = 0; g < format::kNvfp4Groups; ++g) {
      std::uint8_t* packed = record + Spec::kCodes.offset + g * (kNvfp4GroupSize / 2);
      std::uint8_t* sbyte = record + Spec::kGroupScales.offset + g;
      if (st == 0.0f) {
        zero_bytes(packed, kNvfp4GroupSize / 2);
        *sbyte = 0;
        continue;
      }
      float x[kNvfp4GroupSize];
      load_inputs<kDtype, kNvfp4GroupSize>(kv_c + g * kNvfp4GroupSize, x);
      *sbyte = encode_nvfp4_group_two_level(x, st, packed);
    }
    store_f32(record + Spec::kRopeScale.offset, encode_rope_scaled_e4m3<kDtype>(k_pe, record + Spec::kRope.offset));
    store_f32(record + Spec::kTokenScale.offset, st);
    zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams&, float* kv_c, float* k_pe) {
    decode_latent(record, 1.0f, load_f32(record + Spec::kTokenScale.offset), kv_c);
    decode_rope_scaled_e4m3(record + Spec::kRope.offset, load_f32(record + Spec::kRopeScale.offset), k_pe);
  }
};

}  // namespace mlakv::codec
