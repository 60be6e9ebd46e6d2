// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_ds_mla_fp8_rope_pts" record (368 B): as the compact record,
// but the latent is two-level, with a per-token f32 scale st = amax / 2688.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4DsMlaFp8RopePts {
  using Spec = format::FormatNvfp4DsMlaFp8RopePts;
  static constexpr int kLatentAmaxLanes = kLanes;  // one token amax
  static constexpr bool kRopeAmax = true;

  MLAKV_HD static float token_scale(float token_amax) { return token_amax * kInvE4m3TimesE2m1Max; }

  template <InputDtype kDtype>
  MLAKV_HD static LaneAmax lane_amax(const LaneInputs& in) {
    return {amax_of<kDtype, kLatentPerLane>(in.kv_c), amax_of<kDtype, kRopePerLane>(in.k_pe)};
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, LaneAmax amax, const LaneInputs& in, const EncodeParams&,
                                   std::uint8_t* record) {
    const float st = token_scale(amax.latent);
    if (st == 0.0f) {  // ABI: all codes and scale bytes 0
      zero_bytes(group_codes(record, lane), kNvfp4GroupSize / 2);
      record[Spec::kGroupScales.offset + lane] = 0;
    } else {
      encode_latent_group_two_level<kDtype>(lane, in.kv_c, TokenScaleDivider(st), record);
    }
    const float rs = rope_scale(amax.rope);
    encode_rope_scaled_e4m3<kDtype, kRopePerLane>(in.k_pe, rs, record + Spec::kRope.offset + lane * kRopePerLane);
    if (lane == 0) {
      store_f32(record + Spec::kRopeScale.offset, rs);
      store_f32(record + Spec::kTokenScale.offset, st);
      zero_bytes(record + Spec::kPad.offset, Spec::kPad.bytes);
    }
  }

  /// The scale byte of lane `lane`'s latent group, and the factor its values
  /// are finally multiplied by: the token scale.
  MLAKV_HD static std::uint8_t latent_scale_byte(int lane, const std::uint8_t* record) {
    return in_order_scale_byte(record, lane);
  }
  /// latent_scale_byte of lanes first + 8 i (i < 4), loaded together.
  MLAKV_HD static void latent_scale_bytes_strided(int first, const std::uint8_t* record,
                                                  std::uint8_t (&bytes)[kStridedGroups]) {
    in_order_scale_bytes_strided(record, first, bytes);
  }
  static constexpr bool kLatentOuterScale = true;
  /// A record of zero bytes decodes to +0 in every value (zero codes times a
  /// zero scale byte and a zero token scale, zero RoPE codes times a zero
  /// RoPE scale), so a kernel may store its decode for an entry that has no
  /// record.
  static constexpr bool kZeroRecordDecodesToZero = true;
  MLAKV_HD static float latent_outer_scale(const std::uint8_t* record) {
    return load_f32(record + Spec::kTokenScale.offset);
  }

  /// The lane's two RoPE values as bf16 bits, the first in the low half.
  MLAKV_HD static std::uint32_t rope_pair_bf16(int lane, const std::uint8_t* record) {
    return decode_rope_pair_bf16(record + Spec::kRope.offset + lane * kRopePerLane,
                                 load_f32(record + Spec::kRopeScale.offset));
  }

  /// RoPE pairs 4 quad.. as rope_pair_bf16 decodes each, from one load (the
  /// attention kernels' RoPE chunk).
  MLAKV_HD static void rope_quad_bf16(int quad, const std::uint8_t* record, const DecodeParams&,
                                      std::uint32_t (&pairs)[4]) {
    decode_rope_quad_bf16(record + Spec::kRope.offset + 4 * quad * kRopePerLane,
                          load_f32(record + Spec::kRopeScale.offset), pairs);
  }

  /// bf16 outputs straight from the codes (the GPU's prefill path); equal to
  /// encode_bf16 of decode_lane's values.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* record, const DecodeParams&, std::uint16_t* kv_c,
                                        std::uint16_t* k_pe) {
    decode_latent_group_bf16(lane, record, latent_scale_byte(lane, record), latent_outer_scale(record), kv_c);
    store_pair_bits(k_pe, rope_pair_bf16(lane, record));
  }

  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* record, const DecodeParams&, float* kv_c,
                                   float* k_pe) {
    decode_latent_group(lane, record, in_order_scale_byte(record, lane), load_f32(record + Spec::kTokenScale.offset),
                        kv_c);
    const float rs = load_f32(record + Spec::kRopeScale.offset);
    decode_e4m3_times_scale<kRopePerLane>(record + Spec::kRope.offset + lane * kRopePerLane, rs, k_pe);
  }
};

}  // namespace mlakv::codec
