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
    std::uint8_t latent[kLatentPerLane];
    std::uint8_t rope[kRopePerLane];
    with_scale_divisor(params.k_scale, [&](auto divide) {
      encode_e4m3_quotients<kDtype, kLatentPerLane>(in.kv_c, divide, latent);
      encode_e4m3_quotients<kDtype, kRopePerLane>(in.k_pe, divide, rope);
    });
    store_aligned<kLatentPerLane>(record + Spec::kLatent.offset + lane * kLatentPerLane, latent);
    store_aligned<kRopePerLane>(record + Spec::kRope.offset + lane * kRopePerLane, rope);
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

  /// decode_lane's values as bf16 bits (encode_bf16 of each), converting the
  /// codes two at a time and rounding the products in pairs: the decode the
  /// bf16 readers and the attention kernels run.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* record, const DecodeParams& params,
                                        std::uint16_t* kv_c, std::uint16_t* k_pe) {
    decode_e4m3_times_scale_bf16<kLatentPerLane>(record + Spec::kLatent.offset + lane * kLatentPerLane, params.k_scale,
                                                 kv_c);
    decode_e4m3_times_scale_bf16<kRopePerLane>(record + Spec::kRope.offset + lane * kRopePerLane, params.k_scale, k_pe);
  }
};

}  // namespace mlakv::codec
