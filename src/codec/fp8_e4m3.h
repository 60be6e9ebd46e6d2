// SPDX-License-Identifier: Apache-2.0
// Codec of the "fp8_e4m3" record (576 B): E4M3(v / k_scale) for all 576 values.
#pragma once

#include "codec/token.h"

namespace mlakv::codec {

struct CodecFp8E4m3 {
  using Spec = format::FormatFp8E4m3;
  static constexpr int kLatentAmaxLanes = 1;
  static constexpr bool kRopeAmax = false;

  template <InputDtype kDtype>
  MLAKV_HD static LaneAmax lane_amax(const LaneInputs&) {
    return {};
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, LaneAmax, const LaneInputs& in, const EncodeParams& params,
                                   std::uint8_t* record) {
    with_scale_divisor(params.k_scale, [&](auto divide) {
      const auto pair = [&](const std::uint16_t* bits) {
        return encode_e4m3x2(divide(load_input<kDtype>(bits[0])), divide(load_input<kDtype>(bits[1])));
      };
      std::uint16_t codes[kLatentPerLane / 2];
      MLAKV_UNROLL
      for (int i = 0; i < kLatentPerLane / 2; ++i) codes[i] = pair(in.kv_c + 2 * i);
      store_aligned<kLatentPerLane>(record + Spec::kLatent.offset + lane * kLatentPerLane,
                                    reinterpret_cast<const std::uint8_t*>(codes));
      static_assert(kRopePerLane == 2, "a lane's RoPE codes are one pair");
      const std::uint16_t rope = pair(in.k_pe);
      store_aligned<2>(record + Spec::kRope.offset + lane * kRopePerLane, reinterpret_cast<const std::uint8_t*>(&rope));
    });
  }

  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* record, const DecodeParams& params, float* kv_c,
                                   float* k_pe) {
    std::uint8_t latent[kLatentPerLane];
    std::uint8_t rope[kRopePerLane];
    load_aligned<kLatentPerLane>(latent, record + Spec::kLatent.offset + lane * kLatentPerLane);
    load_aligned<kRopePerLane>(rope, record + Spec::kRope.offset + lane * kRopePerLane);
    MLAKV_UNROLL
    for (int i = 0; i < kLatentPerLane; ++i) kv_c[i] = decode_e4m3(latent[i]) * params.k_scale;
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) k_pe[i] = decode_e4m3(rope[i]) * params.k_scale;
  }
};

}  // namespace mlakv::codec
