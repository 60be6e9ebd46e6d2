// SPDX-License-Identifier: Apache-2.0
// A DeepSeek V4 family key as the V4 decode kernel reads it: lane l of a warp
// reads the bytes of the key's values [16 l, 16 l + 16) (448 NoPE ++ 64 RoPE)
// from the token's data row and scale row (as the kernel staged them in shared
// memory), and decodes them into 8 bf16 pairs in dim order, exactly the codecs' values rounded to bf16 (the
// readers' bf16 output). The arithmetic is the codecs' own: E4M3 through
// decode_e4m3x2, times the UE8M0 scale_value in f32 (a power of two: exact),
// rounded by encode_bf16x2; E2M1 placed as bf16 bits and scaled by two exact
// bf16 products (codec/nvfp4_fragment.h's integer decode, put back into dim
// order). cuda_v4_decode_test checks every (code, scale byte) pair against
// the codecs' decode_lane.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "codec/fp8_ds_mla_v4.h"
#include "codec/nvfp4_fragment.h"
#include "codec/pairs.h"
#include "params/params.h"

namespace mlakv::cuda::v4 {

/// How a V4 family record codes its values (its page layout aside).
enum class Coding : int {
  kFp8Tiles64,  // fp8_ds_mla_v4: 7 tiles of 64 E4M3 NoPE values with UE8M0 scales, then 64 bf16 RoPE values
  kMxfp8,       // fp8_ds_mla_v41(_planar): 16 tiles of 32 E4M3 values with UE8M0 scales
  kFp4,         // nvfp4_ds_mla_v41(_planar): 32 tiles of 16 E2M1 values with E4M3 scales
};

inline constexpr int kLaneValues = 16;        // values a lane decodes
inline constexpr int kFp8V4NopeLanes = 28;    // 448 / 16: the lanes of fp8_ds_mla_v4's E4M3 values
inline constexpr int kFp8V4RopeOffset = 448;  // the bf16 RoPE values' first byte in the data row

/// One key set as the kernel reads it: the cache, the row's entries, and
/// where a token's scale row lies (its region and offset: codec kScaleRow).
struct KeySet {
  params::CacheLayout cache;
  const std::int32_t* indices;  // [R, topk]
  std::int64_t indices_stride_row_elems;
  const std::int32_t* topk_len;  // [R] or null
  std::int64_t topk;
  Coding coding;
  int scale_region;
  int scale_offset;
};

/// A lane's raw bytes of one key: 16 E4M3 codes (lo), 8 bytes of E2M1 codes
/// (lo.x, lo.y) or 16 bf16 values (lo, hi), and the scale byte of its tile.
struct LaneBytes {
  uint4 lo;
  uint4 hi;
  std::uint32_t scale;
};

/// The bytes of a token's data row (its record's codes, or its row of the page).
__host__ __device__ constexpr int data_row_bytes(Coding coding) {
  return coding == Coding::kFp8Tiles64 ? 576 : coding == Coding::kMxfp8 ? 512 : 256;
}
/// The bytes of a token's scale row.
__host__ __device__ constexpr int scale_row_bytes(Coding coding) {
  return coding == Coding::kFp8Tiles64 ? 8 : coding == Coding::kMxfp8 ? 16 : 32;
}

/// Lane `lane`'s bytes of a token whose data row and scale row are at `data` and `scales`.
__device__ __forceinline__ LaneBytes read_lane_bytes(Coding coding, const std::uint8_t* data,
                                                     const std::uint8_t* scales, int lane) {
  LaneBytes b{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), 0};
  if (coding == Coding::kFp8Tiles64) {
    if (lane < kFp8V4NopeLanes) {
      b.lo = *reinterpret_cast<const uint4*>(data + 16 * lane);
      b.scale = scales[lane / 4];
    } else {
      const std::uint8_t* rope = data + kFp8V4RopeOffset + 32 * (lane - kFp8V4NopeLanes);
      b.lo = *reinterpret_cast<const uint4*>(rope);
      b.hi = *reinterpret_cast<const uint4*>(rope + 16);
    }
  } else if (coding == Coding::kMxfp8) {
    b.lo = *reinterpret_cast<const uint4*>(data + 16 * lane);
    b.scale = scales[lane / 2];
  } else {
    const uint2 codes = *reinterpret_cast<const uint2*>(data + 8 * lane);
    b.lo.x = codes.x;
    b.lo.y = codes.y;
    b.scale = scales[lane];
  }
  return b;
}

