// SPDX-License-Identifier: Apache-2.0
// Codec of the "nvfp4_fp8_ds_mla" record (352 B, upstream vLLM's nvfp4_ds_mla):
// NVFP4 latent with rounded-up group scales stored permuted after 64 unscaled
// E4M3 RoPE values.
#pragma once

#include "codec/nvfp4.h"

namespace mlakv::codec {

struct CodecNvfp4Fp8DsMla {
  using Spec = format::FormatNvfp4Fp8DsMla;
  static constexpr int kLatentAmaxLanes = 1;
  static constexpr bool kRopeAmax = false;

  template <InputDtype kDtype>
  MLAKV_HD static LaneAmax lane_amax(const LaneInputs&) {
    return {};
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, LaneAmax, const LaneInputs& in, const EncodeParams&,
                                   std::uint8_t* record) {
    encode_latent_group_rounded_up<kDtype>(lane, in.kv_c, record + Spec::group_scale_offset(lane), record);
    // Unscaled: E4M3 saturates to +-448 and keeps NaN (0x7F) on its own.
    static_assert(kRopePerLane == 2, "a lane's two RoPE codes are one 2-byte store");
    const std::uint16_t two = encode_e4m3x2(load_input<kDtype>(in.k_pe[0]), load_input<kDtype>(in.k_pe[1]));
    store_u16(record + Spec::kRope.offset + lane * kRopePerLane, two);
  }

  /// The scale byte of lane `lane`'s latent group (stored permuted), and the
  /// factor its values are finally multiplied by (none here).
  MLAKV_HD static std::uint8_t latent_scale_byte(int lane, const std::uint8_t* record) {
    return record[Spec::group_scale_offset(lane)];
  }
  /// latent_scale_byte of lanes first + 8 i (i < 4, first < 8): the
  /// permutation puts them on the 8 bytes at 8 (first % 4), byte
  /// 2 i + first / 4, so one 8-byte load holds them.
  MLAKV_HD static void latent_scale_bytes_strided(int first, const std::uint8_t* record,
                                                  std::uint8_t (&bytes)[kStridedGroups]) {
    static_assert(
        Spec::group_scale_offset(0) % 8 == 0 && Spec::group_scale_offset(8) == Spec::group_scale_offset(0) + 2,
        "groups first + 8 i sit 2 bytes apart on one aligned 8-byte span");
    std::uint32_t words[2];
    load_aligned<8>(reinterpret_cast<std::uint8_t*>(words), record + Spec::group_scale_offset(first & 3));
    MLAKV_UNROLL
    for (int i = 0; i < kStridedGroups; ++i) {
      // Byte 2 i + first / 4 of the span: word i / 2, byte 2 (i % 2) + first / 4.
      bytes[i] = static_cast<std::uint8_t>(words[i / 2] >> (8 * (2 * (i % 2) + (first >> 2))));
    }
  }
  static constexpr bool kLatentOuterScale = false;
  /// A record of zero bytes decodes to +0 in every value (zero codes times a
  /// zero scale byte, zero RoPE codes), so a kernel may store its decode for
  /// an entry that has no record.
  static constexpr bool kZeroRecordDecodesToZero = true;

  /// The lane's two RoPE values as bf16 bits, the first in the low half.
  MLAKV_HD static std::uint32_t rope_pair_bf16(int lane, const std::uint8_t* record) {
    return decode_rope_pair_bf16(record + Spec::kRope.offset + lane * kRopePerLane, 1.0f);
  }

  /// RoPE pairs 4 quad.. as rope_pair_bf16 decodes each, from one load (the
  /// attention kernels' RoPE chunk).
  MLAKV_HD static void rope_quad_bf16(int quad, const std::uint8_t* record, const DecodeParams&,
                                      std::uint32_t (&pairs)[4]) {
    decode_rope_quad_bf16(record + Spec::kRope.offset + 4 * quad * kRopePerLane, 1.0f, pairs);
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
    decode_latent_group(lane, record, record[Spec::group_scale_offset(lane)], 1.0f, kv_c);
    decode_e4m3_times_scale<kRopePerLane>(record + Spec::kRope.offset + lane * kRopePerLane, 1.0f, k_pe);
  }
};

}  // namespace mlakv::codec
