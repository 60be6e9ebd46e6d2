// SPDX-License-Identifier: Apache-2.0
// The sparse MLA decode for up to 32 heads per thread block, with the key and
// value dims split over the block's warps so that a record is decoded straight
// into tensor-core fragments and never written back to shared memory as bf16.
//
// A block owns one query row, 16 or 32 heads (one or two mma M tiles) and a
// range of the row's entries, walked in tiles of 32. Records are gathered with
// cp.async into a ring of kStages tiles, so the copies of the next tiles are
// in flight while one is computed. Warp w owns the latent groups 4w..4w+3
// (64 dims) and the RoPE pairs 4w..4w+3: lane (token g = lane / 4, quad
// c = lane % 4) decodes group 4w + c of token g with the shared codec
// (codec::decode_lane_bf16_bits, the bf16 values the readers return), and the
// 16 values and RoPE pair it gets are its key fragments as they are: the dot
// product does not depend on the order of the dims, so the mma's k index runs
// over them in the order the lanes hold them and the query is loaded in that
// same order. Per tile:
//   1. each warp scores its dims: partial scores [heads x 32] per warp;
//   2. the partials are summed through shared memory (warp v's in order v),
//      and warp w runs the online softmax of heads 2Gw..2Gw+2G-1;
//   3. each warp adds P x V over its 64 latent dims; its value fragments are
//      its key fragments transposed in registers (movmatrix), so a record is
//      read from shared memory once.
#pragma once

#include <cmath>
#include <cstdint>

#include "codec/codecs.h"
#include "cuda/attention_result.cuh"
#include "cuda/mma.cuh"
#include "cuda/warp.cuh"
#include "kernels/attention_params.h"
#include "mlakv/attention.h"

namespace mlakv::cuda::split_dims {

inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kTileTokens = 32;
inline constexpr int kTokenTiles = kTileTokens / 8;             // mma N tiles of the scores
inline constexpr int kLatentBlocks = 4;                         // a warp's 64 latent dims: 4 mma k-blocks of 16
inline constexpr int kKeyBlocks = kLatentBlocks + 1;            // and one of RoPE (its 8 RoPE dims, the rest zero)
inline constexpr int kPartialPitch = kTileTokens + 8;           // floats: a half warp's float2 stores hit 32 banks
inline constexpr int kProbPitch = kTileTokens + 8;              // bf16: ldmatrix rows 80 bytes apart, no conflict
inline constexpr int kRecordWarpTokens = kTileTokens / kWarps;  // records a warp gathers per tile

/// Ring depth: about 67-110 KB of records, so one block per SM keeps enough
/// bytes in flight to cover the gather's DRAM latency.
template <int kRecordBytes>
inline constexpr int kStages = kRecordBytes <= 432   ? 6
                               : kRecordBytes <= 656 ? 4
                                                     : 3;

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
};

/// The record of entry `entry` of `row`, or null past the block's range or
/// for a slot that is negative or past capacity (never read).
__device__ __forceinline__ const std::uint8_t* load_record_address(const kernels::SparseDecodeParams& p,
                                                                   std::int64_t row, std::int64_t entry,
                                                                   std::int64_t end) {
  if (entry >= end) return nullptr;
  const std::int64_t slot = __ldg(p.indices + row * p.indices_stride_row + entry);
  return kernels::slot_in_range(p.cache, slot) ? kernels::record_address(p.cache, slot) : nullptr;
}

/// Issues the cp.async copies of one tile's records into a ring stage: warp w
/// gathers tokens 4w..4w+3, whose record addresses lanes base..base+3 hold
/// (found a tile ahead, so that no warp waits for an index before it can
/// copy). A token without a record gets a zero record, read from nowhere:
/// every format decodes it to zeros, so the decode needs no branch, and
/// `valid` keeps it out of the softmax.
template <int kRecordBytes>
__device__ __forceinline__ void issue_tile(const std::uint8_t* addresses, int base, const std::uint8_t* anywhere,
                                           std::uint8_t (*records)[kRecordBytes], int* valid, int warp, int lane) {
  constexpr int kChunks = kRecordBytes / 16;
  const int first = warp * kRecordWarpTokens;
#pragma unroll
  for (int t = 0; t < kRecordWarpTokens; ++t) {
    const auto* src = reinterpret_cast<const std::uint8_t*>(
        __shfl_sync(0xFFFFFFFFu, reinterpret_cast<std::uintptr_t>(addresses), base + t));
    const bool ok = src != nullptr;
    if (lane == t) valid[first + t] = ok ? 1 : 0;
    const auto* from = reinterpret_cast<const uint4*>(ok ? src : anywhere);
#pragma unroll
    for (int c = lane; c < kChunks; c += kWarpSize) copy_async16_or_zero(&records[first + t][16 * c], from + c, ok);
  }
  copy_async_commit();
}

/// Entries are walked in units of 64 (the split plan's unit), two tiles each.
inline constexpr int kTilesPerUnit = 64 / kTileTokens;

