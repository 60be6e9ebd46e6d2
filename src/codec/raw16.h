// SPDX-License-Identifier: Apache-2.0
// Codecs of the "bf16" and "fp16" records (1152 B): the inputs' 16-bit values verbatim.
#pragma once

#include "codec/token.h"

namespace mlakv::codec {

template <InputDtype kRecordDtype>
struct CodecRaw16 {
  using Spec = format::FormatBf16;
  static constexpr InputDtype kElementDtype = kRecordDtype;
  static constexpr int kLatentAmaxLanes = 1;
  static constexpr bool kRopeAmax = false;

  template <InputDtype kDtype>
  MLAKV_HD static LaneAmax lane_amax(const LaneInputs&) {
    return {};
  }

  // Bits are copied; validation guarantees the input dtype is the record's.
  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, LaneAmax, const LaneInputs& in, const EncodeParams&,
                                   std::uint8_t* record) {
    const auto* latent = reinterpret_cast<const std::uint8_t*>(in.kv_c);
    std::uint8_t* dst = record + Spec::kLatent.offset + 2 * lane * kLatentPerLane;
    store_aligned<16>(dst, latent);
    store_aligned<16>(dst + 16, latent + 16);
    store_aligned<2 * kRopePerLane>(record + Spec::kRope.offset + 2 * lane * kRopePerLane,
                                    reinterpret_cast<const std::uint8_t*>(in.k_pe));
  }

  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* record, const DecodeParams&, float* kv_c,
                                   float* k_pe) {
    std::uint16_t latent[kLatentPerLane];
    std::uint16_t rope[kRopePerLane];
    const std::uint8_t* src = record + Spec::kLatent.offset + 2 * lane * kLatentPerLane;
    load_aligned<16>(reinterpret_cast<std::uint8_t*>(latent), src);
    load_aligned<16>(reinterpret_cast<std::uint8_t*>(latent) + 16, src + 16);
    load_aligned<2 * kRopePerLane>(reinterpret_cast<std::uint8_t*>(rope),
                                   record + Spec::kRope.offset + 2 * lane * kRopePerLane);
    MLAKV_UNROLL
    for (int i = 0; i < kLatentPerLane; ++i) kv_c[i] = load_input<kRecordDtype>(latent[i]);
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) k_pe[i] = load_input<kRecordDtype>(rope[i]);
  }
};

using CodecBf16 = CodecRaw16<InputDtype::kBf16>;
using CodecFp16 = CodecRaw16<InputDtype::kFp16>;

}  // namespace mlakv::codec
