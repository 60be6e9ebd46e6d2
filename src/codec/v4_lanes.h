// SPDX-License-Identifier: Apache-2.0
// The lane-parallel interface of the DeepSeek V4 family's codecs. A token's
// 512 values (448 NoPE ++ 64 RoPE) are split over 32 lanes: lane l owns
// values [16l, 16l + 16), NoPE for lanes 0..27, RoPE for lanes 28..31, and
// writes or reads only its own bytes of the token's data row and scale row.
// A tile (64, 32 or 16 values) is 4, 2 or 1 whole lanes; the only values lanes
// share are tile amaxes, combined with fmaxf, which is order-independent; so
// a CUDA warp (shuffles) and the CPU (a loop over lanes) write identical bytes.
//
// A V4 family codec is a struct with
//   static constexpr int kTileLanes;  // lanes sharing one scale
//   template <InputDtype D> static float lane_amax(const uint16_t* x /*[16]*/);
//   template <InputDtype D> static void encode_lane(int lane, float tile_amax, const uint16_t* x,
//                                                   uint8_t* data_row, uint8_t* scale_row);
//   static void decode_lane(int lane, const uint8_t* data_row, const uint8_t* scale_row, float* values /*[16]*/);
//   static void decode_lane_bf16(int lane, const uint8_t* data_row, const uint8_t* scale_row,
//                                uint16_t* values /*[16], encode_bf16 of decode_lane's*/);
// Together the 32 encode_lane calls write every byte of both rows.
#pragma once

#include <cstdint>

#include "codec/element.h"

namespace mlakv::codec {

inline constexpr int kV4Lanes = 32;
inline constexpr int kV4LaneValues = 16;
inline constexpr int kV4NopeDims = 448;
inline constexpr int kV4NopeLanes = kV4NopeDims / kV4LaneValues;  // lanes 28..31 hold the RoPE
static_assert(kV4NopeLanes * kV4LaneValues == kV4NopeDims, "no lane straddles the NoPE and the RoPE");

/// The first of lane `lane`'s 16 values: in the NoPE row, or in the RoPE row.
template <class T>
MLAKV_HD T* v4_lane_values(int lane, T* nope, T* rope) {
  return lane < kV4NopeLanes ? nope + lane * kV4LaneValues : rope + (lane - kV4NopeLanes) * kV4LaneValues;
}

/// Encodes a token by running its 32 lanes in order: lane amaxes, combined per
/// tile, then every lane's bytes (the CPU reference's view of the codec).
template <class Codec, InputDtype kDtype>
MLAKV_HD void encode_v4_token(const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* data_row,
                              std::uint8_t* scale_row) {
  float amax[kV4Lanes];
  for (int lane = 0; lane < kV4Lanes; ++lane) {
    amax[lane] = Codec::template lane_amax<kDtype>(v4_lane_values(lane, nope, rope));
  }
  for (int first = 0; first < kV4Lanes; first += Codec::kTileLanes) {
    float tile = 0.0f;
    for (int lane = first; lane < first + Codec::kTileLanes; ++lane) tile = max_ignoring_nan(tile, amax[lane]);
    for (int lane = first; lane < first + Codec::kTileLanes; ++lane) {
      Codec::template encode_lane<kDtype>(lane, tile, v4_lane_values(lane, nope, rope), data_row, scale_row);
    }
  }
}

/// Decodes a token's 448 NoPE and 64 RoPE values lane by lane.
template <class Codec>
MLAKV_HD void decode_v4_token(const std::uint8_t* data_row, const std::uint8_t* scale_row, float* nope, float* rope) {
  for (int lane = 0; lane < kV4Lanes; ++lane) {
    Codec::decode_lane(lane, data_row, scale_row, v4_lane_values(lane, nope, rope));
  }
}

}  // namespace mlakv::codec
