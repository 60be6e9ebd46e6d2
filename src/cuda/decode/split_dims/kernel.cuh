// SPDX-License-Identifier: Apache-2.0
// The sparse MLA decode for up to 32 heads per thread block, with the key and
// value dims split over the block's warps so that a record is decoded straight
// into tensor-core fragments and never written back to shared memory as bf16.
//
// A block owns one query row, 16 or 32 heads (one or two mma M tiles) and a
// range of the row's entries, walked in tiles of 32. Records are bulk-copied
// (one instruction a record, completing on the stage's mbarrier) into a ring
// of kStages tiles, so the copies of the next tiles are in flight while one is
// computed; warp w copies tokens 4w..4w+3 of a tile, and finds their record
// addresses eight tiles at a time (a lane an address), a batch ahead. Warp w owns the latent groups 4w..4w+3
// (64 dims) and the RoPE pairs 4w..4w+3: lane (token g = lane / 4, quad
// c = lane % 4) decodes group 4w + c of token g (decode_key_fragment), and the
// 16 values and RoPE pair it gets are its key fragments as they are: the dot
// product does not depend on the order of the dims, so the mma's k index runs
// over them in the order the lanes hold them (codec::fragment_dim) and the
// query is loaded in that same order. The latent values are the readers' bf16
// values times kLatentKeyScale (codec/nvfp4_fragment.h says why), undone in
// f32: the latent part of each score and the output are divided by it. Per tile:
//   1. each warp scores its dims: partial scores [heads x 32] per warp;
//   2. the partials are summed through shared memory (warp v's in order v),
//      and warp w runs the online softmax of heads 2Gw..2Gw+2G-1;
//   3. each warp adds P x V over its 64 latent dims; its value fragments are
//      its key fragments transposed in registers (movmatrix), so a record is
//      read from shared memory once.
#pragma once

#include <cmath>
#include <cstdint>

#include "codec/nvfp4_fragment.h"
#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/decode/split_dims/shape.h"
#include "cuda/ptx/bulk_copy.cuh"
#include "cuda/ptx/mma.cuh"
#include "cuda/ptx/warp.cuh"
#include "dispatch/visit_codec.h"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda::split_dims {

template <int kGroups, int kRecordBytes>
struct Storage {
  static constexpr int kHeads = 16 * kGroups;
  alignas(16) std::uint8_t records[kStages<kRecordBytes>][kTileTokens][kRecordBytes];
  alignas(16) float partial[kWarps][kHeads][kPartialPitch];
  alignas(16) std::uint16_t probs[kHeads][kProbPitch];
  float rescale[kHeads];
  float row_sum[kHeads];
  float row_max[kHeads];  // log2 domain
  int valid[kStages<kRecordBytes>][kTileTokens];
  std::uint64_t landed[kStages<kRecordBytes>];  // mbarrier: the stage's records are in
};

/// The zero record bulk-copied for a token without one: every format decodes
/// it to zeros, so the decode needs no branch (`valid` keeps the token out of
/// the softmax). As long as the largest record this kernel reads (NVFP4's 432
/// bytes; issue_tile checks).
__device__ const uint4 kZeroRecord[record_bytes(Format::kNvfp4DsMla) / 16] = {};

/// The record of entry `entry` of `row`, or null past the block's range or
/// for a slot that is negative or past capacity (never read).
__device__ __forceinline__ const std::uint8_t* load_record_address(const params::SparseDecodeParams& p,
                                                                   std::int64_t row, std::int64_t entry,
                                                                   std::int64_t end) {
  if (entry >= end) return nullptr;
  const std::int64_t slot = __ldg(p.indices + row * p.indices_stride_row_elems + entry);
  return params::record_or_null(p.cache, slot);
}

/// The record addresses of tiles [first_tile, first_tile + kBatchTiles) a
/// warp copies: lane 4 i + j holds token 4 warp + j of tile first_tile + i.
__device__ __forceinline__ const std::uint8_t* load_address_batch(const params::SparseDecodeParams& p, std::int64_t row,
                                                                  std::int64_t begin, std::int64_t end, int first_tile,
                                                                  int warp, int lane) {
  const std::int64_t entry = begin + static_cast<std::int64_t>(first_tile + lane / kWarpTokens) * kTileTokens +
                             kWarpTokens * warp + lane % kWarpTokens;
  return load_record_address(p, row, entry, end);
}