/// 16 E4M3 codes times a UE8M0 scale, as bf16 pairs: encode_bf16(decode_e4m3(c) * scale_value(byte)).
__device__ __forceinline__ void decode_e4m3_ue8m0(const uint4& codes, std::uint32_t scale_byte,
                                                  std::uint32_t (&pairs)[8]) {
  const float scale = codec::CodecFp8DsMlaV4::scale_value(static_cast<std::uint8_t>(scale_byte), false);
  const std::uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float2 lo = codec::decode_e4m3x2(static_cast<std::uint16_t>(words[w] & 0xFFFFu));
    const float2 hi = codec::decode_e4m3x2(static_cast<std::uint16_t>(words[w] >> 16));
    pairs[2 * w] = codec::encode_bf16x2(lo.x * scale, lo.y * scale);
    pairs[2 * w + 1] = codec::encode_bf16x2(hi.x * scale, hi.y * scale);
  }
}

/// 16 E2M1 codes (8 bytes, the even value in the low nibble) times an E4M3
/// scale, as bf16 pairs in dim order: the fragment decode (values times 2^-8,
/// exact) times 2^8 (exact), pairs regrouped from fragment order.
__device__ __forceinline__ void decode_e2m1_e4m3(std::uint32_t word0, std::uint32_t word1, std::uint32_t scale_byte,
                                                 std::uint32_t (&pairs)[8]) {
  const uint2 words = make_uint2(word0, word1);
  std::uint32_t fragment[8];
  codec::decode_group_fragment(reinterpret_cast<const std::uint8_t*>(&words), static_cast<std::uint8_t>(scale_byte),
                               fragment);
  const __nv_bfloat162 undo = __float2bfloat162_rn(1.0f / codec::kFragmentScale);
#pragma unroll
  for (int p = 0; p < 8; ++p) {
    fragment[p] = codec::bits_of(__hmul2(codec::vec_from_bits<__nv_bfloat162>(fragment[p]), undo));
  }
  // Dims 2j and 2j + 1 are codes k, k + 1 (k = 2j % 8) of word j / 4: the low
  // halves of fragment pairs 4 (j / 4) + k and + k + 1 for k < 4, else the
  // high halves of pairs k - 4 and k - 3.
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int k = (2 * j) % 8;
    const int first = 4 * (j / 4) + k % 4;
    pairs[j] = __byte_perm(fragment[first], fragment[first + 1], k < 4 ? 0x5410 : 0x7632);
  }
}

/// Lane `lane`'s 16 values of a key as bf16 pairs in dim order.
__device__ __forceinline__ void decode_lane(Coding coding, const LaneBytes& b, int lane, std::uint32_t (&pairs)[8]) {
  if (coding == Coding::kFp4) {
    decode_e2m1_e4m3(b.lo.x, b.lo.y, b.scale, pairs);
  } else if (coding == Coding::kFp8Tiles64 && lane >= kFp8V4NopeLanes) {
    pairs[0] = b.lo.x;
    pairs[1] = b.lo.y;
    pairs[2] = b.lo.z;
    pairs[3] = b.lo.w;
    pairs[4] = b.hi.x;
    pairs[5] = b.hi.y;
    pairs[6] = b.hi.z;
    pairs[7] = b.hi.w;
  } else {
    decode_e4m3_ue8m0(b.lo, b.scale, pairs);
  }
}

}  // namespace mlakv::cuda::v4
