// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_ds_mla_fp8_rope" record (368 B, b12x compact): the 432-byte
// record's latent, then an f32 RoPE scale in the old pad and 64 E4M3 RoPE codes.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4DsMlaFp8Rope {
  using Spec = format::FormatNvfp4DsMlaFp8Rope;

  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams&,
                              std::uint8_t* record) {
    encode_latent_static<kDtype>(kv_c, record);
    store_f32(record + Spec::kRopeScale.offset, encode_rope_scaled_e4m3<kDtype>(k_pe, record + Spec::kRope.offset));
    zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams&, float* kv_c, float* k_pe) {
    decode_latent(record, 1.0f, 1.0f, kv_c);
    decode_rope_scaled_e4m3(record + Spec::kRope.offset, load_f32(record + Spec::kRopeScale.offset), k_pe);
  }
};

}  // namespace mlakv::codec
