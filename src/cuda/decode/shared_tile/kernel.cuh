// SPDX-License-Identifier: Apache-2.0
// The shared-tile sparse decode kernel (shape.h). Per tile of 64 entries its
// warps copy and decode the records into a bf16 key tile in shared memory
// with the shared codecs (the same bf16 values the readers return), compute
// the scores with tensor cores (mma.sync), update the online softmax and add
// P x V.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/plan.h"
#include "cuda/decode/shared_tile/shape.h"
#include "cuda/ptx/mma.cuh"
#include "cuda/ptx/warp.cuh"
#include "dispatch/visit_codec.h"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda::shared_tile {

inline constexpr float kLog2e = 1.4426950408889634f;

// A tile's keys in two steps:
//  1. issue: the warp's records are copied (cp.async) into the very key rows
//     they decode to; entries past the row's end, negative or past capacity
//     are not read at all (the returned mask says which are valid);
//  2. decode: once the copies landed, each lane decodes its part of a row into
//     registers and, after the whole warp has read the record, overwrites the
//     row with bf16 values (invalid rows become zeros).
template <class Codec, int kTokens>
__device__ unsigned issue_tile_records(const params::SparseDecodeParams& p, std::uint16_t (*keys)[kKeyPitch],
                                       std::int64_t slot, int warp, int lane) {
  constexpr int kChunks = Codec::Spec::kRecordBytes / 16;
  static_assert(Codec::Spec::kRecordBytes <= kKeyPitch * 2, "a record is staged in its key row");
  const unsigned valid = __ballot_sync(0xFFFFFFFFu, lane < kTokens && params::slot_in_range(p.cache, slot));
  const int first = warp * kTokens;
#pragma unroll 1
  for (int t = 0; t < kTokens; ++t) {
    const std::int64_t s = __shfl_sync(0xFFFFFFFFu, slot, t);
    if ((valid >> t & 1u) == 0) continue;
    const auto* src = reinterpret_cast<const uint4*>(params::record_address(p.cache, s));
    for (int c = lane; c < kChunks; c += kWarpSize) copy_async16(&keys[first + t][8 * c], src + c);
  }
  copy_async_commit();
  return valid;
}

template <class Codec, int kTokens>
__device__ void decode_tile_records(const codec::DecodeParams& params, std::uint16_t (*keys)[kKeyPitch], int* valid_out,
                                    unsigned valid, int warp, int lane) {
  const int first = warp * kTokens;
  // Independent decodes side by side: one warp's decode is a long dependent chain.
  constexpr int kInterleave = kTokens < 4 ? kTokens : 4;
#pragma unroll 1
  for (int t0 = 0; t0 < kTokens; t0 += kInterleave) {
    alignas(16) std::uint16_t kv[kInterleave][codec::kLatentPerLane] = {};
    alignas(4) std::uint16_t pe[kInterleave][codec::kRopePerLane] = {};
#pragma unroll
    for (int k = 0; k < kInterleave; ++k) {
      if (valid >> (t0 + k) & 1u) {
        codec::decode_lane_bf16_bits<Codec>(lane, reinterpret_cast<const std::uint8_t*>(keys[first + t0 + k]), params,
                                            kv[k], pe[k]);
      }
    }
    __syncwarp();  // every lane has read the records before any overwrites them
#pragma unroll
    for (int k = 0; k < kInterleave; ++k) {
      std::uint16_t* key = keys[first + t0 + k];
      reinterpret_cast<uint4*>(key + lane * codec::kLatentPerLane)[0] = reinterpret_cast<const uint4*>(kv[k])[0];
      reinterpret_cast<uint4*>(key + lane * codec::kLatentPerLane)[1] = reinterpret_cast<const uint4*>(kv[k])[1];
      *reinterpret_cast<std::uint32_t*>(key + codec::kLatentDim + lane * codec::kRopePerLane) =
          *reinterpret_cast<const std::uint32_t*>(pe[k]);
    }
  }
  if (lane < kTokens) valid_out[first + lane] = (valid >> lane & 1u) != 0 ? 1 : 0;
}

// The slot lane l (< kTokens) of `warp` issues for the tile at `tile`, or -1.
template <int kTokens>
__device__ __forceinline__ std::int64_t tile_slot(const params::SparseDecodeParams& p, std::int64_t row,
                                                  std::int64_t tile, std::int64_t row_end, int warp, int lane) {
  const std::int64_t entry = tile + warp * kTokens + lane % kTokens;
  if (lane >= kTokens || entry >= row_end) return -1;
  return __ldg(p.indices + row * p.indices_stride_row_elems + entry);
}

