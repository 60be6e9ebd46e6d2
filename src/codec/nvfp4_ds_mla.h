// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_ds_mla" record (432 B, b12x stock): static NVFP4 latent, bf16 RoPE.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4DsMla {
  using Spec = format::FormatNvfp4DsMla;
  static constexpr int kLatentAmaxLanes = 1;  // each lane's group has its own scale
  static constexpr bool kRopeAmax = false;

  template <InputDtype kDtype>
  MLAKV_HD static LaneAmax lane_amax(const LaneInputs&) {
    return {};
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, LaneAmax, const LaneInputs& in, const EncodeParams&,
                                   std::uint8_t* record) {
    encode_latent_group_static<kDtype>(lane, in.kv_c, record);
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) {
      store_u16(record + Spec::kRope.offset + 2 * (lane * kRopePerLane + i), input_as_bf16_bits<kDtype>(in.k_pe[i]));
    }
    if (lane == 0) zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
  }

  /// bf16 outputs straight from the codes (the GPU's prefill path); equal to
  /// encode_bf16 of decode_lane's values.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* record, const DecodeParams& params,
                                        std::uint16_t* kv_c, std::uint16_t* k_pe) {
    decode_latent_group_bf16(lane, record, in_order_scale_byte(record, lane), 1.0f, kv_c);
    float rope[kRopePerLane];
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) {
      rope[i] = load_input<InputDtype::kBf16>(load_u16(record + Spec::kRope.offset + 2 * (lane * kRopePerLane + i)));
    }
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) k_pe[i] = encode_bf16(rope[i]);
    (void)params;
  }

  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* record, const DecodeParams&, float* kv_c,
                                   float* k_pe) {
    decode_latent_group(lane, record, in_order_scale_byte(record, lane), 1.0f, kv_c);
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) {
      k_pe[i] = load_input<InputDtype::kBf16>(load_u16(record + Spec::kRope.offset + 2 * (lane * kRopePerLane + i)));
    }
  }
};

}  // namespace mlakv::codec
