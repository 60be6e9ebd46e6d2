// SPDX-License-Identifier: Apache-2.0
// What both warpgroup decode kernels (warpgroups_kernel.cuh: 32-key
// tiles; wide_tiles_kernel.cuh: 64-key tiles) read and write the
// same way: a block's 64 query heads into shared memory and its output rows.
// With NVFP4 keys (kFragmentDecode) the key tile holds each latent group's 16
// dims in the order of codec::fragment_dim, times kKeyTileScale; the query's
// latent dims go into the same order, and the output's are put back.
#pragma once

#include <cstdint>

#include "codec/nvfp4_fragment.h"
#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda::warpgroup_io {

using warpgroups::kHalfDims;
using warpgroups::kHeads;

/// The block's kRows query heads head0.. of `row` (zeros past H) into `q`,
/// swizzled in 64-column blocks of kRows x 128 bytes, 16 dims a step of the
/// block's kThreads threads.
template <class Codec, int kThreads, int kRows = kHeads>
__device__ __forceinline__ void load_query(std::uint8_t* q, const params::SparseDecodeParams& p, std::int64_t row,
                                           std::int64_t head0, int tid) {
  constexpr int kUnits = kQueryDim / 16;  // a latent group or 16 RoPE dims
#pragma unroll 2
  for (int i = tid; i < kRows * kUnits; i += kThreads) {
    const int h = i / kUnits;
    const int col = 16 * (i % kUnits);
    uint4 v[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    if (head0 + h < p.heads) {
      const auto* src =
          reinterpret_cast<const uint4*>(p.q + row * p.q_stride_row_elems + (head0 + h) * p.q_stride_head_elems + col);
      v[0] = __ldg(src);
      v[1] = __ldg(src + 1);
    }
    if constexpr (kFragmentDecode<Codec>) {
      if (col < kLatentDim) {
        const std::uint32_t in_order[8] = {v[0].x, v[0].y, v[0].z, v[0].w, v[1].x, v[1].y, v[1].z, v[1].w};
        std::uint32_t pairs[8];
        codec::fragment_pairs_from_dim_order(in_order, pairs);
        v[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
        v[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
      }
    }
    *reinterpret_cast<uint4*>(q + wgmma::swizzled_offset(h, col, kRows * 128)) = v[0];
    *reinterpret_cast<uint4*>(q + wgmma::swizzled_offset(h, col + 8, kRows * 128)) = v[1];
  }
}

/// A math warpgroup's output: rows r0 and r1 (accumulator rows 16 warp + g
/// and + 8) of its 256 dims from o, scaled by each head's 1 / sum (and the
/// key tile's factor undone), to the epilogue's destination
/// (head_destination), with the lse from warpgroup 0. Every lane runs it:
/// with NVFP4 keys quad neighbours swap values.
template <class Codec, Epilogue kEpilogue>
__device__ __forceinline__ void store_output(const params::SparseDecodeParams& p, const StagedRows& staged,
                                             const float (&o)[128], const float* row_sums, const float* row_maxima,
                                             std::int64_t row, std::int64_t head0, std::int64_t split, int warpgroup,
                                             int r0, int r1, int c) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = h == 0 ? r0 : r1;
    const std::int64_t head = head0 + r;
    const bool live = head < p.heads;
    const HeadTotals totals = finish_head(row_sums[r], row_maxima[r]);
    const auto store = head_destination<kEpilogue>(p, staged, split, row, head0, live ? head : 0);
    const float scale = totals.inv_sum * (1.0f / kKeyTileScale<Codec>);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const float v0 = o[4 * i + 2 * h] * scale;
      const float v1 = o[4 * i + 2 * h + 1] * scale;
      if constexpr (kFragmentDecode<Codec>) {
        // Columns 2 c, 2 c + 1 of 16 dims hold fragment pair 4 (i % 2) + c: dims
        // 8 (i % 2) + c and + 4. Quad neighbours swap one value to store adjacent pairs:
        // an even lane dims c, c + 1 (its low values), an odd lane c + 3, c + 4 (the high).
        const int base = kHalfDims * warpgroup + 16 * (i / 2) + 8 * (i % 2) + c;
        const float other = __shfl_xor_sync(0xFFFFFFFFu, c % 2 == 0 ? v1 : v0, 1);
        if (!live) continue;
        if (c % 2 == 0) {
          store.store_pair(base, v0, other);
        } else {
          store.store_pair(base + 3, other, v1);
        }
      } else if (live) {
        store.store_pair(kHalfDims * warpgroup + 8 * i + 2 * c, v0, v1);
      }
    }
    if (live && warpgroup == 0 && c == 0) *store.lse = totals.lse;
  }
}

}  // namespace mlakv::cuda::warpgroup_io
