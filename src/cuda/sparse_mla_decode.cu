// SPDX-License-Identifier: Apache-2.0
// CUDA sparse MLA decode, the shared-tile kernel and the dispatch between it
// and the split-dims kernel (sparse_mla_decode_split_dims.cuh). A shared-tile
// block owns one query row and 16, 32 or 64 heads (one to four mma M tiles)
// and walks that row's selected entries in tiles of 64. Per tile its warps
// decode the 64 records into a bf16 key tile in shared memory with the shared
// codecs (the same bf16 values the readers return), compute the scores with
// tensor cores, update the online softmax, and add P x V. Long rows are split
// over several blocks when the caller gives a workspace; a second kernel
// merges the splits by their lse.
#include <algorithm>
#include <cmath>

#include "cuda/attention_result.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/decode/v4/launch.h"
#include "cuda/key_fragment.cuh"
#include "cuda/launch_decode_kernel.h"
#include "cuda/mma.cuh"
#include "cuda/sparse_mla_decode_split_dims.cuh"
#include "cuda/sparse_mla_decode_warpgroups.h"
#include "cuda/sparse_mla_decode_wide_tiles.h"
#include "cuda/warp.cuh"
#include "dispatch/visit_codec.h"
#include "mlakv/vocabulary.h"
#include "params/merge.h"

