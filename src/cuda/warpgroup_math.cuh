// SPDX-License-Identifier: Apache-2.0
// What both warpgroup decode kernels (sparse_mla_decode_warpgroups.cuh: 32-key
// tiles; sparse_mla_decode_wide_tiles.cuh: 64-key tiles) compute the same way:
// P x V on wgmma over a swizzled key tile read MN-major as values, and the
// online softmax's small pieces (the wgmma ones sm_90a only).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/wgmma.cuh"
#include "mlakv/vocabulary.h"

namespace mlakv::cuda::warpgroup_math {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Issues (and commits) o (a warpgroup's 64 heads x 256 dims of `half`) +=
/// P x V of a tile of kTokens keys: `probs` [64 heads][kTokens] bf16, `keys`
/// the key tile (64-column blocks kKeyBlockBytes apart), its first 512 dims
/// the values.
template <int kTokens, int kKeyBlockBytes>
__device__ __forceinline__ void issue_probs_times_values(float (&o)[128], const std::uint8_t* probs,
                                                         const std::uint8_t* keys, int half) {
  wgmma::fence_operands(o);  // o's ordinary writes (the rescale) stay before the wgmma's stage
  wgmma::fence();
#pragma unroll
  for (int k = 0; k < kTokens / 16; ++k) {
    const std::uint64_t a = wgmma::descriptor(probs + 32 * k, 16, 1024);
    const std::uint64_t b =
        wgmma::descriptor(keys + (kValueDim / 2 / 64) * half * kKeyBlockBytes + 16 * k * 128, kKeyBlockBytes, 1024);
    wgmma::mma_64x256_b_mn_major(o, a, b, 1);
  }
  wgmma::commit();
  wgmma::fence_operands(o);
}

/// The same, waited for.
template <int kTokens, int kKeyBlockBytes>
__device__ __forceinline__ void add_probs_times_values(float (&o)[128], const std::uint8_t* probs,
                                                       const std::uint8_t* keys, int half) {
  issue_probs_times_values<kTokens, kKeyBlockBytes>(o, probs, keys, half);
  wgmma::wait<0>();
  wgmma::fence_operands(o);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// 2^x by the approximate MUFU instruction (2 ulp; the weights are rounded to bf16 anyway).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// Two floats as a bf16 pair (round to nearest even), lo in the low half.
__device__ __forceinline__ std::uint32_t bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

/// Growth of a row's score maximum (log2 domain) within which the reference
/// maximum of the weights stays put.
inline constexpr float kMaxGrowth = 8.0f;

/// The output accumulators of rows r0 (alpha0) and r1 (alpha1) rescaled.
__device__ __forceinline__ void rescale(float (&o)[128], float alpha0, float alpha1) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    o[4 * i] *= alpha0;
    o[4 * i + 1] *= alpha0;
    o[4 * i + 2] *= alpha1;
    o[4 * i + 3] *= alpha1;
  }
}

}  // namespace mlakv::cuda::warpgroup_math
