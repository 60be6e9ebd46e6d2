// SPDX-License-Identifier: Apache-2.0
// Warp-level helpers of the CUDA kernels.
#pragma once

#include <cstdint>

namespace mlakv::cuda {

inline constexpr int kWarpSize = 32;

/// A record (or staged row) in shared memory, aligned for 16-byte accesses.
template <int kBytes>
struct SmemRecord {
  alignas(16) std::uint8_t bytes[kBytes];
};

/// fmaxf over aligned groups of kWidth lanes (a butterfly: every lane gets the result).
template <int kWidth>
__device__ __forceinline__ float warp_group_max(float v) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

/// Copies `bytes` (a multiple of 16) between 16-byte aligned buffers, lanes striding by 16 bytes.
template <int kBytes>
__device__ __forceinline__ void warp_copy16(void* dst, const void* src, int lane) {
  static_assert(kBytes % 16 == 0, "records are whole 16-byte chunks");
#pragma unroll
  for (int c = lane; c < kBytes / 16; c += kWarpSize) {
    static_cast<uint4*>(dst)[c] = static_cast<const uint4*>(src)[c];
  }
}

}  // namespace mlakv::cuda
