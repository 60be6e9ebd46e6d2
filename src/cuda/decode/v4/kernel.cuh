// SPDX-License-Identifier: Apache-2.0
// The DeepSeek V4 family's sparse decode: a block owns one query row and 16,
// 32 or 64 heads (one to four mma M tiles of 16) and walks its split of the
// row's tiles: the main cache's tiles of 64 entries, then the extra cache's.
// Each warp owns kDecodeTokens entries of every tile and decodes them into the
// bf16 key tile (a lane a 16-value slice of a key: record_lanes.cuh): up to 16
// heads (two blocks an SM) from their bytes loaded into registers, beyond (one
// block an SM) from its own rows of a staging buffer into which it copied
// (cp.async) their data and scale rows one tile ahead, so that the next tile's
// records are in flight while the block computes the current one. The block
// then computes the scores with bf16 mma.sync, updates the online softmax, and
// adds P x V with the same keys as values (all 512 values).
// The epilogue scales each head by its sink factor, or writes a float32
// partial to the workspace that merge_kernel combines (and scales).
#pragma once

#include <cstdint>

#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/v4/plan.h"
#include "cuda/decode/v4/record_lanes.cuh"
#include "cuda/ptx/mma.cuh"
#include "cuda/ptx/warp.cuh"
#include "params/attention_params.h"

