// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_fp8_ds_mla" record (352 B, upstream vLLM / FlashMLA):
// NVFP4 latent with 64x-boosted scale bytes, then 64 clamped E4M3 RoPE values.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4Fp8DsMla {
  using Spec = format::FormatNvfp4Fp8DsMla;

  // fmaxf before fminf: a NaN RoPE value becomes -448 (ABI.md).
  MLAKV_HD static std::uint8_t encode_rope(float r) { return encode_e4m3(fminf(fmaxf(r, -kE4m3Max), kE4m3Max)); }

  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams&,
                              std::uint8_t* record) {
    for (int g = 0; g < format::kNvfp4Groups; ++g) {
      float x[kNvfp4GroupSize];
      load_inputs<kDtype, kNvfp4GroupSize>(kv_c + g * kNvfp4GroupSize, x);
      record[Spec::kGroupScales.offset + g] =
          encode_nvfp4_group_boosted(x, record + Spec::kCodes.offset + g * (kNvfp4GroupSize / 2));
    }
    for (int i = 0; i < kRopeDim; ++i) record[Spec::kRope.offset + i] = encode_rope(load_input<kDtype>(k_pe[i]));
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams&, float* kv_c, float* k_pe) {
    decode_latent(record, kNvfp4Fp8ScaleUnboost, 1.0f, kv_c);
    for (int i = 0; i < kRopeDim; ++i) k_pe[i] = decode_e4m3(record[Spec::kRope.offset + i]);
  }
};

}  // namespace mlakv::codec
