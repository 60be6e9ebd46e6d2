// SPDX-License-Identifier: Apache-2.0
// The wide-tile kernel's products for blocks of kN = 16 or 32 heads (H <= 32),
// transposed so that the 64 keys of a tile, not the heads, are the wgmma M:
// a 64-head product would be half or three quarters padding there. Scores
// S^T (64 keys x kN heads) = K (the key tile, K-major) x Q^T (the query,
// kN rows of 576 dims, K-major); the output O^T (256 dims x kN heads of a
// math warpgroup's half) += V^T (the key tile read MN-major) x P^T (the
// weights, [kN heads][64 keys] K-major, stored from the score accumulators
// with stmatrix .trans). In both accumulators a thread holds rows 16 warp + g
// and + 8 (keys, or dims of each 64-dim block) and columns 8 j + 2 c and + 1
// (heads), so a thread's heads are the same in both: a head's softmax runs
// over the keys in the 4 warps, joined through shared memory.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/hopper/math.cuh"
#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda::transposed_products {

using wide_tiles::kKeyBlockBytes;
using wide_tiles::kTileTokens;

/// Heads of a kN-column accumulator a thread holds: 8 j + 2 c + e at index 2 j + e.
template <int kN>
inline constexpr int kThreadHeads = kN / 4;

/// The head at index i of quad lane c.
__device__ __forceinline__ int thread_head(int i, int c) { return 8 * (i / 2) + 2 * c + i % 2; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Issues (and commits) a tile's scores S^T, 64 keys x kN heads.
template <int kN>
__device__ __forceinline__ void issue_scores(float (&s)[kN / 2], const std::uint8_t* q, const std::uint8_t* keys) {
  wgmma::fence_operands(s);
  warpgroup_math::issue_over_query_dims<kKeyBlockBytes, kN * 128>(
      keys, q, [&](int k, std::uint64_t a, std::uint64_t b) { wgmma::mma_64xn<kN>(s, a, b, k > 0 ? 1 : 0); });
}

/// o (dims 256 half.. of the output, 4 blocks of 64, x kN heads) += V^T x P^T
/// of a tile, waited for: `probs` [kN heads][64 keys] bf16, `keys` the key tile.
template <int kN>
__device__ __forceinline__ void add_probs_times_values(float (&o)[4][kN / 2], const std::uint8_t* probs,
                                                       const std::uint8_t* keys, int half) {
#pragma unroll
  for (int m = 0; m < 4; ++m) wgmma::fence_operands(o[m]);
  wgmma::fence();
  const std::uint64_t probs_step0 = wgmma::descriptor(probs, 16, 1024);
  const std::uint64_t values_step0 = wgmma::descriptor(keys + 4 * half * kKeyBlockBytes, kKeyBlockBytes, 1024);
#pragma unroll
  for (int k = 0; k < kTileTokens / 16; ++k) {
    const std::uint64_t b = wgmma::advanced(probs_step0, 32 * k);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      wgmma::mma_64xn<kN, true>(o[m], wgmma::advanced(values_step0, m * kKeyBlockBytes + 16 * k * 128), b, 1);
    }
  }
  wgmma::commit();
  wgmma::wait<0>();
#pragma unroll
  for (int m = 0; m < 4; ++m) wgmma::fence_operands(o[m]);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// A tile's scores into the log2 domain, -inf for keys without a record
/// (ok[h]: key 16 warp + g + 8 h has one); each of the thread's heads' maximum
/// over the warp's 16 keys into warp_max.
template <int kN>
__device__ __forceinline__ void mask_scores(float (&s)[kN / 2], const bool (&ok)[2], float score_scale,
                                            float (&warp_max)[kThreadHeads<kN>]) {
#pragma unroll
  for (int i = 0; i < kThreadHeads<kN>; ++i) {
    const int j = i / 2;
    const int e = i % 2;
    float& key0 = s[4 * j + e];
    float& key1 = s[4 * j + 2 + e];
    key0 = ok[0] ? key0 * score_scale : -INFINITY;
    key1 = ok[1] ? key1 * score_scale : -INFINITY;
    float m = fmaxf(key0, key1);
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 4));
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 8));
    warp_max[i] = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 16));
  }
}

