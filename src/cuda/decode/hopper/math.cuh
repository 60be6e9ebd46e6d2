// SPDX-License-Identifier: Apache-2.0
// What both warpgroup decode kernels (warpgroups_kernel.cuh: 32-key
// tiles; wide_tiles_kernel.cuh: 64-key tiles) compute the same way:
// P x V on wgmma over a swizzled key tile read MN-major as values, and the
// online softmax's small pieces (the wgmma ones sm_90a only).
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "cuda/ptx/wgmma.cuh"
#include "mlakv/vocabulary.h"

namespace mlakv::cuda::warpgroup_math {

/// Registers a thread of the warpgroup kernels' 384-thread blocks holds at
/// launch (the SM's 64 K registers over 384 threads, as ptxas allocates them).
inline constexpr int kLaunchRegisters = 168;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Issues (and commits) a product over the 576 query dims in k16 steps:
/// mma(k, a, b) with a and b the descriptors of step k of two K-major tiles
/// (128-byte swizzle) whose 64-column blocks are kABlockBytes and
/// kBBlockBytes apart. Every kernel's scores step this way.
template <int kABlockBytes, int kBBlockBytes, class Mma>
__device__ __forceinline__ void issue_over_query_dims(const std::uint8_t* a_tile, const std::uint8_t* b_tile,
                                                      Mma&& mma) {
  const std::uint64_t a_step0 = wgmma::descriptor(a_tile, 16, 1024);
  const std::uint64_t b_step0 = wgmma::descriptor(b_tile, 16, 1024);
  wgmma::fence();
#pragma unroll
  for (int k = 0; k < kQueryDim / 16; ++k) {
    const int offset = (k % 4) * 32;  // 16 columns a step within a 64-column block
    mma(k, wgmma::advanced(a_step0, (k / 4) * kABlockBytes + offset),
        wgmma::advanced(b_step0, (k / 4) * kBBlockBytes + offset));
  }
  wgmma::commit();
}

/// Issues (and commits) o (a warpgroup's 64 heads x 256 dims of `half`) +=
/// P x V of a tile of kTokens keys: `probs` [64 heads][kTokens] bf16, `keys`
/// the key tile (64-column blocks kKeyBlockBytes apart), its first 512 dims
/// the values.
template <int kTokens, int kKeyBlockBytes>
__device__ __forceinline__ void issue_probs_times_values(float (&o)[128], const std::uint8_t* probs,
                                                         const std::uint8_t* keys, int half) {
  wgmma::fence_operands(o);  // o's ordinary writes (the rescale) stay before the wgmma's stage
  wgmma::fence();
  const std::uint64_t probs_step0 = wgmma::descriptor(probs, 16, 1024);
  const std::uint64_t values_step0 =
      wgmma::descriptor(keys + (kValueDim / 2 / 64) * half * kKeyBlockBytes, kKeyBlockBytes, 1024);
#pragma unroll
  for (int k = 0; k < kTokens / 16; ++k) {
    const std::uint64_t a = wgmma::advanced(probs_step0, 32 * k);
    const std::uint64_t b = wgmma::advanced(values_step0, 16 * k * 128);
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

/// This warpgroup's threads keep kRegisters each from here (setmaxnreg):
/// `inc` where that is more than at launch, else `dec` (each moves one way
/// only; an `inc` to fewer faults).
template <int kRegisters>
__device__ __forceinline__ void keep_registers() {
  static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg's range");
  if constexpr (kRegisters > kLaunchRegisters) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  } else if constexpr (kRegisters < kLaunchRegisters) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  }
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

/// A row's reference maximum after a tile, and the factor its earlier
/// weights (sum and output) take.
struct Reference {
  float max;    // -inf while the row has no valid key: nothing to weigh
  float alpha;  // 1 where the reference stays
};

/// The online softmax's reference after a tile of maximum tile_max: it moves
/// only when the tile's maximum exceeds it by more than kMaxGrowth, so
/// rescales stop after the first tiles and weights stay below 2^kMaxGrowth.
__device__ __forceinline__ Reference next_reference(float tile_max, float row_max) {
  const bool moves = tile_max > row_max + kMaxGrowth;
  const float max = moves ? tile_max : row_max;
  return {max, moves && row_max != -INFINITY ? fast_exp2(row_max - max) : 1.0f};
}

/// A score's weight against the reference maximum `max` (0 while it is -inf).
__device__ __forceinline__ float weight(float score, float max) {
  return max == -INFINITY ? 0.0f : fast_exp2(score - max);
}

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

/// The score columns a thread of a 64-row accumulator holds that have a
/// record, for quad lane c: bit 2 i + e is key 8 i + 2 c + e (keys 2 c, 2 c + 1
/// of each of the tile's kChunks 8-key chunks); `valid` holds a byte a key.
template <int kChunks>
__device__ __forceinline__ std::uint32_t valid_key_bits(const std::uint8_t* valid, int c) {
  std::uint32_t bits = 0;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const auto pair = *reinterpret_cast<const std::uint16_t*>(&valid[8 * i + 2 * c]);
    bits |= static_cast<std::uint32_t>((pair & 1u) | (pair >> 7 & 2u)) << (2 * i);
  }
  return bits;
}

/// A tile's scores of a thread's rows r0 (s[4 i], s[4 i + 1]) and r1
/// (s[4 i + 2], s[4 i + 3]) into the log2 domain, -inf where the key has no
/// record; tile_max: each row's maximum over the thread's columns.
template <int kChunks>
__device__ __forceinline__ void mask_scores(float (&s)[4 * kChunks], std::uint32_t valid, float score_scale,
                                            float (&tile_max)[2]) {
  tile_max[0] = -INFINITY;
  tile_max[1] = -INFINITY;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool ok = (valid >> (2 * i + e) & 1u) != 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& v = s[4 * i + 2 * h + e];
        v = ok ? v * score_scale : -INFINITY;
        tile_max[h] = fmaxf(tile_max[h], v);
      }
    }
  }
}