/// Bulk-copies the warp's tokens of tile `tile` into a ring stage from the
/// addresses in `batch` (null: the zero record) and marks which have one;
/// warp 0 announces the whole tile's bytes on the stage's barrier.
template <int kRecordBytes>
__device__ __forceinline__ void issue_tile(const std::uint8_t* batch, int tile, std::uint8_t (*records)[kRecordBytes],
                                           int* valid, std::uint64_t* landed, int warp, int lane) {
  static_assert(kRecordBytes % 16 == 0 && kRecordBytes <= static_cast<int>(sizeof(kZeroRecord)), "bulk-copyable");
  const auto* record = reinterpret_cast<const std::uint8_t*>(__shfl_sync(
      0xFFFFFFFFu, reinterpret_cast<std::uintptr_t>(batch), (tile % kBatchTiles) * kWarpTokens + lane % kWarpTokens));
  bulk_copy_fence();  // the block's reads of the stage's previous tile come first
  if (warp == 0 && lane == 0) bulk_barrier_expect(landed, kTileTokens * kRecordBytes);
  if (lane < kWarpTokens) {
    const int token = kWarpTokens * warp + lane;
    valid[token] = record != nullptr ? 1 : 0;
    bulk_copy(records[token], record != nullptr ? record : reinterpret_cast<const std::uint8_t*>(kZeroRecord),
              kRecordBytes, landed);
  }
}

template <class Codec, int kGroups, bool kPartial>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm<kGroups>)
    sparse_mla_decode_split_dims_kernel(const params::SparseDecodeParams p, int units_per_split) {
  constexpr int kRecordBytes = Codec::Spec::kRecordBytes;
  constexpr int kRing = kStages<kRecordBytes>;
  constexpr int kHeads = 16 * kGroups;
  constexpr int kSoftmaxHeads = kHeads / kWarps;  // heads whose softmax a warp runs
  using Shared = Storage<kGroups, kRecordBytes>;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<Shared*>(smem_raw);

  if constexpr (kPartial) asm volatile("griddepcontrol.launch_dependents;");  // the merge may start its blocks
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int g = lane >> 2;  // mma row group: token of a key fragment, head of an accumulator
  const int c = lane & 3;   // quad: this lane's latent group 4 warp + c
  const int group = kLatentBlocks * warp + c;
  const BlockRange block = block_range<kHeads>(p, units_per_split);
  const auto [row, head0, split, begin, end] = block;
  const int tiles = block.tiles<kTileTokens>();

  // The addresses of the first two batches of tiles, loaded before anything waits.
  static_assert(kStages<kRecordBytes> - 1 <= kBatchTiles, "the ring starts within the first batch");
  const std::uint8_t* batch = load_address_batch(p, row, begin, end, 0, warp, lane);
  const std::uint8_t* next_batch = load_address_batch(p, row, begin, end, kBatchTiles, warp, lane);
  if (threadIdx.x < kRing) bulk_barrier_init(&sh.landed[threadIdx.x]);
  bulk_barrier_init_fence();
  __syncthreads();  // the barriers are initialized before any copy completes on them

  // This warp's query fragments (mma A, rows = heads), dims in the lanes' order.
  std::uint32_t qf[kGroups][kKeyBlocks][4];
#pragma unroll
  for (int hg = 0; hg < kGroups; ++hg) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t head = head0 + 16 * hg + g + 8 * half;
      uint4 lo = make_uint4(0, 0, 0, 0);
      uint4 hi = make_uint4(0, 0, 0, 0);
      std::uint32_t rope = 0;
      if (head < p.heads) {
        const std::uint16_t* qh = p.q + row * p.q_stride_row_elems + head * p.q_stride_head_elems;
        lo = __ldg(reinterpret_cast<const uint4*>(qh + 16 * group));
        hi = __ldg(reinterpret_cast<const uint4*>(qh + 16 * group) + 1);
        rope = __ldg(reinterpret_cast<const std::uint32_t*>(qh + codec::kLatentDim + 2 * group));
      }
      const std::uint32_t in_order[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      std::uint32_t words[8];
      codec::fragment_pairs_from_dim_order(in_order, words);
#pragma unroll
      for (int kb = 0; kb < kLatentBlocks; ++kb) {
        qf[hg][kb][half] = words[2 * kb];
        qf[hg][kb][2 + half] = words[2 * kb + 1];
      }
      qf[hg][kLatentBlocks][half] = rope;
      qf[hg][kLatentBlocks][2 + half] = 0;
    }
  }
  // Start the ring: the first records are the longest wait.