template <class Codec, int kGroups, bool kPartial>
__global__ void __launch_bounds__(BlockShape<kGroups>::kThreads)
    sparse_mla_decode_shared_tile_kernel(const params::SparseDecodeParams p, int tiles_per_split) {
  using Shape = BlockShape<kGroups>;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<SharedStorage<kGroups>*>(smem_raw);
  if constexpr (kPartial) asm volatile("griddepcontrol.launch_dependents;");  // the merge may start its blocks
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int head_group = warp / Shape::kWarpsPerGroup;  // this warp's 16 heads
  const int part = warp % Shape::kWarpsPerGroup;        // and its share of the keys / output dims
  static_assert(kTileTokens == kSplitUnitTokens, "a tile is the split plan's unit");
  const BlockRange block = block_range<Shape::kHeads>(p, tiles_per_split);
  const std::int64_t row = block.row;
  const std::int64_t head0 = block.head0;
  const int split = block.split;
  const std::int64_t begin = block.begin;
  const std::int64_t end = block.end;

  // The first tile's slots are loaded before the query, so the two round trips overlap.
  std::int64_t next_slot = tile_slot<Shape::kDecodeTokens>(p, row, begin, end, warp, lane);
  // The block's query heads (zeros past H), 16 bytes at a time.
  constexpr int kQueryChunks = kKeyDim / 8;
#pragma unroll 8  // the loads of several chunks in flight at once
  for (int c = tid; c < Shape::kHeads * kQueryChunks; c += Shape::kThreads) {
    const int h = c / kQueryChunks;
    const int j = c % kQueryChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (head0 + h < p.heads) {
      v = __ldg(reinterpret_cast<const uint4*>(p.q + row * p.q_stride_row_elems + (head0 + h) * p.q_stride_head_elems) +
                j);
    }
    reinterpret_cast<uint4*>(sh.q[h])[j] = v;
  }
  if (tid < Shape::kHeads) {
    sh.row_max[tid] = -INFINITY;
    sh.row_sum[tid] = 0.0f;
  }
  codec::DecodeParams params = p.decode;
  if (p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
  const float score_scale = p.sm_scale * kLog2e;

  const int group = lane / 4;       // mma accumulator rows group and group + 8
  const int pair = 2 * (lane % 4);  // and columns pair, pair + 1 of each 8-wide tile
  const int q_row = 16 * head_group + (lane % 8) + 8 * ((lane / 8) % 2);  // ldmatrix row of an A fragment
  constexpr int kScoreTiles = Shape::kScoreTokens / 8;
  constexpr int kDimTiles = Shape::kDims / 8;
  float acc[kDimTiles][4] = {};
  __syncthreads();

  // A tile's slots are loaded while the previous tile is computed (the
  // tile's records are not prefetched: docs/kernel_history.md).
  for (std::int64_t tile = begin; tile < end; tile += kTileTokens) {
    const unsigned valid = issue_tile_records<Codec, Shape::kDecodeTokens>(p, sh.keys, next_slot, warp, lane);
    next_slot = tile_slot<Shape::kDecodeTokens>(p, row, tile + kTileTokens, end, warp, lane);
    copy_async_wait_all();
    __syncwarp();
    auto keys = sh.keys;
    decode_tile_records<Codec, Shape::kDecodeTokens>(params, keys, sh.valid, valid, warp, lane);
    __syncthreads();

    // Scores of this warp's 16 heads x its keys.
    const int key0 = part * Shape::kScoreTokens;
    float s[kScoreTiles][4] = {};
#pragma unroll 4
    for (int k0 = 0; k0 < kKeyDim; k0 += 16) {
      std::uint32_t a[4];
      ldmatrix_x4(a, &sh.q[q_row][k0 + 8 * (lane / 16)]);
      if constexpr (kScoreTiles == 1) {
        std::uint32_t b[2];
        ldmatrix_x2(b, &keys[key0 + lane % 8][k0 + 8 * ((lane / 8) % 2)]);
        mma_bf16_16816(s[0], a, b[0], b[1]);
      } else {
#pragma unroll
        for (int np = 0; np < kScoreTiles / 2; ++np) {
          std::uint32_t b[4];
          ldmatrix_x4(b, &keys[key0 + 16 * np + 8 * (lane / 16) + lane % 8][k0 + 8 * ((lane / 8) % 2)]);
          mma_bf16_16816(s[2 * np], a, b[0], b[1]);
          mma_bf16_16816(s[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = key0 + 8 * nt + pair + j;
        const bool ok = sh.valid[col] != 0;
        sh.scores[16 * head_group + group][col] = ok ? s[nt][j] * score_scale : -INFINITY;
        sh.scores[16 * head_group + group + 8][col] = ok ? s[nt][2 + j] * score_scale : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax: kSoftmaxThreads threads per head, kSoftmaxValues keys each.
    {
      constexpr int kT = Shape::kSoftmaxThreads;
      constexpr int kV = Shape::kSoftmaxValues;
      const int h = tid / kT;
      const int slice = tid % kT;
      float v[kV];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        v[j] = sh.scores[h][slice * kV + j];
        tile_max = fmaxf(tile_max, v[j]);
      }
      tile_max = warp_group_max<kT>(tile_max);
      const float old_max = sh.row_max[h];
      const float new_max = fmaxf(old_max, tile_max);
      const bool none = new_max == -INFINITY;  // no valid key so far: nothing to weigh
      float sum = 0.0f;
      std::uint32_t packed[kV / 2];
#pragma unroll
      for (int j = 0; j < kV; j += 2) {
        const float p0 = none ? 0.0f : exp2f(v[j] - new_max);
        const float p1 = none ? 0.0f : exp2f(v[j + 1] - new_max);
        packed[j / 2] = pack_bf16x2(p0, p1);
        sum += p0 + p1;  // unrounded, so lse is exact to float32 (P x V takes the bf16 weights)
      }
#pragma unroll
      for (int w = 0; w < kV / 2; w += 2) {
        *reinterpret_cast<uint2*>(&sh.probs[h][slice * kV + 2 * w]) = make_uint2(packed[w], packed[w + 1]);
      }
#pragma unroll
      for (int offset = kT / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
      __syncwarp();  // every slice has read row_max before slice 0 rewrites it (shuffles order no memory)
      if (slice == 0) {
        const float alpha = none ? 1.0f : exp2f(old_max - new_max);
        sh.row_max[h] = new_max;
        sh.row_sum[h] = sh.row_sum[h] * alpha + sum;
        sh.rescale[h] = alpha;
      }
    }
    __syncthreads();

    // acc = acc * rescale + P x V over this warp's output dims.
    const float r0 = sh.rescale[16 * head_group + group];
    const float r1 = sh.rescale[16 * head_group + group + 8];
#pragma unroll
    for (int nt = 0; nt < kDimTiles; ++nt) {
      acc[nt][0] *= r0;
      acc[nt][1] *= r0;
      acc[nt][2] *= r1;
      acc[nt][3] *= r1;
    }
    const int dim0 = part * Shape::kDims;
#pragma unroll
    for (int k0 = 0; k0 < kTileTokens; k0 += 16) {
      std::uint32_t a[4];
      ldmatrix_x4(a, &sh.probs[q_row][k0 + 8 * (lane / 16)]);
#pragma unroll
      for (int np = 0; np < kDimTiles / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, &keys[k0 + 8 * ((lane / 8) % 2) + lane % 8][dim0 + 16 * np + 8 * (lane / 16)]);
        mma_bf16_16816(acc[2 * np], a, b[0], b[1]);
        mma_bf16_16816(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the next tile's records land in the key rows
  }

  // Epilogue: normalize and store rows `group` and `group + 8` of this warp's heads and dims.
  const int dim0 = part * Shape::kDims;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int h = 16 * head_group + group + 8 * half;
    const std::int64_t head = head0 + h;
    if (head >= p.heads) continue;
    const HeadTotals totals = finish_head(sh.row_sum[h], sh.row_max[h]);
    // Stored here rather than through HeadStore, which made this kernel slower (docs/kernel_history.md).
    if constexpr (kPartial) {
      const std::int64_t index = (static_cast<std::int64_t>(split) * p.rows + row) * p.heads + head;
      auto* out = static_cast<float*>(p.workspace) + index * kValueDim + dim0;
#pragma unroll
      for (int nt = 0; nt < kDimTiles; ++nt) {
        *reinterpret_cast<float2*>(out + 8 * nt + pair) =
            make_float2(acc[nt][2 * half] * totals.inv_sum, acc[nt][2 * half + 1] * totals.inv_sum);
      }
      if (part == 0 && lane % 4 == 0) {
        reinterpret_cast<float*>(static_cast<std::uint8_t*>(p.workspace) +
                                 lse_offset_bytes(gridDim.y, p.rows, p.heads))[index] = totals.lse;
      }
    } else {
      std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems + dim0;
#pragma unroll
      for (int nt = 0; nt < kDimTiles; ++nt) {
        *reinterpret_cast<std::uint32_t*>(out + 8 * nt + pair) =
            pack_bf16x2(acc[nt][2 * half] * totals.inv_sum, acc[nt][2 * half + 1] * totals.inv_sum);
      }
      if (part == 0 && lane % 4 == 0) p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = totals.lse;
    }
  }
}

}  // namespace mlakv::cuda::shared_tile