namespace mlakv::cuda {
namespace {

constexpr int kTileTokens = 64;
constexpr int kKeyDim = kQueryDim;
// Row pitches padded by 16 bytes: the 8 rows an ldmatrix phase reads then
// start 4 banks apart, so no two share a bank.
constexpr int kKeyPitch = kKeyDim + 8;
constexpr int kProbPitch = kTileTokens + 8;
constexpr int kScorePitch = kTileTokens + 4;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxSplits = 64;
constexpr int kCombineThreads = 128;

// How a thread block divides its work: kGroups groups of 16 heads (the mma M
// dimension), so every record decoded and key tile loaded serves 16 kGroups
// heads (one group for H <= 16, two for H <= 32, four beyond). Each group has
// 8 warps (4 with four groups), each scoring 8 (16) keys and accumulating 64
// (128) output dims: 8 or 16 warps per block (the alternatives timed:
// docs/kernel_history.md).
template <int kGroups>
struct BlockShape {
  static constexpr int kHeads = 16 * kGroups;
  static constexpr int kWarpsPerGroup = kGroups == 4 ? 4 : 8;
  static constexpr int kWarps = kGroups * kWarpsPerGroup;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kScoreTokens = kTileTokens / kWarpsPerGroup;  // keys a warp scores
  static constexpr int kDims = kValueDim / kWarpsPerGroup;           // output dims a warp accumulates
  static constexpr int kDecodeTokens = kTileTokens / kWarps;         // records a warp copies and decodes
  static constexpr int kSoftmaxThreads = kThreads / kHeads;          // threads sharing a head's softmax
  static constexpr int kSoftmaxValues = kTileTokens / kSoftmaxThreads;
  // Blocks an SM holds at once (shared storage: 100, 126 and 176 KB for 1, 2 and 4 groups).
  static constexpr int kBlocksPerSm = kGroups == 1 ? 2 : 1;
  static_assert(kDecodeTokens <= kWarpSize && kSoftmaxValues % 4 == 0 && kDims % 16 == 0, "shape does not tile");
};

template <int kGroups>
struct SharedStorage {
  static constexpr int kHeads = 16 * kGroups;
  alignas(16) std::uint16_t q[kHeads][kKeyPitch];
  alignas(16) std::uint16_t keys[kTileTokens][kKeyPitch];  // also where the records land
  alignas(16) float scores[kHeads][kScorePitch];
  alignas(16) std::uint16_t probs[kHeads][kProbPitch];
  float row_max[kHeads];  // log2 domain
  float row_sum[kHeads];
  float rescale[kHeads];
  int valid[kTileTokens];
};

int groups_for(std::int64_t heads) { return heads > 32 ? 4 : heads > 16 ? 2 : 1; }

// Which kernel decodes (codec, rows, heads). The shared-tile kernel decodes a
// record once per 16-64 heads into a bf16 tile that all its warps read. The
// split-dims kernel decodes it once per 32 heads straight into its warps'
// registers: less shared-memory traffic and no decode phase apart, but a longer
// chain per tile. It is the faster one for the NVFP4 records (whose codec
// decodes to bf16 directly) up to 32 heads once there are enough rows to fill
// the GPU; at few rows the shared-tile kernel is. Beyond 32 heads, on Hopper
// builds with sm_90a code, a warpgroup kernel (wgmma, decoder warps filling
// key tiles while two math warpgroups multiply) takes every record of up to
// 656 bytes: 32-key tiles, or with enough rows 64-key tiles (kWideTiles; the
// per-token-scaled NVFP4 record only with crossover: wide_tiles_for;
// docs/attention.md). Up to 16 heads (and
// for NVFP4 up to 32 below 64 rows) the 64-key kernel, with its products
// transposed (the keys as the wgmma M, no head padding), takes those records.
enum class DecodeKernel { kSharedTile, kSplitDims, kWarpgroups, kWideTiles, kTransposedProducts };

// The records whose ring of at least two tiles fits beside the warpgroup kernel's tiles.
template <class Codec>
inline constexpr bool kFitsWarpgroups = warpgroups::kFits<Codec::Spec::kRecordBytes>;

// The records the wide-tile warpgroup kernel (64-key tiles) also takes: every
// one that fits.
template <class Codec>
inline constexpr bool kWideTiles = wide_tiles::kFits<Codec::Spec::kRecordBytes>;

struct KernelChoice {
  bool decodes_to_fragments;  // the NVFP4 records
  bool outer_scale;           // the NVFP4 record with a per-token scale
  bool warpgroups;            // the warpgroup kernel is built for the codec and runs on the device
  bool wide_tiles;            // and the wide-tile one too
};

// The block size (16 or 32 heads) of the wide-tile kernel's transposed
// products (the keys as the wgmma M, no head padding; each block decodes
// every record of its tiles), or 0 where they do not run (nor where the
// wide-tile kernel does not):
// - every row of up to 32 heads of the records they are built for (all but
//   pts), since their decoders' loads and addresses were cut (8e5212a; H200
//   bench against the 32-key kernel, us at R = 64 / 128, H = 32: 368 B 58.4 /
//   91.5 against 67.6 / 112.8, 656 B 70.8 / 116.2 against 86.8 / 149.0);
// - blocks of 16 while the rows have at most 12 of them, and for NVFP4 blocks
//   of 32 while they have at most 16: rows too few to fill the GPU with
//   blocks of 64. H200 bench at 3dbcab5's tree
//   (bench/results/h200-3dbcab5-transposed-blocks.txt), R = 1, us, 368 B at
//   H = 32 / 64 / 128: 12.8 / 14.0 / 15.6 against 15.7 (blocks of 32) /
//   20.6 / 21.1 (the shared-tile kernel); fp8_ds_mla 13.3 / 15.0 / 17.4
//   against 15.9 / 17.3 / 19.1 (blocks of 32, then of 64 heads); up to the
//   limits 1.01-1.47x. Beyond them slower: blocks of 16 at 16-24 blocks up to
//   1.2x, fp8_ds_mla in blocks of 32 at H = 64, R = 2 / 4 1.04x.
inline constexpr std::int64_t kMostBlocksOf16 = 12;
inline constexpr std::int64_t kMostBlocksOf32 = 16;

int transposed_block_heads(const KernelChoice& choice, std::int64_t rows, std::int64_t heads) {
  if (!choice.wide_tiles || choice.outer_scale) return 0;
  if (heads <= 16 || rows * ((heads + 15) / 16) <= kMostBlocksOf16) return 16;
  if (heads <= wide_tiles::kTransposedHeads) return wide_tiles::kTransposedHeads;
  return choice.decodes_to_fragments && rows * ((heads + 31) / 32) <= kMostBlocksOf32 ? 32 : 0;
}

// Beyond 32 heads (and beyond transposed_block_heads' few rows) the
// wide-tile kernel is the faster one for the FP8 records at every row
// count, and for the NVFP4 ones (their fragment decode) from 4 blocks of 64
// heads; below that they took the shared-tile kernel (one block) or the
// 32-key kernel, where pts still goes. H200 bench at 851ca1d
// against the kernels that ran before, us: fp8_ds_mla at H = 64, R = 1 / 16
// / 32 17.1 / 31.7 / 46.6 against 19.9 / 35.3 / 54.4, at H = 128, R = 1 / 16
// 19.2 / 48.4 against 20.5 / 54.4; 368 B at H = 64, R = 4 / 16 / 32 26.7 /
// 33.2 / 45.1 against 27.9 / 36.1 / 50.4, at R = 1 20.9 against 20.3; with
// crossover (H = 128) the 32-key kernel ran below 64 blocks until the
// crossover decoders' bulk copies (df82a7c) made the wide tiles faster from
// 4: 368 B at R = 16 47.3 against 50.1 us, R = 4 / 8 at parity, R = 1 23.8
// against 21.0 (bench/results/h200-df82a7c-crossover-blocks.txt).
//
// The per-token-scaled NVFP4 record (its fragment decode takes an f32
// product a value) only with crossover, where a block decodes half of each
// tile: against the 32-key kernel at H = 128 1.05-1.15x at R = 2..16 and
// 1.02-1.03x at R = 64 / 128, but 1.1-1.6x slower at every H <= 64, R >= 4,
// where its decode binds (H200 bench at 3dbcab5's tree,
// bench/results/h200-3dbcab5-{pts-wide-tiles,transposed-blocks}.txt).
bool wide_tiles_for(const KernelChoice& choice, std::int64_t rows, std::int64_t heads) {
  const bool enough_blocks = rows * ((heads + 63) / 64) >= 4;
  if (choice.outer_scale) return wide_tiles::crossover_for(heads) && enough_blocks;
  return !choice.decodes_to_fragments || enough_blocks;
}

// Whether this build holds the sm_90a code of the warpgroup kernel and `device` runs it.
bool warpgroups_run_on(int device) {
#if MLAKV_SM90A
  return device_capability(device) == 90;
#else
  (void)device;
  return false;
#endif
}

// `transposed_heads`: transposed_block_heads(choice, rows, heads).
DecodeKernel kernel_for(const KernelChoice& choice, int transposed_heads, std::int64_t rows, std::int64_t heads,
                        int multiprocessors) {
  if (transposed_heads > 0) return DecodeKernel::kTransposedProducts;
  if (choice.wide_tiles && wide_tiles_for(choice, rows, heads)) return DecodeKernel::kWideTiles;
  // Beyond 16 heads the warpgroup kernel wins even with its 64-head block
  // half empty (at 32 heads it takes the time of 64: H = 64, R = 64 ran in
  // 86 us where the split-dims kernel took 108 at H = 32). A single block or
  // two of 64 heads pay its longer start (measured at R = 1: 26.5 us against
  // the shared-tile kernel's 21.8).
  if (choice.warpgroups && heads > 16 && rows * ((heads + 63) / 64) >= 4) return DecodeKernel::kWarpgroups;
  // From about 32 rows on a 132-SM H200 (measured: 32 rows gain 8-15 %, 16 rows lose 9 %).
  const bool split = choice.decodes_to_fragments && heads <= 32 && 5 * rows >= multiprocessors;
  return split ? DecodeKernel::kSplitDims : DecodeKernel::kSharedTile;
}

struct SplitPlan {
  DecodeKernel kernel;
  int block_heads;  // of the transposed products (transposed_block_heads)
  int splits;
  int tiles_per_split;  // units of kTileTokens (64) entries
};

SplitPlan plan_splits(DecodeKernel kernel, int transposed_heads, std::int64_t rows, std::int64_t heads,
                      std::int64_t topk, int multiprocessors) {
  const std::int64_t tiles = std::max<std::int64_t>(1, (topk + kTileTokens - 1) / kTileTokens);
  std::int64_t blocks = 0;
  std::int64_t block_heads = 32;
  int per_sm = 1;
  if (kernel == DecodeKernel::kSplitDims) {
    blocks = rows * ((heads + 31) / 32);
    per_sm = heads <= 16 ? split_dims::kBlocksPerSm<1> : split_dims::kBlocksPerSm<2>;
  } else if (kernel == DecodeKernel::kTransposedProducts) {
    block_heads = transposed_heads;
    blocks = rows * ((heads + block_heads - 1) / block_heads);
    per_sm = 1;
  } else if (kernel == DecodeKernel::kWarpgroups || kernel == DecodeKernel::kWideTiles) {
    block_heads = warpgroups::kHeads;
    blocks = rows * ((heads + block_heads - 1) / block_heads);
    per_sm = 1;
  } else {
    const int groups = groups_for(heads);
    block_heads = 16 * groups;
    blocks = rows * ((heads + block_heads - 1) / block_heads);
    per_sm = groups == 1   ? BlockShape<1>::kBlocksPerSm
             : groups == 2 ? BlockShape<2>::kBlocksPerSm
                           : BlockShape<4>::kBlocksPerSm;
  }
  const std::int64_t resident = static_cast<std::int64_t>(multiprocessors) * per_sm;
  // The split count whose last wave ends first: waves of resident blocks times
  // the tiles each block walks (a partial last wave costs a whole one), plus,
  // when rows are split, about a tile for the block's start and one per 16
  // heads for writing its float32 partial result and merging it. Ties go to
  // fewer splits. The wide tiles split a row into single tiles only while
  // the grid fills at most half the SMs (three quarters with the transposed
  // products, whose blocks start and finish faster): beyond that, two tiles
  // a block on half the blocks were faster, below it one tile a block (H200,
  // bench/results/h200-8df6419-split-plans.txt: R = 4 368 B H = 16 / 64
  // 14.5 / 22.9 us against 15.7 / 26.2; R = 2 H = 128 23.7 against 26.6;
  // fp8_ds_mla H = 64 R = 3 (96 blocks) 19.6 against 21.3; but H = 16 / 32
  // R = 3 (96 transposed blocks) 13.9 / 16.6 with single tiles against 14.1
  // / 17.3).
  const std::int64_t single_tile_blocks = kernel == DecodeKernel::kTransposedProducts ? resident * 3 / 4 : resident / 2;
  const std::int64_t split_cost = 1 + std::min(heads, block_heads) / 16;
  const std::int64_t most = std::min<std::int64_t>(tiles, kMaxSplits);
  std::int64_t best_splits = 1;
  std::int64_t best_per_split = tiles;
  std::int64_t best_cost = -1;
  for (std::int64_t splits = 1; splits <= most; ++splits) {
    const std::int64_t per_split = (tiles + splits - 1) / splits;
    if ((tiles + per_split - 1) / per_split != splits) continue;  // the same split as a smaller count
    const bool wide = kernel == DecodeKernel::kWideTiles || kernel == DecodeKernel::kTransposedProducts;
    if (wide && per_split == 1 && splits > 1 && blocks * splits > single_tile_blocks) {
      continue;
    }
    const std::int64_t waves = (blocks * splits + resident - 1) / resident;
    const std::int64_t cost = waves * (per_split + (splits > 1 ? split_cost : 0));
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_splits = splits;
      best_per_split = per_split;
    }
  }
  return {kernel, transposed_heads, static_cast<int>(best_splits), static_cast<int>(best_per_split)};
}

std::int64_t plan_workspace_bytes(const SplitPlan& plan, std::int64_t rows, std::int64_t heads) {
  if (plan.splits <= 1) return 0;
  return lse_offset_bytes(plan.splits, rows, heads) +
         plan.splits * rows * heads * static_cast<std::int64_t>(sizeof(float));
}

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
  static_assert(kTileTokens == 64, "a tile is the split plan's unit");
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
    // Stored here rather than through HeadStore: with it this kernel ran 10-30 %
    // slower at small R (H200, same code size and registers; 7670629 vs c03c431).
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

// Merges the splits of one (row, head) by their lse; 4 output dims per thread.
// It is launched as a programmatic dependent of the decode kernel (sm_90+):
// its blocks start while the decode's last blocks run and wait at
// griddepcontrol.wait until the decode grid has finished and its partials are
// visible, so no launch gap lies between the two. Every split's lse is loaded
// at once (a thread each) and the partial rows kCombineBatch splits at a
// time, all in flight together: on one row the merge is a chain of memory
// round trips. Batches of 32 for rows of more than 16 splits (the 32
// single-tile splits of R = 1 and 2 at up to 32 heads: one round trip fewer,
// 0.3-0.6 us, 1.02-1.04x), of 16 up to 16 splits (where 32 was 0.97-0.98x
// at H = 64, R = 1): bench/results/h200-cab7748-merge-batch.txt.
constexpr int kShortCombineBatch = 16;
constexpr int kLongCombineBatch = 32;

template <int kCombineBatch>
__global__ void __launch_bounds__(kCombineThreads) merge_splits_kernel(const params::SparseDecodeParams p, int splits) {
  static_assert(kMaxSplits <= kCombineThreads, "a thread per split loads its lse");
  __shared__ float weight[kMaxSplits];
  __shared__ float warp_max[kCombineThreads / kWarpSize];
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
  float4 batch[kCombineBatch];
#pragma unroll
  for (int j = 0; j < kCombineBatch; ++j) {
    if (j < splits) batch[j] = *reinterpret_cast<const float4*>(partial_out + index(j) * kValueDim + d);
  }
  float m = warp_group_max<kWarpSize>(lse);
  if (t % kWarpSize == 0) warp_max[t / kWarpSize] = m;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kCombineThreads / kWarpSize; ++w) m = fmaxf(m, warp_max[w]);
  if (t < splits) weight[t] = m == -INFINITY ? 0.0f : expf(lse - m);
  __syncthreads();
  MergedDims merged;
  for (int s0 = 0; s0 < splits; s0 += kCombineBatch) {
    if (s0 > 0) {
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        if (s0 + j < splits) batch[j] = *reinterpret_cast<const float4*>(partial_out + index(s0 + j) * kValueDim + d);
      }
    }
#pragma unroll
    for (int j = 0; j < kCombineBatch; ++j) {
      if (s0 + j >= splits) break;
      merged.add(weight[s0 + j], batch[j]);
    }
  }
  merged.store(p, row, head, d, m);
}

