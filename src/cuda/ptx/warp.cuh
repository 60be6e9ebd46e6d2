// SPDX-License-Identifier: Apache-2.0
// Warp-level helpers of the CUDA kernels.
#pragma once

#include <cstdint>

#include "cuda/ptx/warp_size.h"

namespace mlakv::cuda {

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

/// The largest of the warp's amaxes. Amaxes are never negative or NaN (-0
/// included: they start at +0), so their bit patterns order as unsigned
/// integers exactly as the values do: one warp reduction (redux.sync) finds
/// the same value as the butterfly of warp_group_max, whose five shuffles in a
/// row lie on a decode step's critical path.
__device__ __forceinline__ float warp_amax(float amax) {
  return __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(amax)));
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

/// `valid`, known only once `word` has arrived, so that a branch on it
/// cannot be taken before the loads `word` depends on were issued. Without
/// it, the compiler sinks a writer's input loads below its early return for a
/// skipped slot, and a launch waits for the slot, then for the inputs: two
/// memory round trips in a row. (A population count is at most 32, which
/// neither compiler assumes.)
__device__ __forceinline__ bool once_arrived(bool valid, unsigned word) {
  unsigned bits;
  asm("popc.b32 %0, %1;" : "=r"(bits) : "r"(word));
  return (static_cast<unsigned>(valid) & static_cast<unsigned>(bits <= 32u)) != 0u;
}

}  // namespace mlakv::cuda
