// SPDX-License-Identifier: Apache-2.0
// The lane-parallel interface every record codec implements. A token is split
// over 32 lanes: lane l owns latent values [16l, 16l + 16) (one NVFP4 group,
// an eighth of an FP8 tile) and RoPE values [2l, 2l + 2). The only values lanes
// share are amaxes, combined with fmaxf, which is order-independent; so a CUDA
// warp (shuffles) and the CPU (a loop over lanes) produce identical bytes.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/pairs.h"
#include "format/specs.h"

namespace mlakv::codec {

using format::kLatentDim;
using format::kRopeDim;

inline constexpr int kLanes = 32;
inline constexpr int kLatentPerLane = kLatentDim / kLanes;
inline constexpr int kRopePerLane = kRopeDim / kLanes;
static_assert(kLatentPerLane == format::kNvfp4GroupSize, "a lane owns exactly one NVFP4 group");
static_assert(format::kFp8TileSize % kLatentPerLane == 0, "an FP8 tile is a whole number of lanes");

/// Latent groups first, first + 8, first + 16 and first + 24 (first < 8):
/// the groups one lane of a wide-tile attention decoder takes, whose scales
/// some codecs load together (latent_scale_bytes_strided, tile_scales).
inline constexpr int kStridedGroups = 4;
inline constexpr int kGroupStride = 8;

/// Per-call values some formats consume.
struct EncodeParams {
  float k_scale = 1.0f;  ///< fp8_e4m3 stores E4M3(v / k_scale)
};

struct DecodeParams {
  float k_scale = 1.0f;                       ///< fp8_e4m3 multiplies back by k_scale
  InputDtype rope_dtype = InputDtype::kBf16;  ///< fp8_ds_mla keeps k_pe's raw bits
};

/// One lane's raw 16-bit inputs.
struct LaneInputs {
  std::uint16_t kv_c[kLatentPerLane];
  std::uint16_t k_pe[kRopePerLane];
};

/// Amaxes a lane contributes, and after combining, the ones it encodes with.
struct LaneAmax {
  float latent = 0.0f;
  float rope = 0.0f;
};

// A codec is a struct with
//   using Spec = format::Format...;
//   static constexpr int kLatentAmaxLanes;  // lanes sharing one latent amax: 1 (none), 8 (tile), 32 (token)
//   static constexpr bool kRopeAmax;        // whether the 64 RoPE values share one amax
//   template <InputDtype D> static LaneAmax lane_amax(const LaneInputs&);
//   template <InputDtype D> static void encode_lane(int lane, LaneAmax combined, const LaneInputs&,
//                                                   const EncodeParams&, uint8_t* record);
//   static void decode_lane(int lane, const uint8_t* record, const DecodeParams&,
//                           float* kv_c /*[16]*/, float* k_pe /*[2]*/);
// Together the 32 encode_lane calls write every byte of the record, pads included.

template <InputDtype kDtype, int kN>
MLAKV_HD void load_inputs(const std::uint16_t* bits, float* out) {
  MLAKV_UNROLL
  for (int i = 0; i < kN; ++i) out[i] = load_input<kDtype>(bits[i]);
}

/// E4M3 codes of kN inputs, each divided by `divide` first, converted two at a time.
template <InputDtype kDtype, int kN, class Divide>
MLAKV_HD void encode_e4m3_quotients(const std::uint16_t* bits, Divide divide, std::uint8_t* codes) {
  MLAKV_UNROLL
  for (int i = 0; i + 1 < kN; i += 2) {
    const std::uint16_t two =
        encode_e4m3x2(divide(load_input<kDtype>(bits[i])), divide(load_input<kDtype>(bits[i + 1])));
    memcpy(codes + i, &two, sizeof(two));
  }
  if constexpr (kN % 2 == 1) codes[kN - 1] = encode_e4m3(divide(load_input<kDtype>(bits[kN - 1])));
}

template <InputDtype kDtype, int kN>
MLAKV_HD float amax_of(const std::uint16_t* bits) {
#if defined(__CUDA_ARCH__)
  if constexpr (kN % 2 == 0) return pair_amax<kDtype, kN>(bits);
#endif
  float amax = 0.0f;
  MLAKV_UNROLL
  for (int i = 0; i < kN; ++i) amax = fold_amax(amax, load_input<kDtype>(bits[i]));
  return amax;
}

MLAKV_HD void zero_bytes(std::uint8_t* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = 0;
}

// --- whole records on one thread: the CPU reference's view of a codec ---

/// Encodes a token by running its 32 lanes in order: amaxes, combine, encode.
template <class Codec, InputDtype kDtype>
inline void encode_record(const std::uint16_t* kv_c, const std::uint16_t* k_pe, const EncodeParams& params,
                          std::uint8_t* record) {
  LaneInputs in[kLanes];
  LaneAmax amax[kLanes];
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < kLatentPerLane; ++i) in[lane].kv_c[i] = kv_c[lane * kLatentPerLane + i];
    for (int i = 0; i < kRopePerLane; ++i) in[lane].k_pe[i] = k_pe[lane * kRopePerLane + i];
    amax[lane] = Codec::template lane_amax<kDtype>(in[lane]);
  }
  float rope = 0.0f;
  for (const LaneAmax& lane_amax : amax) rope = max_ignoring_nan(rope, lane_amax.rope);
  for (int first = 0; first < kLanes; first += Codec::kLatentAmaxLanes) {
    float latent = 0.0f;
    for (int lane = first; lane < first + Codec::kLatentAmaxLanes; ++lane) {
      latent = max_ignoring_nan(latent, amax[lane].latent);
    }
    for (int lane = first; lane < first + Codec::kLatentAmaxLanes; ++lane) {
      Codec::template encode_lane<kDtype>(lane, LaneAmax{latent, rope}, in[lane], params, record);
    }
  }
}