namespace mlakv::cuda::v4 {

/// What the kernel takes: the validated parameters (q, out, lse, sink,
/// workspace) and the two key sets in the order they are walked.
struct DecodeArgs {
  params::SparseAttentionParams p;
  KeySet main;
  KeySet extra;    // extra.topk == 0: none
  int main_tiles;  // tiles_of(main.topk)
  int tiles;       // main_tiles + tiles_of(extra.topk)
  int tiles_per_split;
};

// Row pitches padded by 16 bytes: the 8 rows an ldmatrix phase reads start 4 banks apart.
inline constexpr int kKeyPitch = kDims + 8;
inline constexpr int kProbPitch = kTileTokens + 8;
inline constexpr int kScorePitch = kTileTokens + 4;
inline constexpr float kLog2e = 1.4426950408889634f;
// A staged token: its data row (up to 576 bytes), then its scale row (up to 32).
inline constexpr int kStageScales = 576;
inline constexpr int kStagePitch = kStageScales + 32;

/// kGroups groups of 16 heads; 8 warps a group (4 with four groups), each
/// scoring kScoreTokens keys over kDims / kDimSplit dims and accumulating
/// kWarpDims output dims of its group's heads, and decoding kDecodeTokens of
/// the tile's keys. Why these choices, and what the others measured:
/// docs/kernel_history.md ("The DeepSeek V4 family's decode").
template <int kGroups>
struct Shape {
  static constexpr int kHeads = 16 * kGroups;
  static constexpr int kWarpsPerGroup = kGroups == 4 ? 4 : 8;
  static constexpr int kWarps = kGroups * kWarpsPerGroup;
  static constexpr int kThreads = kWarps * kWarpSize;
  // Eight warps a group split the scores' dims in two (a query fragment then
  // serves 4 mma, not 2, and a warp's chain is half as long); four score 16
  // keys each over all dims (their fragment serves 4 mma already).
  static constexpr int kDimSplit = kGroups == 4 ? 1 : 2;
  static constexpr int kKeyWarps = kWarpsPerGroup / kDimSplit;  // and the keys among the rest
  static constexpr int kScoreTokens = kTileTokens / kKeyWarps;
  static constexpr int kWarpDims = kDims / kWarpsPerGroup;
  static constexpr int kDecodeTokens = kTileTokens / kWarps;
  static constexpr int kSoftmaxThreads = kThreads / kHeads;  // threads sharing a head's softmax
  static constexpr int kSoftmaxValues = kTileTokens / kSoftmaxThreads;
  // One group: two blocks an SM (95 KB of shared storage each) loading each
  // tile's records straight into registers (the second block's warps hide more
  // than one block's staging); more groups: one block (161-200 KB) staging the
  // next tile's records.
  static constexpr bool kStaged = kGroups > 1;
  static constexpr int kBlocksPerSm = kStaged ? 1 : 2;  // plan.h's blocks_per_sm
  static_assert(kDecodeTokens <= kWarpSize && kSoftmaxValues % 4 == 0 && kWarpDims % 16 == 0, "shape does not tile");
};

template <int kGroups>
struct Storage {
  static constexpr int kHeads = 16 * kGroups;
  alignas(16) std::uint16_t q[kHeads][kKeyPitch];
  alignas(16) std::uint16_t keys[kTileTokens][kKeyPitch];
  alignas(16) std::uint8_t staging[Shape<kGroups>::kStaged ? kTileTokens : 1][kStagePitch];  // the next tile's records
  alignas(16) float scores[Shape<kGroups>::kDimSplit][kHeads][kScorePitch];  // partial scores of the dim splits
  alignas(16) std::uint16_t probs[kHeads][kProbPitch];
  float row_max[kHeads];  // log2 domain
  float row_sum[kHeads];
  float rescale[kHeads];
  int valid[kTileTokens];
};

/// Where a tile's entries are: its key set's [begin, end) of the row.
struct TileEntries {
  bool extra;
  std::int64_t begin;
  std::int64_t end;
};

__device__ __forceinline__ TileEntries tile_entries(const DecodeArgs& a, int tile, std::int64_t main_entries,
                                                    std::int64_t extra_entries) {
  const bool extra = tile >= a.main_tiles;
  return {extra, static_cast<std::int64_t>(kTileTokens) * (extra ? tile - a.main_tiles : tile),
          extra ? extra_entries : main_entries};
}

/// The first tile from `tile` on (before `tile_end`) that holds an entry of the row, or tile_end.
__device__ __forceinline__ int live_tile(const DecodeArgs& a, int tile, int tile_end, std::int64_t main_entries,
                                         std::int64_t extra_entries) {
  if (tile < a.main_tiles && static_cast<std::int64_t>(kTileTokens) * tile >= main_entries) tile = a.main_tiles;
  if (tile >= a.main_tiles && static_cast<std::int64_t>(kTileTokens) * (tile - a.main_tiles) >= extra_entries) {
    tile = tile_end;
  }
  return min(tile, tile_end);
}

/// The slot of entry `first + lane` of the tile for lanes below kTokens (-1 past the row's end or the tiles).
template <int kTokens>
__device__ __forceinline__ std::int64_t warp_slot(const DecodeArgs& a, std::int64_t row, int tile, int tile_end,
                                                  const TileEntries& e, int first, int lane) {
  const std::int64_t entry = e.begin + first + lane;
  if (tile >= tile_end || lane >= kTokens || entry >= e.end) return -1;
  return __ldg((e.extra ? a.extra.indices : a.main.indices) +
               row * (e.extra ? a.extra.indices_stride_row_elems : a.main.indices_stride_row_elems) + entry);
}

/// Copies (cp.async) the data and scale rows of the warp's valid tokens (lane
/// t < kTokens holds token t's slot) into staging rows [first, first +
/// kTokens); entries negative or past the cache's capacity are not read.
/// Returns the valid tokens' mask.
template <int kTokens>
__device__ __forceinline__ unsigned stage_warp_records(const KeySet& set, std::int64_t slot,
                                                       std::uint8_t (*staging)[kStagePitch], int first, int lane) {
  const unsigned valid = __ballot_sync(0xFFFFFFFFu, lane < kTokens && params::slot_in_range(set.cache, slot));
  const int data_chunks = data_row_bytes(set.coding) / 16;
  const int scale_bytes = scale_row_bytes(set.coding);
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const std::int64_t s = __shfl_sync(0xFFFFFFFFu, slot, t);
    if ((valid >> t & 1u) == 0) continue;
    const params::PagePosition at = params::page_position(set.cache, s);
    const std::uint8_t* data = params::field_address(set.cache, at, format::kDataRegion, 0);
    std::uint8_t* row = staging[first + t];
    for (int c = lane; c < data_chunks; c += kWarpSize) copy_async16(row + 16 * c, data + 16 * c);
    if (lane == kWarpSize - 1) {
      const std::uint8_t* scales = params::field_address(set.cache, at, set.scale_region, set.scale_offset);
      if (scale_bytes == 8) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(shared_address(row + kStageScales)),
                     "l"(scales));
      } else {
        for (int c = 0; c < scale_bytes / 16; ++c) copy_async16(row + kStageScales + 16 * c, scales + 16 * c);
      }
    }
  }
  copy_async_commit();
  return valid;
}