#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) {
    if (s < tiles) issue_tile<kRecordBytes>(batch, s, sh.records[s], sh.valid[s], &sh.landed[s], warp, lane);
  }
  const float score_scale = p.sm_scale * 1.4426950408889634f;  // scores in the log2 domain

  float row_max[kSoftmaxHeads];  // the online softmax of the warp's heads (lane-uniform)
  float row_sum[kSoftmaxHeads];
#pragma unroll
  for (int i = 0; i < kSoftmaxHeads; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
  }
  float acc[kGroups][kLatentBlocks][2][4] = {};

#pragma unroll 1
  for (int t = 0; t < tiles; ++t) {
    const int stage = t % kRing;
    __syncthreads();  // every warp is done with tile t - 1 (its stage and the score buffers)
    if (const int tile = t + kRing - 1; tile < tiles) {
      if (tile % kBatchTiles == 0) {  // the next batch was loaded a batch ago
        batch = next_batch;
        next_batch = load_address_batch(p, row, begin, end, tile + kBatchTiles, warp, lane);
      }
      issue_tile<kRecordBytes>(batch, tile, sh.records[tile % kRing], sh.valid[tile % kRing], &sh.landed[tile % kRing],
                               warp, lane);
    }
    bulk_barrier_wait(&sh.landed[stage], static_cast<std::uint32_t>(t / kRing) & 1u);

    // 1. Decode: key fragments of tokens 8 nt + g, this lane's group and RoPE pair.
    std::uint32_t kf[kTokenTiles][kKeyBlocks][2];
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt) {
      std::uint32_t latent[8];
      decode_key_fragment<Codec>(group, sh.records[stage][8 * nt + g], latent, kf[nt][kLatentBlocks][0]);
#pragma unroll
      for (int kb = 0; kb < kLatentBlocks; ++kb) {
        kf[nt][kb][0] = latent[2 * kb];
        kf[nt][kb][1] = latent[2 * kb + 1];
      }
      kf[nt][kLatentBlocks][1] = 0;
    }

    // 2. Partial scores over this warp's dims, summed across warps in shared memory.
#pragma unroll
    for (int hg = 0; hg < kGroups; ++hg) {
#pragma unroll
      for (int nt = 0; nt < kTokenTiles; ++nt) {
        float s[4] = {};
#pragma unroll
        for (int kb = 0; kb < kLatentBlocks; ++kb) mma_bf16_16816(s, qf[hg][kb], kf[nt][kb][0], kf[nt][kb][1]);
        float r[4] = {};  // RoPE, unscaled
        mma_bf16_16816(r, qf[hg][kLatentBlocks], kf[nt][kLatentBlocks][0], kf[nt][kLatentBlocks][1]);
#pragma unroll
        for (int i = 0; i < 4; ++i) s[i] = s[i] * (1.0f / kLatentKeyScale<Codec>)+r[i];
        *reinterpret_cast<float2*>(&sh.partial[warp][16 * hg + g][8 * nt + 2 * c]) = make_float2(s[0], s[1]);
        *reinterpret_cast<float2*>(&sh.partial[warp][16 * hg + g + 8][8 * nt + 2 * c]) = make_float2(s[2], s[3]);
      }
    }
    __syncthreads();

    // Online softmax: warp w owns heads kSoftmaxHeads w + i, lane = token.
    {
      const bool ok = sh.valid[stage][lane] != 0;
#pragma unroll
      for (int i = 0; i < kSoftmaxHeads; ++i) {
        const int h = kSoftmaxHeads * warp + i;
        float score = 0.0f;
#pragma unroll
        for (int v = 0; v < kWarps; ++v) score += sh.partial[v][h][lane];
        score = ok ? score * score_scale : -INFINITY;
        const float tile_max = warp_group_max<kWarpSize>(score);
        const float new_max = fmaxf(row_max[i], tile_max);
        const bool none = new_max == -INFINITY;  // no valid key so far: nothing to weigh
        const float prob = none ? 0.0f : exp2f(score - new_max);
        float sum = prob;  // unrounded, so lse is exact to float32 (P x V takes the bf16 weights)
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
        const float alpha = none ? 1.0f : exp2f(row_max[i] - new_max);
        row_max[i] = new_max;
        row_sum[i] = row_sum[i] * alpha + sum;
        sh.probs[h][lane] = codec::encode_bf16(prob);
        if (lane == 0) sh.rescale[h] = alpha;
      }
    }
    __syncthreads();

    // 3. acc = acc * rescale + P x V over this warp's 64 latent dims.
    std::uint32_t vf[kTokenTiles][kLatentBlocks][2];
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt) {
#pragma unroll
      for (int kb = 0; kb < kLatentBlocks; ++kb) {
        vf[nt][kb][0] = transpose_8x8(kf[nt][kb][0]);
        vf[nt][kb][1] = transpose_8x8(kf[nt][kb][1]);
      }
    }