/// The online softmax step of those rows for the masked tile: each row's
/// reference maximum and sum updated, its rescale factor for the output into
/// alpha, and the tile's weights handed to weights(h, i, bf16 pair bits) for
/// row h's chunk i.
template <int kChunks, class Weights>
__device__ __forceinline__ void softmax_weights(const float (&s)[4 * kChunks], float (&tile_max)[2],
                                                float (&row_max)[2], float (&row_sum)[2], float (&alpha)[2],
                                                Weights&& weights) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xFFFFFFFFu, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xFFFFFFFFu, tile_max[h], 2));
    const Reference ref = next_reference(tile_max[h], row_max[h]);
    alpha[h] = ref.alpha;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const float p0 = weight(s[4 * i + 2 * h], ref.max);
      const float p1 = weight(s[4 * i + 2 * h + 1], ref.max);
      sum += p0 + p1;  // unrounded, so lse is exact to float32 (P x V takes the bf16 weights)
      weights(h, i, bf16x2_bits(p0, p1));
    }
    row_max[h] = ref.max;
    row_sum[h] = row_sum[h] * alpha[h] + sum;
  }
}

/// Rows r0 and r1's softmax totals for the epilogue: each row's sum over the
/// quad's columns and its reference maximum, stored once a row (quad lane 0).
__device__ __forceinline__ void publish_row_totals(float (&row_sum)[2], const float (&row_max)[2], float* sums,
                                                   float* maxima, int r0, int r1, int c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[h], 2);
  }
  if (c == 0) {
    sums[r0] = row_sum[0];
    sums[r1] = row_sum[1];
    maxima[r0] = row_max[0];
    maxima[r1] = row_max[1];
  }
}

}  // namespace mlakv::cuda::warpgroup_math