// Launches the merge of `splits` partials as a programmatic dependent of the
// decode kernel just launched on `stream`.
cudaError_t launch_combine(const params::SparseDecodeParams& p, int splits, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(p.rows * p.heads));
  config.blockDim = dim3(kCombineThreads);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return splits > kShortCombineBatch ? cudaLaunchKernelEx(&config, merge_splits_kernel<kLongCombineBatch>, p, splits)
                                     : cudaLaunchKernelEx(&config, merge_splits_kernel<kShortCombineBatch>, p, splits);
}

template <class Codec, int kGroups>
cudaError_t launch_shape(const params::SparseDecodeParams& p, const SplitPlan& plan, int device, cudaStream_t stream) {
  using Shape = BlockShape<kGroups>;
  const std::int64_t blocks_per_row = (p.heads + Shape::kHeads - 1) / Shape::kHeads;
  const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(plan.splits));
  const auto run = [&]<bool kPartial>() {
    return launch_decode_kernel<sparse_mla_decode_shared_tile_kernel<Codec, kGroups, kPartial>>(
        grid, Shape::kThreads, sizeof(SharedStorage<kGroups>), dim3(1, 1), p, plan.tiles_per_split, device, stream);
  };
  if (plan.splits == 1) return run.template operator()<false>();
  if (const cudaError_t status = run.template operator()<true>(); status != cudaSuccess) return status;
  return launch_combine(p, plan.splits, stream);
}

