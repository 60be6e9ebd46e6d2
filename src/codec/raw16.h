// SPDX-License-Identifier: Apache-2.0
// Codecs of the "bf16" and "fp16" records (1152 B): the inputs' 16-bit values verbatim.
#pragma once

#include "codec/token.h"

namespace mlakv::codec {

template <InputDtype kRecordDtype>
struct CodecRaw16 {
  using Spec = format::FormatBf16;
  static constexpr InputDtype kElementDtype = kRecordDtype;

  // Bits are copied; validation guarantees the input dtype is the record's.
  template <InputDtype kDtype>
  MLAKV_HD static void encode(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams&,
                              std::uint8_t* record) {
    for (int i = 0; i < kLatentDim; ++i) store_u16(record + Spec::kLatent.offset + 2 * i, kv_c[i]);
    for (int i = 0; i < kRopeDim; ++i) store_u16(record + Spec::kRope.offset + 2 * i, k_pe[i]);
  }

  MLAKV_HD static void decode(const std::uint8_t* record, const DecodeParams&, float* kv_c, float* k_pe) {
    for (int i = 0; i < kLatentDim; ++i) kv_c[i] = load_input<kRecordDtype>(load_u16(record + Spec::kLatent.offset + 2 * i));
    for (int i = 0; i < kRopeDim; ++i) k_pe[i] = load_input<kRecordDtype>(load_u16(record + Spec::kRope.offset + 2 * i));
  }
};

using CodecBf16 = CodecRaw16<InputDtype::kBf16>;
using CodecFp16 = CodecRaw16<InputDtype::kFp16>;

}  // namespace mlakv::codec