/// The online softmax step of the thread's heads, given each head's tile
/// maximum: the scores become the weights (kept unrounded), each head's
/// reference maximum (warpgroup_math::next_reference) and this thread's part
/// of its sum move, and alpha gets the output's rescale factor.
template <int kN>
__device__ __forceinline__ void softmax_weights(float (&s)[kN / 2], const float (&tile_max)[kThreadHeads<kN>],
                                                float (&row_max)[kThreadHeads<kN>], float (&row_sum)[kThreadHeads<kN>],
                                                float (&alpha)[kThreadHeads<kN>]) {
#pragma unroll
  for (int i = 0; i < kThreadHeads<kN>; ++i) {
    const warpgroup_math::Reference ref = warpgroup_math::next_reference(tile_max[i], row_max[i]);
    alpha[i] = ref.alpha;
    float& key0 = s[4 * (i / 2) + i % 2];
    float& key1 = s[4 * (i / 2) + 2 + i % 2];
    key0 = warpgroup_math::weight(key0, ref.max);
    key1 = warpgroup_math::weight(key1, ref.max);
    row_max[i] = ref.max;
    row_sum[i] = row_sum[i] * alpha[i] + (key0 + key1);  // unrounded: lse exact to float32
  }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// The weights in s (this warp's 16 keys x kN heads) as bf16 into `probs`
/// ([kN heads][64 keys], 128-byte swizzle): 8 x 8 blocks (keys 16 warp + 8 h,
/// heads 8 j) stored transposed, four a stmatrix.
template <int kN>
__device__ __forceinline__ void store_weights(std::uint8_t* probs, const float (&s)[kN / 2], int warp, int lane) {
#pragma unroll
  for (int q = 0; q < kN / 16; ++q) {
    std::uint32_t blocks[4];  // block i: heads 8 (2 q + i / 2), keys 16 warp + 8 (i % 2)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int at = 4 * (2 * q + i / 2) + 2 * (i % 2);
      blocks[i] = warpgroup_math::bf16x2_bits(s[at], s[at + 1]);
    }
    const int i = lane / 8;  // the block whose row lane % 8 this lane addresses
    const int head = 8 * (2 * q + i / 2) + lane % 8;
    wgmma::store_matrices_transposed(probs + wgmma::swizzled_offset(head, 16 * warp + 8 * (i % 2), kN * 128), blocks);
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// The output accumulators of the thread's heads rescaled by alpha.
template <int kN>
__device__ __forceinline__ void rescale(float (&o)[4][kN / 2], const float (&alpha)[kThreadHeads<kN>]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int i = 0; i < kThreadHeads<kN>; ++i) {
      o[m][4 * (i / 2) + i % 2] *= alpha[i];
      o[m][4 * (i / 2) + 2 + i % 2] *= alpha[i];
    }
  }
}

/// A math warpgroup's output: its 256 dims of every live head from o, scaled
/// by the head's 1 / sum (the key tile's factor undone), to the epilogue's
/// destination (head_destination); warpgroup 0's warp 0 also stores the lse.
/// A thread holds dims (rows) g and g + 8 of each
/// 16 and two adjacent heads; the lane holding the next dim of a head (g + 1
/// in dim order, g ^ 2 in NVFP4's fragment order: codec::fragment_dim) swaps
/// values with it, so each stores a pair of adjacent dims of one head.
template <class Codec, Epilogue kEpilogue, int kN>
__device__ __forceinline__ void store_output(const params::SparseDecodeParams& p, const StagedRows& staged,
                                             const float (&o)[4][kN / 2], const float* row_sums,
                                             const float* row_maxima, std::int64_t row, std::int64_t head0,
                                             std::int64_t split, int half, int warp, int lane) {
  const auto totals_of = [&](int head) { return finish_head(row_sums[head], row_maxima[head]); };
  const int g = lane / 4;
  const int c = lane % 4;
  constexpr int kPartner = kFragmentDecode<Codec> ? 2 : 1;  // in g
  const bool lower = (g & kPartner) == 0;                   // holds the pair's first dim
  // The dim of row g (of 8) within its 8: fragment position g holds dim g / 2 + 4 (g % 2).
  const int dim = kFragmentDecode<Codec> ? g / 2 + 4 * (g % 2) : g;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int head = 8 * j + 2 * c + (lower ? 0 : 1);  // of the block's
    const bool live = head0 + head < p.heads;
    const HeadTotals totals = totals_of(head);
    const auto store = head_destination<kEpilogue>(p, staged, split, row, head0, live ? head0 + head : 0);
    const float scale = totals.inv_sum * (1.0f / kKeyTileScale<Codec>);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float v0 = o[m][4 * j + 2 * h];
        const float v1 = o[m][4 * j + 2 * h + 1];
        const float other = __shfl_xor_sync(0xFFFFFFFFu, lower ? v1 : v0, 4 * kPartner);
        const int at = 256 * half + 64 * m + 16 * warp + 8 * h + dim;
        if (!live) continue;
        if (lower) {
          store.store_pair(at, v0 * scale, other * scale);
        } else {
          store.store_pair(at - 1, other * scale, v1 * scale);
        }
      }
    }
    if (half == 0 && warp == 0 && g < 2) {  // lanes 0..7: the lse of heads 8 j + 2 c + g
      const int lse_head = 8 * j + 2 * c + g;
      if (head0 + lse_head < p.heads) {
        *head_destination<kEpilogue>(p, staged, split, row, head0, head0 + lse_head).lse = totals_of(lse_head).lse;
      }
    }
  }
}

}  // namespace mlakv::cuda::transposed_products