template <class Codec, int kGroups>
cudaError_t launch_split_dims(const params::SparseDecodeParams& p, const SplitPlan& plan, int device,
                              cudaStream_t stream) {
  constexpr int kHeads = 16 * kGroups;
  const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
  const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(plan.splits));
  const auto run = [&]<bool kPartial>() {
    return launch_decode_kernel<split_dims::sparse_mla_decode_split_dims_kernel<Codec, kGroups, kPartial>>(
        grid, split_dims::kThreads, sizeof(split_dims::Storage<kGroups, Codec::Spec::kRecordBytes>), dim3(1, 1), p,
        plan.tiles_per_split, device, stream);
  };
  if (plan.splits == 1) return run.template operator()<false>();
  if (const cudaError_t status = run.template operator()<true>(); status != cudaSuccess) return status;
  return launch_combine(p, plan.splits, stream);
}

// The warpgroup kernel of plan.kernel: the 64-key tiles (kWideTiles) or the
// 32-key ones (kWarpgroups, built for the NVFP4 records only: wide_tiles_for
// gives every FP8 record the wide tiles).
template <class Codec>
cudaError_t launch_warpgroups(const params::SparseDecodeParams& p, const SplitPlan& plan, int device,
                              cudaStream_t stream) {
  cudaError_t status = cudaErrorNotSupported;
  bool merged = false;  // the wide tiles merge a row's splits in its cluster where they can
  if (plan.kernel == DecodeKernel::kWideTiles) {
    if constexpr (kWideTiles<Codec>) {
      status = wide_tiles::launch<Codec>(p, plan.splits, plan.tiles_per_split, device, stream, merged);
    }
  } else if (plan.kernel == DecodeKernel::kTransposedProducts) {
    if constexpr (kWideTiles<Codec> && !kOuterScale<Codec>) {
      status = wide_tiles::launch_transposed<Codec>(p, plan.block_heads, plan.splits, plan.tiles_per_split, device,
                                                    stream, merged);
    }
  } else if constexpr (kFragmentDecode<Codec>) {
    status = warpgroups::launch<Codec>(p, plan.splits, plan.tiles_per_split, device, stream);
  }
  if (status != cudaSuccess || plan.splits == 1 || merged) return status;
  return launch_combine(p, plan.splits, stream);
}

