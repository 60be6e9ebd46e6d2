// SPDX-License-Identifier: Apache-2.0
// A record's latent group and RoPE pair decoded for the attention kernels:
// for NVFP4 the group as 8 bf16 pairs in fragment order
// (codec/nvfp4_fragment.h), times kLatentKeyScale, and the RoPE pair as it
// is; for the others the codec's bf16 decode (decode_latent_key). Every decode
// kernel takes its keys from here: the split-dims kernel into mma fragments,
// the warpgroup kernels into their shared key tiles.
#pragma once

#include <cstdint>

#include "codec/nvfp4.h"
#include "codec/nvfp4_fragment.h"
#include "codec/token.h"

namespace mlakv::cuda {

/// The codecs with the fragment decode below (the NVFP4 records): the split-dims
/// kernel and the 32-key warpgroup kernel decode their keys through it, the
/// wide-tile kernel takes the others.
template <class Codec>
inline constexpr bool kFragmentDecode = requires {
  &Codec::latent_scale_byte;
};

/// The NVFP4 record with a per-token (outer) scale on its latent values.
template <class Codec>
inline constexpr bool kOuterScale = requires {
  requires Codec::kLatentOuterScale;
};

/// The factor the latent key fragments carry: the fragment scale where the
/// integer decode applies, 1 where a per-token outer scale needs the f32 path.
template <class Codec>
inline constexpr float kLatentKeyScale = Codec::kLatentOuterScale ? 1.0f : codec::kFragmentScale;

/// The factor a decode kernel's shared key tile carries on its latent dims:
/// NVFP4 records (kFragmentDecode) go in as their fragment decode, times
/// kLatentKeyScale, which the scores and the output undo in f32 (a power of
/// two: exact); other records as the codec's bf16 decode, times 1.
template <class Codec>
inline constexpr float kKeyTileScale = [] {
  if constexpr (kFragmentDecode<Codec>) {
    return kLatentKeyScale<Codec>;
  } else {
    return 1.0f;
  }
}();

/// Latent group `group` of one record, whose scale byte is `sbyte`, as 8
/// bf16 pairs in fragment order (times kLatentKeyScale).
template <class Codec>
__device__ __forceinline__ void decode_latent_fragment(int group, const std::uint8_t* record, std::uint8_t sbyte,
                                                       std::uint32_t (&latent)[8]) {
  if constexpr (Codec::kLatentOuterScale) {
    const float outer = Codec::latent_outer_scale(record);
    if (!codec::decode_group_fragment_outer(codec::group_codes(record, group), sbyte, outer, latent)) {
      alignas(16) std::uint16_t in_order[codec::kLatentPerLane];  // an outer scale no writer makes
      codec::decode_latent_group_bf16(group, record, sbyte, outer, in_order);
      codec::fragment_pairs_from_dim_order(*reinterpret_cast<const std::uint32_t(*)[8]>(in_order), latent);
    }
  } else {
    codec::decode_group_fragment(codec::group_codes(record, group), sbyte, latent);
  }
}
template <class Codec>
__device__ __forceinline__ void decode_latent_fragment(int group, const std::uint8_t* record,
                                                       std::uint32_t (&latent)[8]) {
  decode_latent_fragment<Codec>(group, record, Codec::latent_scale_byte(group, record), latent);
}

/// Latent group `group` of one record as a shared key tile holds it, 8 bf16
/// pairs: the fragment decode (times kLatentKeyScale) for NVFP4 records, else
/// the codec's bf16 decode in dim order (its RoPE pair unused).
template <class Codec>
__device__ __forceinline__ void decode_latent_key(int group, const std::uint8_t* record,
                                                  const codec::DecodeParams& params, std::uint32_t (&latent)[8]) {
  if constexpr (kFragmentDecode<Codec>) {
    decode_latent_fragment<Codec>(group, record, latent);
  } else {
    std::uint16_t unused[codec::kRopePerLane];
    codec::decode_lane_bf16_bits<Codec>(group, record, params, reinterpret_cast<std::uint16_t*>(latent), unused);
  }
}

/// Latent groups first + 8 i (i < 4, first < 8) of one record as
/// decode_latent_key decodes each: a wide-tile decoder lane's groups. Their
/// scales are loaded together where the codec can (NVFP4: one or two loads
/// of the scale bytes; fp8_ds_mla: the 4 tile scales in one), not a load a
/// group.
template <class Codec>
__device__ __forceinline__ void decode_latent_keys_strided(int first, const std::uint8_t* record,
                                                           const codec::DecodeParams& params,
                                                           std::uint32_t (&latent)[codec::kStridedGroups][8]) {
  constexpr int kStride = codec::kGroupStride;
  if constexpr (kFragmentDecode<Codec> && requires { &Codec::latent_scale_bytes_strided; }) {
    std::uint8_t sbytes[codec::kStridedGroups];
    Codec::latent_scale_bytes_strided(first, record, sbytes);
#pragma unroll
    for (int i = 0; i < codec::kStridedGroups; ++i) {
      decode_latent_fragment<Codec>(first + kStride * i, record, sbytes[i], latent[i]);
    }
  } else if constexpr (requires { &Codec::tile_scales; }) {
    static_assert(Codec::kLatentAmaxLanes == kStride, "group first + 8 i is in tile i");
    float ts[codec::kStridedGroups];
    Codec::tile_scales(record, ts);
#pragma unroll
    for (int i = 0; i < codec::kStridedGroups; ++i) {
      Codec::decode_latent_bf16(first + kStride * i, record, ts[i], reinterpret_cast<std::uint16_t*>(latent[i]));
    }
  } else {
#pragma unroll
    for (int i = 0; i < codec::kStridedGroups; ++i) {
      decode_latent_key<Codec>(first + kStride * i, record, params, latent[i]);
    }
  }
}

/// Lane `group`'s key fragments of one record: its latent group as 8 bf16
/// pairs in fragment order (times kLatentKeyScale), and its RoPE pair.
template <class Codec>
__device__ __forceinline__ void decode_key_fragment(int group, const std::uint8_t* record, std::uint32_t (&latent)[8],
                                                    std::uint32_t& rope) {
  decode_latent_fragment<Codec>(group, record, latent);
  rope = Codec::rope_pair_bf16(group, record);
}

}  // namespace mlakv::cuda
