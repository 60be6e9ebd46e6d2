// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_ds_mla" record (432 B, b12x stock): static NVFP4 latent, bf16 RoPE.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4DsMla {
  using Spec = format::FormatNvfp4DsMla;

  // bf16 input is copied bit for bit; fp16 is rounded to bf16 (NaN -> 0x7FFF).
  template <InputDtype kDtype>
  MLAKV_HD static std::uint16_t rope_bits(std::uint16_t bits) {
    if constexpr (kDtype == InputDtype::kBf16) {
      return bits;
    } else {
      return encode_bf16(load_input<kDtype>(bits));
    }
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams&,
                              std::uint8_t* record) {
    encode_latent_static<kDtype>(kv_c, record);
    zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
    for (int i = 0; i < kRopeDim; ++i) store_u16(record + Spec::kRope.offset + 2 * i, rope_bits<kDtype>(k_pe[i]));
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams&, float* kv_c, float* k_pe) {
    decode_latent(record, 1.0f, 1.0f, kv_c);
    for (int i = 0; i < kRopeDim; ++i) {
      k_pe[i] = load_input<InputDtype::kBf16>(load_u16(record + Spec::kRope.offset + 2 * i));
    }
  }
};

}  // namespace mlakv::codec