template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, cudaStream_t stream) {
  int device = 0;
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) return status;
  const int multiprocessors = multiprocessor_count(device);
  const bool warpgroups = kFitsWarpgroups<Codec> && warpgroups_run_on(device);
  const KernelChoice choice{kFragmentDecode<Codec>, kOuterScale<Codec>, warpgroups, warpgroups && kWideTiles<Codec>};
  const int transposed_heads = transposed_block_heads(choice, p.rows, p.heads);
  SplitPlan plan = plan_splits(kernel_for(choice, transposed_heads, p.rows, p.heads, multiprocessors), transposed_heads,
                               p.rows, p.heads, p.topk, multiprocessors);
  if (p.workspace == nullptr || p.workspace_bytes < plan_workspace_bytes(plan, p.rows, p.heads)) {
    plan.splits = 1;
    plan.tiles_per_split = static_cast<int>(std::max<std::int64_t>(1, (p.topk + kTileTokens - 1) / kTileTokens));
  }
#if MLAKV_SM90A
  if constexpr (kFitsWarpgroups<Codec>) {
    if (plan.kernel == DecodeKernel::kWarpgroups || plan.kernel == DecodeKernel::kWideTiles ||
        plan.kernel == DecodeKernel::kTransposedProducts) {
      return launch_warpgroups<Codec>(p, plan, device, stream);
    }
  }