template <class Codec>
inline void decode_record(const std::uint8_t* record, const DecodeParams& params, float* kv_c, float* k_pe) {
  for (int lane = 0; lane < kLanes; ++lane) {
    Codec::decode_lane(lane, record, params, kv_c + lane * kLatentPerLane, k_pe + lane * kRopePerLane);
  }
}

}  // namespace mlakv::codec

namespace mlakv::codec {

/// A lane's decoded values as bf16 bits: exactly what the bf16 readers store
/// and what the attention kernels use as keys and values. Codecs with a direct
/// bf16 decode (NVFP4) use it; it equals encode_bf16 of decode_lane's values.
template <class Codec>
MLAKV_HD void decode_lane_bf16_bits(int lane, const std::uint8_t* record, const DecodeParams& params,
                                    std::uint16_t* kv_c, std::uint16_t* k_pe) {
  if constexpr (requires { &Codec::decode_lane_bf16; }) {
    Codec::decode_lane_bf16(lane, record, params, kv_c, k_pe);
  } else {
    float kv[kLatentPerLane];
    float pe[kRopePerLane];
    Codec::decode_lane(lane, record, params, kv, pe);
    MLAKV_UNROLL
    for (int i = 0; i < kLatentPerLane; ++i) kv_c[i] = encode_bf16(kv[i]);
    MLAKV_UNROLL
    for (int i = 0; i < kRopePerLane; ++i) k_pe[i] = encode_bf16(pe[i]);
  }
}

/// RoPE pairs 4 quad..4 quad + 3 (dims 8 quad..8 quad + 7) as bf16 bits,
/// each pair's first dim in the low half: decode_lane_bf16_bits' k_pe of
/// those four lanes. A codec with rope_quad_bf16 decodes them from one load
/// of their bytes; the others lane by lane (a compiler drops the unused
/// latent decode).
template <class Codec>
MLAKV_HD void decode_rope_quad_bf16_bits(int quad, const std::uint8_t* record, const DecodeParams& params,
                                         std::uint32_t (&pairs)[4]) {
  static_assert(kRopePerLane == 2, "a lane's RoPE values are one pair");
  if constexpr (requires { &Codec::rope_quad_bf16; }) {
    Codec::rope_quad_bf16(quad, record, params, pairs);
  } else {
    MLAKV_UNROLL
    for (int i = 0; i < 4; ++i) {
      std::uint16_t kv_c[kLatentPerLane];
      std::uint16_t k_pe[kRopePerLane];
      decode_lane_bf16_bits<Codec>(4 * quad + i, record, params, kv_c, k_pe);
      pairs[i] = static_cast<std::uint32_t>(k_pe[0]) | static_cast<std::uint32_t>(k_pe[1]) << 16;
    }
  }
}

}  // namespace mlakv::codec