#pragma unroll
    for (int hg = 0; hg < kGroups; ++hg) {
      const float r0 = sh.rescale[16 * hg + g];
      const float r1 = sh.rescale[16 * hg + g + 8];
      if (__any_sync(0xFFFFFFFFu, r0 != 1.0f || r1 != 1.0f)) {  // once the maxima settle, mostly none
#pragma unroll
        for (int kb = 0; kb < kLatentBlocks; ++kb) {
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            acc[hg][kb][b][0] *= r0;
            acc[hg][kb][b][1] *= r0;
            acc[hg][kb][b][2] *= r1;
            acc[hg][kb][b][3] *= r1;
          }
        }
      }
#pragma unroll
      for (int ks = 0; ks < kTokenTiles / 2; ++ks) {
        std::uint32_t a[4];
        ldmatrix_x4(a, &sh.probs[16 * hg + (lane & 7) + 8 * ((lane >> 3) & 1)][16 * ks + 8 * (lane >> 4)]);
#pragma unroll
        for (int kb = 0; kb < kLatentBlocks; ++kb) {
#pragma unroll
          for (int b = 0; b < 2; ++b) mma_bf16_16816(acc[hg][kb][b], a, vf[2 * ks][kb][b], vf[2 * ks + 1][kb][b]);
        }
      }
    }
  }
  // No copy outlives the block: only tiles < tiles are issued, and each was waited for.

  // Epilogue: the softmax warps publish their sums; every warp normalizes its dims.
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < kSoftmaxHeads; ++i) {
      sh.row_sum[kSoftmaxHeads * warp + i] = row_sum[i];
      sh.row_max[kSoftmaxHeads * warp + i] = row_max[i];
    }
  }
  __syncthreads();
#pragma unroll
  for (int hg = 0; hg < kGroups; ++hg) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int h = 16 * hg + g + 8 * half;
      const std::int64_t head = head0 + h;
      if (head >= p.heads) continue;
      const HeadTotals totals = finish_head(sh.row_sum[h], sh.row_max[h]);
      const HeadStore<kPartial> store(p, gridDim.y, split, row, head);
      // Accumulator column 2c + i of n-tile (kb, b) is fragment pair 2 kb + b, half i, of this lane's
      // group: dims fragment_dim(2 kb, i) and the next one are pairs 2 kb and 2 kb + 1, half i.
      const float scale = totals.inv_sum * (1.0f / kLatentKeyScale<Codec>);
#pragma unroll
      for (int kb = 0; kb < kLatentBlocks; ++kb) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          static_assert(codec::fragment_dim(1, 0) == codec::fragment_dim(0, 0) + 1, "pairs 2kb, 2kb + 1 are adjacent");
          store.store_pair(16 * group + codec::fragment_dim(2 * kb, i), acc[hg][kb][0][2 * half + i] * scale,
                           acc[hg][kb][1][2 * half + i] * scale);
        }
      }
      if (warp == 0 && c == 0) *store.lse = totals.lse;
    }
  }
}

}  // namespace mlakv::cuda::split_dims
