// SPDX-License-Identifier: Apache-2.0
// Codec of the "fp8_ds_mla" record (656 B, FlashMLA): 4 tiles of 128 E4M3
// values with f32 tile scales, then k_pe's raw 16-bit values.
#pragma once

#include <cfloat>

#include "codec/nvfp4.h"
#include "codec/token.h"

namespace mlakv::codec {

struct CodecFp8DsMla {
  using Spec = format::FormatFp8DsMla;
  static constexpr int kLatentAmaxLanes = format::kFp8TileSize / kLatentPerLane;  // 8 lanes per tile
  static constexpr bool kRopeAmax = false;
  /// A record of zero bytes decodes to +0 in every value whatever the decode
  /// parameters (zero codes times a zero tile scale, zero RoPE bits), so a
  /// kernel may store its decode for an entry that has no record.
  static constexpr bool kZeroRecordDecodesToZero = true;

  /// ts = max(amax / 448, FLT_MIN): never zero, so a zero tile divides cleanly.
  /// The GPU divides by a product and a residual step, the same quotient for
  /// every amax (divide_amax_by_e4m3_max), off a decode step's critical path.
  MLAKV_HD static float tile_scale(float amax) {
#if defined(__CUDA_ARCH__)
    return fmaxf(divide_amax_by_e4m3_max(amax), FLT_MIN);
#else
    return fmaxf(div_rn(amax, kE4m3Max), FLT_MIN);
#endif
  }

  template <InputDtype kDtype>
  MLAKV_HD static LaneAmax lane_amax(const LaneInputs& in) {
    return {amax_of<kDtype, kLatentPerLane>(in.kv_c), 0.0f};
  }

  template <InputDtype kDtype>
  MLAKV_HD static void encode_lane(int lane, LaneAmax amax, const LaneInputs& in, const EncodeParams&,
                                   std::uint8_t* record) {
    const float ts = tile_scale(amax.latent);
    std::uint8_t codes[kLatentPerLane];
    with_divisor(ts, [&](auto divide) { encode_e4m3_quotients<kDtype, kLatentPerLane>(in.kv_c, divide, codes); });
    store_aligned<kLatentPerLane>(record + Spec::kLatent.offset + lane * kLatentPerLane, codes);
    if (lane % kLatentAmaxLanes == 0) {
      store_f32(record + Spec::kTileScales.offset + (lane / kLatentAmaxLanes) * static_cast<int>(sizeof(float)), ts);
    }
    store_aligned<2 * kRopePerLane>(record + Spec::kRope.offset + 2 * lane * kRopePerLane,
                                    reinterpret_cast<const std::uint8_t*>(in.k_pe));
  }

  MLAKV_HD static void decode_lane(int lane, const std::uint8_t* record, const DecodeParams& params, float* kv_c,
                                   float* k_pe) {
    const float ts =
        load_f32(record + Spec::kTileScales.offset + (lane / kLatentAmaxLanes) * static_cast<int>(sizeof(float)));
    std::uint8_t latent[kLatentPerLane];
    load_aligned<kLatentPerLane>(latent, record + Spec::kLatent.offset + lane * kLatentPerLane);
    MLAKV_UNROLL
    for (int i = 0; i < kLatentPerLane; ++i) kv_c[i] = decode_e4m3(latent[i]) * ts;
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) {
      const std::uint16_t bits = load_u16(record + Spec::kRope.offset + 2 * (lane * kRopePerLane + i));
      k_pe[i] = params.rope_dtype == InputDtype::kBf16 ? load_input<InputDtype::kBf16>(bits)
                                                       : load_input<InputDtype::kFp16>(bits);
    }
  }

  /// decode_lane's values as bf16 bits (encode_bf16 of each), converting the
  /// codes two at a time and rounding the products in pairs: the decode the
  /// bf16 readers and the attention kernels run.
  MLAKV_HD static void decode_lane_bf16(int lane, const std::uint8_t* record, const DecodeParams& params,
                                        std::uint16_t* kv_c, std::uint16_t* k_pe) {
    const float ts =
        load_f32(record + Spec::kTileScales.offset + (lane / kLatentAmaxLanes) * static_cast<int>(sizeof(float)));
    decode_latent_bf16(lane, record, ts, kv_c);
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) {
      k_pe[i] = rope_bf16(load_u16(record + Spec::kRope.offset + 2 * (lane * kRopePerLane + i)), params);
    }
  }

  /// decode_lane_bf16's latent values given the lane's tile scale `ts`.
  MLAKV_HD static void decode_latent_bf16(int lane, const std::uint8_t* record, float ts, std::uint16_t* kv_c) {
    decode_e4m3_times_scale_bf16<kLatentPerLane>(record + Spec::kLatent.offset + lane * kLatentPerLane, ts, kv_c);
  }

  /// The record's 4 tile scales from one load: the scale of lane l's tile
  /// is ts[l / kLatentAmaxLanes].
  MLAKV_HD static void tile_scales(const std::uint8_t* record, float (&ts)[format::kFp8Tiles]) {
    static_assert(Spec::kTileScales.offset % 16 == 0 && Spec::kTileScales.bytes == 16, "one aligned 16-byte load");
    load_aligned<16>(reinterpret_cast<std::uint8_t*>(ts), record + Spec::kTileScales.offset);
  }

  /// RoPE pairs 4 quad.. as decode_lane_bf16 decodes each, from one load (the
  /// attention kernels' RoPE chunk).
  MLAKV_HD static void rope_quad_bf16(int quad, const std::uint8_t* record, const DecodeParams& params,
                                      std::uint32_t (&pairs)[4]) {
    alignas(16) std::uint8_t bytes[16];
    load_aligned<16>(bytes, record + Spec::kRope.offset + 16 * quad);
    MLAKV_UNROLL
    for (int i = 0; i < 4; ++i) {
      pairs[i] = static_cast<std::uint32_t>(rope_bf16(load_u16(bytes + 4 * i), params)) |
                 static_cast<std::uint32_t>(rope_bf16(load_u16(bytes + 4 * i + 2), params)) << 16;
    }
  }

  /// A stored RoPE input (bf16 or fp16 bits, as the writer's input) as bf16 bits.
  MLAKV_HD static std::uint16_t rope_bf16(std::uint16_t bits, const DecodeParams& params) {
    return encode_bf16(params.rope_dtype == InputDtype::kBf16 ? load_input<InputDtype::kBf16>(bits)
                                                              : load_input<InputDtype::kFp16>(bits));
  }
};

}  // namespace mlakv::codec
