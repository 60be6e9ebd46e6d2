// SPDX-License-Identifier: Apache-2.0
// Codec of the "fp8_e4m3" record (576 B): E4M3(v / k_scale) for all 576 values.
#pragma once

#include "codec/token.h"

namespace mlakv::codec {

struct CodecFp8E4m3 {
  using Spec = format::FormatFp8E4m3;

  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams& params,
                              std::uint8_t* record) {
    for (int i = 0; i < kLatentDim; ++i) {
      record[Spec::kLatent.offset + i] = encode_e4m3(div_rn(load_input<kDtype>(kv_c[i]), params.k_scale));
    }
    for (int i = 0; i < kRopeDim; ++i) {
      record[Spec::kRope.offset + i] = encode_e4m3(div_rn(load_input<kDtype>(k_pe[i]), params.k_scale));
    }
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams& params, float* kv_c, float* k_pe) {
    for (int i = 0; i < kLatentDim; ++i) kv_c[i] = decode_e4m3(record[Spec::kLatent.offset + i]) * params.k_scale;
    for (int i = 0; i < kRopeDim; ++i) k_pe[i] = decode_e4m3(record[Spec::kRope.offset + i]) * params.k_scale;
  }
};

}  // namespace mlakv::codec