/// The warp's staged tokens decoded into key rows [first, first + kTokens)
/// (invalid ones as zeros), and valid[] for them.
template <int kTokens>
__device__ __forceinline__ void decode_warp_keys(Coding coding, unsigned valid,
                                                 const std::uint8_t (*staging)[kStagePitch],
                                                 std::uint16_t (*keys)[kKeyPitch], int* valid_out, int first,
                                                 int lane) {
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    std::uint32_t pairs[8] = {};
    if ((valid >> t & 1u) != 0) {
      const std::uint8_t* row = staging[first + t];
      decode_lane(coding, read_lane_bytes(coding, row, row + kStageScales, lane), lane, pairs);
    }
    uint4* dst = reinterpret_cast<uint4*>(&keys[first + t][kLaneValues * lane]);
    dst[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    dst[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
  }
  if (lane < kTokens) valid_out[first + lane] = (valid >> lane & 1u) != 0 ? 1 : 0;
}

/// The warp's keys of a tile (lane t < kTokens holds token t's slot) loaded
/// straight into registers, kBatch keys at a time, and decoded into key rows
/// [first, first + kTokens) (invalid ones as zeros, never read), and valid[] for them.
template <int kTokens>
__device__ __forceinline__ void load_warp_keys(const KeySet& set, std::int64_t slot, std::uint16_t (*keys)[kKeyPitch],
                                               int* valid_out, int first, int lane) {
  constexpr int kBatch = kTokens < 4 ? kTokens : 4;  // the loads in flight at once, within 128 registers
  const unsigned valid = __ballot_sync(0xFFFFFFFFu, lane < kTokens && params::slot_in_range(set.cache, slot));
#pragma unroll
  for (int t0 = 0; t0 < kTokens; t0 += kBatch) {
    LaneBytes bytes[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const std::int64_t s = __shfl_sync(0xFFFFFFFFu, slot, t0 + k);
      if ((valid >> (t0 + k) & 1u) != 0) {
        const params::PagePosition at = params::page_position(set.cache, s);
        bytes[k] = read_lane_bytes(set.coding, params::field_address(set.cache, at, format::kDataRegion, 0),
                                   params::field_address(set.cache, at, set.scale_region, set.scale_offset), lane);
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      std::uint32_t pairs[8] = {};
      if ((valid >> (t0 + k) & 1u) != 0) decode_lane(set.coding, bytes[k], lane, pairs);
      uint4* dst = reinterpret_cast<uint4*>(&keys[first + t0 + k][kLaneValues * lane]);
      dst[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
      dst[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
    }
  }
  if (lane < kTokens) valid_out[first + lane] = (valid >> lane & 1u) != 0 ? 1 : 0;
}

/// The sink factor of `head` for a head total `lse` (params::sink_factor, read through the cache).
__device__ __forceinline__ float head_sink_factor(const params::SparseAttentionParams& p, std::int64_t head,
                                                  float lse) {
  if (p.attn_sink == nullptr) return 1.0f;
  if (lse == -INFINITY) return 0.0f;
  return 1.0f / (1.0f + expf(__ldg(p.attn_sink + head * p.attn_sink_stride_elems) - lse));
}

template <int kGroups, bool kPartial>
__global__ void __launch_bounds__(Shape<kGroups>::kThreads, Shape<kGroups>::kBlocksPerSm)
    decode_kernel(const __grid_constant__ DecodeArgs a) {
  using S = Shape<kGroups>;
  const params::SparseAttentionParams& p = a.p;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<Storage<kGroups>*>(smem_raw);
  if constexpr (kPartial) asm volatile("griddepcontrol.launch_dependents;");  // the merge may start its blocks
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int head_group = warp / S::kWarpsPerGroup;  // this warp's 16 heads
  const int part = warp % S::kWarpsPerGroup;        // and its share of the keys / output dims
  const std::int64_t blocks_per_row = (p.heads + S::kHeads - 1) / S::kHeads;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / blocks_per_row;
  const std::int64_t head0 = (static_cast<std::int64_t>(blockIdx.x) % blocks_per_row) * S::kHeads;
  const int split = static_cast<int>(blockIdx.y);
  const int tile_begin = split * a.tiles_per_split;
  const int tile_end = min(a.tiles, tile_begin + a.tiles_per_split);
  const std::int64_t main_entries = params::clamped_entries(a.main.topk_len, a.main.topk, row);
  const std::int64_t extra_entries = params::clamped_entries(a.extra.topk_len, a.extra.topk, row);

  if (tid < S::kHeads) {
    sh.row_max[tid] = -INFINITY;
    sh.row_sum[tid] = 0.0f;
  }
  const float score_scale = p.sm_scale * kLog2e;
  const int group = lane / 4;       // mma accumulator rows group and group + 8
  const int pair = 2 * (lane % 4);  // and columns pair, pair + 1 of each 8-wide tile
  const int q_row = 16 * head_group + (lane % 8) + 8 * ((lane / 8) % 2);  // ldmatrix row of an A fragment
  constexpr int kScoreTiles = S::kScoreTokens / 8;
  constexpr int kDimTiles = S::kWarpDims / 8;
  float acc[kDimTiles][4] = {};
  __syncthreads();

  // The pipeline: the slots of `tile` and `next` are loaded one tile ahead;
  // staged kernels also have `tile`'s records in flight into the staging rows.
  const int first = warp * S::kDecodeTokens;
  int tile = live_tile(a, tile_begin, tile_end, main_entries, extra_entries);
  TileEntries entries = tile_entries(a, tile, main_entries, extra_entries);
  std::int64_t slot = warp_slot<S::kDecodeTokens>(a, row, tile, tile_end, entries, first, lane);
  // The block's query heads (zeros past H), copied (cp.async) while the first tile's slots and records load.
  constexpr int kQueryChunks = kDims / 8;
#pragma unroll 4
  for (int c = tid; c < S::kHeads * kQueryChunks; c += S::kThreads) {
    const int h = c / kQueryChunks;
    const int j = c % kQueryChunks;
    const bool live = head0 + h < p.heads;
    const std::uint16_t* src = live ? p.q + row * p.q_stride_row_elems + (head0 + h) * p.q_stride_head_elems : p.q;
    copy_async16_or_zero(&sh.q[h][8 * j], reinterpret_cast<const uint4*>(src) + (live ? j : 0), live);
  }
  copy_async_commit();
  unsigned staged = 0;
  if constexpr (S::kStaged) {
    staged = entries.extra ? stage_warp_records<S::kDecodeTokens>(a.extra, slot, sh.staging, first, lane)
                           : stage_warp_records<S::kDecodeTokens>(a.main, slot, sh.staging, first, lane);
  }
  int next = live_tile(a, tile + 1, tile_end, main_entries, extra_entries);
  TileEntries next_entries = tile_entries(a, next, main_entries, extra_entries);
  std::int64_t next_slot = warp_slot<S::kDecodeTokens>(a, row, next, tile_end, next_entries, first, lane);

  while (tile < tile_end) {
    if constexpr (S::kStaged) {
      // This warp's staged tokens into the key tile, then the next tile's copies into the freed staging rows.
      copy_async_wait_all();
      __syncwarp();
      decode_warp_keys<S::kDecodeTokens>(entries.extra ? a.extra.coding : a.main.coding, staged, sh.staging, sh.keys,
                                         sh.valid, first, lane);
      __syncwarp();
      if (next < tile_end) {
        staged = next_entries.extra ? stage_warp_records<S::kDecodeTokens>(a.extra, next_slot, sh.staging, first, lane)
                                    : stage_warp_records<S::kDecodeTokens>(a.main, next_slot, sh.staging, first, lane);
      }
    } else if (entries.extra) {
      load_warp_keys<S::kDecodeTokens>(a.extra, slot, sh.keys, sh.valid, first, lane);
    } else {
      load_warp_keys<S::kDecodeTokens>(a.main, slot, sh.keys, sh.valid, first, lane);
    }
    tile = next;
    entries = next_entries;
    slot = next_slot;
    next = live_tile(a, tile + 1, tile_end, main_entries, extra_entries);
    next_entries = tile_entries(a, next, main_entries, extra_entries);
    next_slot = warp_slot<S::kDecodeTokens>(a, row, next, tile_end, next_entries, first, lane);
    if constexpr (!S::kStaged) copy_async_wait_all();  // the query (the first tile)
    __syncthreads();

    // Partial scores of this warp's 16 heads x its kScoreTokens keys over its
    // kDims / kDimSplit dims (the softmax adds the kDimSplit partials): each
    // query fragment loaded serves kScoreTiles mma, and a warp's chain is
    // kDims / kDimSplit / 16 steps long, in kChains independent accumulator sets.
    {
      constexpr int kChains = kScoreTiles >= 4 ? 1 : 2;
      constexpr int kSteps = kDims / S::kDimSplit / 16;
      const int key0 = (part % S::kKeyWarps) * S::kScoreTokens;
      const int dim_split = part / S::kKeyWarps;
      const int k_first = dim_split * (kDims / S::kDimSplit);
      float s[kChains][kScoreTiles][4] = {};
#pragma unroll 4
      for (int step = 0; step < kSteps; ++step) {
        const int k = k_first + 16 * step;
        float(&chain)[kScoreTiles][4] = s[step % kChains];
        std::uint32_t qa[4];
        ldmatrix_x4(qa, &sh.q[q_row][k + 8 * (lane / 16)]);
#pragma unroll
        for (int np = 0; np < kScoreTiles / 2; ++np) {
          std::uint32_t b[4];
          ldmatrix_x4(b, &sh.keys[key0 + 16 * np + 8 * (lane / 16) + lane % 8][k + 8 * ((lane / 8) % 2)]);
          mma_bf16_16816(chain[2 * np], qa, b[0], b[1]);
          mma_bf16_16816(chain[2 * np + 1], qa, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int col = key0 + 8 * nt + pair + j;
          float low = s[0][nt][j];
          float high = s[0][nt][2 + j];
#pragma unroll
          for (int c = 1; c < kChains; ++c) {
            low += s[c][nt][j];
            high += s[c][nt][2 + j];
          }
          sh.scores[dim_split][16 * head_group + group][col] = low;
          sh.scores[dim_split][16 * head_group + group + 8][col] = high;
        }
      }
    }
    __syncthreads();

    // Online softmax: kSoftmaxThreads threads a head, kSoftmaxValues keys each.
    {
      constexpr int kT = S::kSoftmaxThreads;
      constexpr int kV = S::kSoftmaxValues;
      const int h = tid / kT;
      const int slice = tid % kT;
      float v[kV];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        const int col = slice * kV + j;
        float dot = sh.scores[0][h][col];
#pragma unroll
        for (int d = 1; d < S::kDimSplit; ++d) dot += sh.scores[d][h][col];
        v[j] = sh.valid[col] != 0 ? dot * score_scale : -INFINITY;
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
      __syncwarp();  // every slice has read row_max before slice 0 rewrites it
      if (slice == 0) {
        const float alpha = none ? 1.0f : exp2f(old_max - new_max);
        sh.row_max[h] = new_max;
        sh.row_sum[h] = sh.row_sum[h] * alpha + sum;
        sh.rescale[h] = alpha;
      }
    }
    __syncthreads();

    // acc = acc * rescale + P x V over this warp's output dims (the values are the keys).
    const float r0 = sh.rescale[16 * head_group + group];
    const float r1 = sh.rescale[16 * head_group + group + 8];
#pragma unroll
    for (int nt = 0; nt < kDimTiles; ++nt) {
      acc[nt][0] *= r0;
      acc[nt][1] *= r0;
      acc[nt][2] *= r1;
      acc[nt][3] *= r1;
    }
    const int dim0 = part * S::kWarpDims;
#pragma unroll
    for (int k0 = 0; k0 < kTileTokens; k0 += 16) {
      std::uint32_t pa[4];
      ldmatrix_x4(pa, &sh.probs[q_row][k0 + 8 * (lane / 16)]);
#pragma unroll
      for (int np = 0; np < kDimTiles / 2; ++np) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, &sh.keys[k0 + 8 * ((lane / 8) % 2) + lane % 8][dim0 + 16 * np + 8 * (lane / 16)]);
        mma_bf16_16816(acc[2 * np], pa, b[0], b[1]);
        mma_bf16_16816(acc[2 * np + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // the next tile's keys overwrite these
  }

  copy_async_wait_all();  // no copy outlives the block (one without a tile issued the query's)

  // Epilogue: rows `group` and `group + 8` of this warp's heads and dims.
  const int dim0 = part * S::kWarpDims;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int h = 16 * head_group + group + 8 * half;
    const std::int64_t head = head0 + h;
    if (head >= p.heads) continue;
    const HeadTotals totals = finish_head(sh.row_sum[h], sh.row_max[h]);
    if constexpr (kPartial) {
      const std::int64_t index = (static_cast<std::int64_t>(split) * p.rows + row) * p.heads + head;
      auto* out = static_cast<float*>(p.workspace) + index * kDims + dim0;
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
      const float scale = totals.inv_sum * head_sink_factor(p, head, totals.lse);
      std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems + dim0;
#pragma unroll
      for (int nt = 0; nt < kDimTiles; ++nt) {
        *reinterpret_cast<std::uint32_t*>(out + 8 * nt + pair) =
            pack_bf16x2(acc[nt][2 * half] * scale, acc[nt][2 * half + 1] * scale);
      }
      if (part == 0 && lane % 4 == 0) p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = totals.lse;
    }
  }
}

/// Merges the splits of one (row, head) by their lse and applies the head's
/// sink; 4 output dims a thread. A programmatic dependent of the decode: its
/// blocks start while the decode's last blocks run and wait at
/// griddepcontrol.wait until the partials are complete and visible.
inline constexpr int kMergeThreads = kDims / 4;
inline constexpr int kMergeBatch = 16;  // partial rows loaded at once

__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const params::SparseAttentionParams p, int splits) {
  static_assert(kMaxSplits <= kMergeThreads, "a thread a split loads its lse");
  __shared__ float weight[kMaxSplits];
  __shared__ float warp_max[kMergeThreads / kWarpSize];
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / p.heads;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) % p.heads;
  const auto* partial_out = static_cast<const float*>(p.workspace);
  const auto* partial_lse = reinterpret_cast<const float*>(static_cast<const std::uint8_t*>(p.workspace) +
                                                           lse_offset_bytes(splits, p.rows, p.heads));
  const auto index = [&](int s) { return (static_cast<std::int64_t>(s) * p.rows + row) * p.heads + head; };
  const int t = static_cast<int>(threadIdx.x);
  const int d = 4 * t;
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the decode grid is complete
  const float lse = t < splits ? partial_lse[index(t)] : -INFINITY;
  float m = warp_group_max<kWarpSize>(lse);
  if (t % kWarpSize == 0) warp_max[t / kWarpSize] = m;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kMergeThreads / kWarpSize; ++w) m = fmaxf(m, warp_max[w]);
  if (t < splits) weight[t] = m == -INFINITY ? 0.0f : expf(lse - m);
  __syncthreads();
  MergedDims merged;
  for (int s0 = 0; s0 < splits; s0 += kMergeBatch) {
    float4 batch[kMergeBatch];
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      if (s0 + j < splits) batch[j] = *reinterpret_cast<const float4*>(partial_out + index(s0 + j) * kDims + d);
    }
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      if (s0 + j < splits) merged.add(weight[s0 + j], batch[j]);
    }
  }
  const float total_lse = merged.total > 0.0f ? m + logf(merged.total) : -INFINITY;
  const float scale = merged.total > 0.0f ? head_sink_factor(p, head, total_lse) / merged.total : 0.0f;
  std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems + d;
  reinterpret_cast<std::uint32_t*>(out)[0] = pack_bf16x2(merged.acc.x * scale, merged.acc.y * scale);
  reinterpret_cast<std::uint32_t*>(out)[1] = pack_bf16x2(merged.acc.z * scale, merged.acc.w * scale);
  if (d == 0) p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = total_lse;
}

}  // namespace mlakv::cuda::v4