template <class Codec, int kGroups, bool kPartial>
__global__ void __launch_bounds__(kThreads)
    sparse_decode_split_dims_kernel(const kernels::SparseDecodeParams p, int units_per_split) {
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
  const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / blocks_per_row;
  const std::int64_t head0 = (static_cast<std::int64_t>(blockIdx.x) % blocks_per_row) * kHeads;
  const int split = static_cast<int>(blockIdx.y);
  const std::int64_t entries = kernels::row_entries(p, row);
  const std::int64_t begin = static_cast<std::int64_t>(split) * units_per_split * 64;
  const std::int64_t end = std::min<std::int64_t>(entries, begin + static_cast<std::int64_t>(units_per_split) * 64);
  const int tiles = end > begin ? static_cast<int>((end - begin + kTileTokens - 1) / kTileTokens) : 0;

  // The records of the ring's first tiles (lane 4 s + i: tile s, token 4 warp + i)
  // and of the tile the loop issues first, loaded together before anything waits.
  static_assert(kRecordWarpTokens * (kRing - 1) <= kWarpSize, "a lane per prologue slot");
  const int token_of_lane = kRecordWarpTokens * warp + (lane & (kRecordWarpTokens - 1));
  const std::uint8_t* prologue_records =
      lane < kRecordWarpTokens * (kRing - 1)
          ? load_record_address(
                p, row, begin + static_cast<std::int64_t>(lane / kRecordWarpTokens) * kTileTokens + token_of_lane, end)
          : nullptr;
  const std::uint8_t* next_records =
      load_record_address(p, row, begin + static_cast<std::int64_t>(kRing - 1) * kTileTokens + token_of_lane, end);

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
        const std::uint16_t* qh = p.q + row * p.q_stride_row + head * p.q_stride_head;
        lo = __ldg(reinterpret_cast<const uint4*>(qh + 16 * group));
        hi = __ldg(reinterpret_cast<const uint4*>(qh + 16 * group) + 1);
        rope = __ldg(reinterpret_cast<const std::uint32_t*>(qh + codec::kLatentDim + 2 * group));
      }
      const std::uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
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
    issue_tile<kRecordBytes>(prologue_records, kRecordWarpTokens * s, p.cache.data, sh.records[s], sh.valid[s], warp,
                             lane);
  }
  codec::DecodeParams params = p.decode;
  if (p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
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
    copy_async_wait<kRing - 2>();
    __syncthreads();  // tile t landed for every warp, and every warp is done with tile t - 1
    {
      const int next_stage = (t + kRing - 1) % kRing;
      issue_tile<kRecordBytes>(next_records, 0, p.cache.data, sh.records[next_stage], sh.valid[next_stage], warp, lane);
      next_records =
          load_record_address(p, row, begin + static_cast<std::int64_t>(t + kRing) * kTileTokens + token_of_lane, end);
    }

    // 1. Decode: key fragments of tokens 8 nt + g, this lane's group and RoPE pair.
    std::uint32_t kf[kTokenTiles][kKeyBlocks][2];
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt) {
      const int token = 8 * nt + g;
      alignas(16) std::uint16_t kv[codec::kLatentPerLane];
      alignas(4) std::uint16_t pe[codec::kRopePerLane];
      codec::decode_lane_bf16_bits<Codec>(group, sh.records[stage][token], params, kv, pe);
      const auto* kw = reinterpret_cast<const std::uint32_t*>(kv);
#pragma unroll
      for (int kb = 0; kb < kLatentBlocks; ++kb) {
        kf[nt][kb][0] = kw[2 * kb];
        kf[nt][kb][1] = kw[2 * kb + 1];
      }
      kf[nt][kLatentBlocks][0] = *reinterpret_cast<const std::uint32_t*>(pe);
      kf[nt][kLatentBlocks][1] = 0;
    }

    // 2. Partial scores over this warp's dims, summed across warps in shared memory.
#pragma unroll
    for (int hg = 0; hg < kGroups; ++hg) {
#pragma unroll
      for (int nt = 0; nt < kTokenTiles; ++nt) {
        float s[4] = {};
#pragma unroll
        for (int kb = 0; kb < kKeyBlocks; ++kb) mma_bf16_16816(s, qf[hg][kb], kf[nt][kb][0], kf[nt][kb][1]);
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
  copy_async_wait<0>();  // no copy may outlive the block (the ring's tail issues empty groups or past-end tiles)

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
      // Accumulator columns 2c, 2c + 1 of n-tile (kb, b) are dims 4 kb + 2 b, + 1 of this lane's group.
#pragma unroll
      for (int kb = 0; kb < kLatentBlocks; ++kb) {
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          store.store_pair(16 * group + 4 * kb + 2 * b, acc[hg][kb][b][2 * half] * totals.inv_sum,
                           acc[hg][kb][b][2 * half + 1] * totals.inv_sum);
        }
      }
      if (warp == 0 && c == 0) *store.lse = totals.lse;
    }
  }
}

}  // namespace mlakv::cuda::split_dims