#endif
  if constexpr (kFragmentDecode<Codec>) {
    if (plan.kernel == DecodeKernel::kSplitDims) {
      return p.heads <= 16 ? launch_split_dims<Codec, 1>(p, plan, device, stream)
                           : launch_split_dims<Codec, 2>(p, plan, device, stream);
    }
  }
  switch (groups_for(p.heads)) {
    case 1:
      return launch_shape<Codec, 1>(p, plan, device, stream);
    case 2:
      return launch_shape<Codec, 2>(p, plan, device, stream);
    default:
      return launch_shape<Codec, 4>(p, plan, device, stream);
  }
}

// One block per (row, head), over params/merge.h as the CPU merge.
__global__ void __launch_bounds__(kCombineThreads) merge_kernel(const params::MergeParams p) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / p.heads;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) % p.heads;
  const params::MergeWeights w = params::merge_weights(params::lse_at(p.a, row, head), params::lse_at(p.b, row, head));
  const std::int64_t a = params::out_offset(p.a, row, head);
  const std::int64_t b = params::out_offset(p.b, row, head);
  const std::int64_t out = params::out_offset(p.merged, row, head);
  for (std::int64_t d = threadIdx.x; d < p.width; d += kCombineThreads) {
    params::store_state(p, p.merged, out + d,
                        params::merged_value(w, params::load_state(p, p.a, a + d), params::load_state(p, p.b, b + d)));
  }
  __syncthreads();  // every thread read lse before it may be overwritten (lse may alias lse_a)
  if (threadIdx.x == 0) params::lse_at(p.merged, row, head) = params::merged_lse(w);
}

}  // namespace

// The workspace does not depend on the format: the largest of the kernels' plans.
std::int64_t sparse_decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t topk, int device) {
  const int multiprocessors = multiprocessor_count(device);
  std::int64_t bytes = 0;
  for (const DecodeKernel kernel : {DecodeKernel::kSharedTile, DecodeKernel::kSplitDims, DecodeKernel::kWarpgroups,
                                    DecodeKernel::kWideTiles, DecodeKernel::kTransposedProducts}) {
    for (const int transposed_heads : {16, 32}) {
      const SplitPlan plan = plan_splits(kernel, transposed_heads, rows, heads, topk, multiprocessors);
      bytes = std::max(bytes, plan_workspace_bytes(plan, rows, heads));
    }
  }
  return std::max(bytes, v4::decode_workspace_bytes(rows, heads, topk, device));  // the DeepSeek V4 decode's
}

cudaError_t sparse_mla_decode(const params::SparseDecodeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  if (p.qk_dim == 512) return v4::launch_decode(p, stream);  // the DeepSeek V4 family: cuda/decode/v4/
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) { return launch<Codec>(p, stream); });
}

cudaError_t merge_attention_states(const params::MergeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  merge_kernel<<<static_cast<unsigned>(p.rows * p.heads), kCombineThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mlakv::cuda
