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

  /// The scale byte of lane `lane`'s latent group, and the factor its values
  /// are finally multiplied by (none here).
  MLAKV_HD static std::uint8_t latent_scale_byte(int lane, const std::uint8_t* record) {
    return in_order_scale_byte(record, lane);
  }
  /// latent_scale_byte of lanes first + 8 i (i < 4), loaded together.
  MLAKV_HD static void latent_scale_bytes_strided(int first, const std::uint8_t* record,
                                                  std::uint8_t (&bytes)[kStridedGroups]) {
    in_order_scale_bytes_strided(record, first, bytes);
  }
  static constexpr bool kLatentOuterScale = false;
  /// A record of zero bytes decodes to +0 in every value (zero codes times a
  /// zero scale byte, zero bf16 RoPE bits), so a kernel may store its decode
  /// for an entry that has no record.
  static constexpr bool kZeroRecordDecodesToZero = true;

  /// The lane's two RoPE values as bf16 bits, the first in the low half.
  MLAKV_HD static std::uint32_t rope_pair_bf16(int lane, const std::uint8_t* record) {
    static_assert(kRopePerLane == 2, "a lane's RoPE pair is one 32-bit word");
    return rope_pair_of(load_u32(record + Spec::kRope.offset + 2 * lane * kRopePerLane));
  }

  /// RoPE pairs 4 quad.. as rope_pair_bf16 decodes each, from one load (the
  /// attention kernels' RoPE chunk).
  MLAKV_HD static void rope_quad_bf16(int quad, const std::uint8_t* record, const DecodeParams&,
                                      std::uint32_t (&pairs)[4]) {
    alignas(16) std::uint8_t bytes[16];
    load_aligned<16>(bytes, record + Spec::kRope.offset + 16 * quad);
    MLAKV_UNROLL
    for (int i = 0; i < 4; ++i) pairs[i] = rope_pair_of(load_u32(bytes + 4 * i));
  }

  /// A stored RoPE pair through f32, as decode_lane: a NaN comes out as 0x7FFF
  /// whatever its payload.
  MLAKV_HD static std::uint32_t rope_pair_of(std::uint32_t stored) {
    return encode_bf16x2(load_input<InputDtype::kBf16>(static_cast<std::uint16_t>(stored & 0xFFFFu)),
                         load_input<InputDtype::kBf16>(static_cast<std::uint16_t>(stored >> 16)));
  }

  /// bf16 outputs straight from the codes (the GPU's prefill path); equal to
  /// encode_bf16 of decode_lane's values.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* record, const DecodeParams&, std::uint16_t* kv_c,
                                        std::uint16_t* k_pe) {
    decode_latent_group_bf16(lane, record, latent_scale_byte(lane, record), 1.0f, kv_c);
    store_pair_bits(k_pe, rope_pair_bf16(lane, record));
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
