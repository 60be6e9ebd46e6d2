// SPDX-License-Identifier: Apache-2.0
// CUDA writer of the DeepSeek V4 family (block-planar V4 and V4.1 pages,
// token-major V4.1 records): one warp per token over the lane-parallel codecs
// (codec/v4_lanes.h). Lane l loads its 16 inputs (32 contiguous bytes of the
// NoPE row, or of the RoPE row for lanes 28..31), the tile's lanes combine
// their amaxes by shuffles, and every lane stores its own codes straight from
// registers: the lanes' code stores tile the data row contiguously (16-byte
// stores, 8-byte for FP4), and the tiles' scale bytes go out as one
// instruction of adjacent bytes.
#include "cuda/cuda_backend.h"
#include "cuda/warp.cuh"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda {
namespace {

// Four warps (tokens) per block, as the 512 + 64 writers (write_records.cu).
constexpr int kWarpsPerBlock = 4;

// Lane l's 16 inputs: two 16-byte loads where both input tensors have
// 16-byte aligned rows, else eight 4-byte loads (rows are only guaranteed
// 4-byte aligned). Returns a word that depends on every load, for once_arrived.
template <int kLoadBytes>
__device__ __forceinline__ std::uint32_t load_lane_inputs(const std::uint8_t* src, std::uint16_t (&x)[16]) {
  constexpr int kBytes = 2 * codec::kV4LaneValues;
  std::uint32_t every_load = 0;
  if constexpr (kLoadBytes == 16) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(src));
    const uint4 b = __ldg(reinterpret_cast<const uint4*>(src) + 1);
    memcpy(x, &a, 16);
    memcpy(x + 8, &b, 16);
    every_load = a.x ^ b.x;
  } else {
#pragma unroll
    for (int i = 0; i < kBytes / 4; ++i) {
      const unsigned w = __ldg(reinterpret_cast<const unsigned*>(src) + i);
      memcpy(x + 2 * i, &w, 4);
      every_load ^= w;
    }
  }
  return every_load;
}

template <class Codec, codec::InputDtype kDtype, int kLoadBytes>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize) write_pages_kernel(const params::WriteParams p) {
  static_assert(codec::kV4Lanes == kWarpSize, "a lane of the codec is a lane of the warp");
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);  // unsigned: a shift, not a signed division
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::int64_t token = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (token >= p.num_tokens) return;

  // Issue the slot and input loads together: neither depends on the other.
  const std::int64_t slot = __ldg(p.slot_mapping + token);
  const std::uint8_t* src =
      lane < codec::kV4NopeLanes
          ? p.kv_c + token * p.kv_c_stride_bytes + lane * 2 * codec::kV4LaneValues
          : p.k_pe + token * p.k_pe_stride_bytes + (lane - codec::kV4NopeLanes) * 2 * codec::kV4LaneValues;
  std::uint16_t x[codec::kV4LaneValues];
  const std::uint32_t arrived = load_lane_inputs<kLoadBytes>(src, x);
  if (!once_arrived(params::slot_in_range(p.cache, slot), arrived)) return;  // warp-uniform

  float amax = Codec::template lane_amax<kDtype>(x);
  if constexpr (Codec::kTileLanes > 1) amax = warp_group_max<Codec::kTileLanes>(amax);
  const params::PagePosition at = params::page_position(p.cache, slot);
  Codec::template encode_lane<kDtype>(
      lane, amax, x, params::field_address(p.cache, at, Codec::kDataRow.region, Codec::kDataRow.offset),
      params::field_address(p.cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset));
}

template <class Codec, codec::InputDtype kDtype>
cudaError_t launch(const params::WriteParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const auto aligned16 = [](const std::uint8_t* base, std::int64_t stride) {
    return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && stride % 16 == 0;
  };
  if (aligned16(p.kv_c, p.kv_c_stride_bytes) && aligned16(p.k_pe, p.k_pe_stride_bytes)) {
    write_pages_kernel<Codec, kDtype, 16><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  } else {
    write_pages_kernel<Codec, kDtype, 4><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t write_pages(const params::WriteParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  return codec::visit_part_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    return p.dtype == codec::InputDtype::kBf16 ? launch<Codec, codec::InputDtype::kBf16>(p, stream)
                                               : launch<Codec, codec::InputDtype::kFp16>(p, stream);
  });
}

}  // namespace mlakv::cuda
