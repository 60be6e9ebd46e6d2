// SPDX-License-Identifier: Apache-2.0
// The sparse MLA prefill on Hopper (sm_90a): a throughput kernel, a block per
// (query row, 64 heads), that walks the row's entries in tiles of 64 keys
// with no split of a row and no workspace. Three warpgroups hand work to
// each other through mbarriers and two named barriers:
//   - the decoders (warpgroup 2's warps, 8 records of a tile each, and each
//     math warp 4, decoded while its P x V runs) load their records of a
//     tile straight from global memory (the next tile's slots loaded and
//     its records asked of L2 a tile ahead) and decode them with
//     the shared codecs into one of two bf16 key tiles in the 128-byte
//     swizzle (the readers' bf16 values, NVFP4 in fragment order; zeros for
//     an entry without a record), while the math warpgroups multiply the
//     other;
//   - math warpgroups 0 and 1 share each tile evenly, as FlashMLA's prefill
//     does: warpgroup w scores the tile's keys 32 w..32 w + 31 against the
//     resident query tile (64 heads x 32 keys x 576 dims), the two swap their
//     tile maxima so both take the same reference maximum, each publishes
//     its half of the bf16 probabilities, and each adds P x V over all 64
//     keys for its 256 output dims. The next tile's scores are issued right
//     behind this tile's P x V, so the tensor cores stay busy while the
//     products drain.
// The key tile serves both products: K-major rows of 576 dims for the scores
// and, read MN-major, the value rows (its first 512 dims) for P x V.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/attention_result.cuh"
#include "cuda/bulk_copy.cuh"
#include "cuda/key_fragment.cuh"
#include "cuda/prefill/shape.h"
#include "cuda/sparse_mla_decode_wide_tiles.cuh"
#include "cuda/warp.cuh"
#include "cuda/warpgroup_io.cuh"
#include "cuda/warpgroup_math.cuh"
#include "cuda/wgmma.cuh"
#include "mlakv/vocabulary.h"
#include "params/prefill_params.h"

namespace mlakv::cuda::prefill {

struct Storage {
  alignas(1024) std::uint8_t q[kColumnBlocks * kQueryBlockBytes];
  alignas(1024) std::uint8_t keys[kKeyBuffers][kColumnBlocks * kKeyBlockBytes];
  alignas(1024) std::uint8_t probs[kProbBytes];  // [64 heads][64 keys]: warpgroup w's keys at columns 32 w..
  // Each math warpgroup's maximum of its keys of a tile by head (log2
  // domain); at the end each head's sum, which the warpgroup's epilogue reads.
  float tile_max[2][kHeads];
  float part_sum[2][kHeads];  // each math warpgroup's sum of its keys by head
  float head_max[2][kHeads];  // each head's reference maximum (log2 domain), a copy a math warpgroup
  alignas(16) std::uint8_t valid[kKeyBuffers][kTileTokens];  // token t of the key tile has a record
  std::uint64_t keys_full[kKeyBuffers];   // 12 warp arrivals (each warp's share): the tile is decoded
  std::uint64_t keys_empty[kKeyBuffers];  // 8 math warp arrivals: both products read it
};

inline constexpr int kSharedBytes = static_cast<int>(sizeof(Storage)) + 1024;  // + alignment slack
static_assert(kSharedBytes <= kSharedLimit, "one block fits an SM");

// Named barriers of the two math warpgroups (0 is __syncthreads).
inline constexpr int kMaximaBarrier = 1;   // both warpgroups' tile maxima are in
inline constexpr int kWeightsBarrier = 2;  // both halves of the probabilities are in
inline constexpr int kTotalsBarrier = 3;   // both warpgroups' sums are in

__device__ __forceinline__ void math_barrier(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Issues (and commits) a math warpgroup's scores of a tile: 64 heads x its
/// 32 keys (`keys` at its first key row).
__device__ __forceinline__ void issue_scores(float (&s)[16], const std::uint8_t* q, const std::uint8_t* keys) {
  wgmma::fence_operands(s);
  warpgroup_math::issue_over_query_dims<kQueryBlockBytes, kKeyBlockBytes>(
      q, keys, [&](int k, std::uint64_t a, std::uint64_t b) { wgmma::mma_64x32(s, a, b, k > 0 ? 1 : 0); });
}

/// A warp's share of every tile: tokens first..first + count - 1 (count a
/// multiple of kRoundTokens, at most 16).
struct Share {
  int first;
  int count;
};

/// Lane l's record of token share.first + l % share.count of tile `tile`
/// (null past the row's entries or without a record).
__device__ __forceinline__ const std::uint8_t* share_record(const params::SparsePrefillParams& p, std::int64_t row,
                                                            std::int64_t end, int tile, const Share& share, int lane) {
  const std::int64_t entry = static_cast<std::int64_t>(tile) * kTileTokens + share.first + lane % share.count;
  const std::int64_t slot = entry < end ? __ldg(p.indices + row * p.indices_stride_row_elems + entry) : -1;
  return params::record_or_null(p.cache, slot);
}

/// Decodes a warp's share of a tile, whose records lane l holds (token l %
/// kCount), into key buffer `keys` and its valid flags, then publishes it
/// (one arrival on `full`), in kCount / kRoundTokens rounds (ptxas keeps
/// about one round's loads in flight, more registers or not: the rounds'
/// loads and stores interleave).
template <class Codec, int kCount>
__device__ __forceinline__ void decode_share(std::uint8_t* keys, std::uint8_t* valid_flags, std::uint64_t* full,
                                             const codec::DecodeParams& params, const std::uint8_t* records, int first,
                                             int lane) {
  constexpr int kShareRounds = kCount / kRoundTokens;
  static_assert(kCount % kRoundTokens == 0 && kRoundTokens * 8 == kWarpSize, "whole rounds of 8 lanes a record");
  bool valid[kShareRounds];
  const std::uint8_t* at[kShareRounds];
#pragma unroll
  for (int r = 0; r < kShareRounds; ++r) {
    const std::uint8_t* record = wide_tiles::shuffle(records, kRoundTokens * r + lane / 8);
    valid[r] = record != nullptr;
    at[r] = valid[r] ? record : reinterpret_cast<const std::uint8_t*>(wide_tiles::kZeroRecord);
  }
#pragma unroll
  for (int r = 0; r < kShareRounds; ++r) {
    wide_tiles::decode_round<Codec>(keys, params, at[r], valid[r], first + kRoundTokens * r + lane / 8, lane);
  }
  if (lane < kCount) valid_flags[first + lane] = records != nullptr ? 1 : 0;
  bulk_copy_fence();  // the key tile's stores before the wgmma read it
  __syncwarp();       // every lane's stores (and their fences) come before lane 0 publishes the tile
  if (lane == 0) barrier_arrive(full);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// kMathDecode: the math warps decode a share of each tile too (DecodeSplit).
template <class Codec, bool kMathDecode>
__global__ void __launch_bounds__(kThreads, 1) sparse_mla_prefill_kernel(const params::SparsePrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kRecordBytes = Codec::Spec::kRecordBytes;
  using Split = DecodeSplit<kMathDecode>;
  static_assert(kReads<Codec>, "records the decoders load straight from global memory");
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<Storage*>(smem_raw + (1024u - shared_address(smem_raw) % 1024u) % 1024u);

  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / 128;
  const int warp = (tid % 128) / kWarpSize;  // within the warpgroup
  const int lane = tid % kWarpSize;
  const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / blocks_per_row;
  const std::int64_t head0 = (static_cast<std::int64_t>(blockIdx.x) % blocks_per_row) * kHeads;
  const std::int64_t end = params::row_entries(p, row);
  const int tiles = static_cast<int>((end + kTileTokens - 1) / kTileTokens);

  if (tid == 0) {
    for (int b = 0; b < kKeyBuffers; ++b) {
      barrier_init(&sh.keys_full[b], Split::kWarps);  // every decoding warp's share
      barrier_init(&sh.keys_empty[b], 8);
    }
    bulk_barrier_init_fence();
  }
  warpgroup_io::load_query<Codec, kThreads>(sh.q, p, row, head0, tid);
  bulk_copy_fence();  // the query's ordinary stores before the wgmma (another proxy) read them
  __syncthreads();

  codec::DecodeParams params = p.decode;
  if (p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
  if (warpgroup == 2) {
    warpgroup_math::keep_registers<Split::kDecoderRegisters>();
    const Share share{Split::kDecoderTokens * warp, Split::kDecoderTokens};
    const std::uint8_t* records = tiles > 0 ? share_record(p, row, end, 0, share, lane) : nullptr;
    if (tiles > 0) wide_tiles::prefetch_records<kRecordBytes>(records, share.count, lane);
#pragma unroll 1
    for (int t = 0; t < tiles; ++t) {
      const int buffer = t % kKeyBuffers;
      // The next tile's slots and records asked for while this one decodes.
      const std::uint8_t* next = t + 1 < tiles ? share_record(p, row, end, t + 1, share, lane) : nullptr;
      if (t + 1 < tiles) wide_tiles::prefetch_records<kRecordBytes>(next, share.count, lane);
      bulk_barrier_wait(&sh.keys_empty[buffer], (static_cast<std::uint32_t>(t / kKeyBuffers) & 1u) ^ 1u);
      decode_share<Codec, Split::kDecoderTokens>(sh.keys[buffer], sh.valid[buffer], &sh.keys_full[buffer], params,
                                                 records, share.first, lane);
      records = next;
    }
    return;
  }

  warpgroup_math::keep_registers<Split::kMathRegisters>();
  const int g = lane / 4;  // accumulator rows 16 warp + g and + 8, columns 2 c, 2 c + 1 of each 8
  const int c = lane % 4;
  const int r0 = 16 * warp + g;
  const int r1 = r0 + 8;
  const int first_key = kHalfTokens * warpgroup;  // this warpgroup's keys of a tile
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // rows r0, r1: the reference maximum, the same in both warpgroups
  float row_sum[2] = {0.0f, 0.0f};            // this thread's columns only, summed over the quad at the end
  // Scores in the log2 domain, the key tile's factor undone (a power of two: exact).
  const float score_scale = p.sm_scale * 1.4426950408889634f * (1.0f / kKeyTileScale<Codec>);
  constexpr int kChunks = kHalfTokens / 8;  // 8-key column chunks of a warpgroup's scores

  // This warp's share of each tile's decode, done for tile t + 1 while
  // tile t's P x V runs (its key buffer was released by both math
  // warpgroups before either passed tile t's maxima barrier).
  const Share share{4 * Split::kDecoderTokens + Split::kMathTokens * (4 * warpgroup + warp), Split::kMathTokens};
  const std::uint8_t* records =
      Split::kMathTokens > 0 && tiles > 0 ? share_record(p, row, end, 0, share, lane) : nullptr;
  const auto decode_tile = [&](int tile) {
    if constexpr (Split::kMathTokens > 0) {
      const std::uint8_t* next = tile + 1 < tiles ? share_record(p, row, end, tile + 1, share, lane) : nullptr;
      if (tile + 1 < tiles) wide_tiles::prefetch_records<kRecordBytes>(next, share.count, lane);
      const int buffer = tile % kKeyBuffers;
      decode_share<Codec, Split::kMathTokens>(sh.keys[buffer], sh.valid[buffer], &sh.keys_full[buffer], params, records,
                                              share.first, lane);
      records = next;
    }
  };

  float s[16];
  if (tiles > 0) {
    decode_tile(0);
    bulk_barrier_wait(&sh.keys_full[0], 0u);
    issue_scores(s, sh.q, sh.keys[0] + first_key * 128);
    wgmma::wait<0>();
    wgmma::fence_operands(s);
  }
#pragma unroll 1
  for (int t = 0; t < tiles; ++t) {
    const int buffer = t % kKeyBuffers;
    float tile_max[2];
    warpgroup_math::mask_scores<kChunks>(s, warpgroup_math::valid_key_bits<kChunks>(sh.valid[buffer] + first_key, c),
                                         score_scale, tile_max);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xFFFFFFFFu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xFFFFFFFFu, tile_max[h], 2));
    }
    if (c == 0) {
      sh.tile_max[warpgroup][r0] = tile_max[0];
      sh.tile_max[warpgroup][r1] = tile_max[1];
    }
    math_barrier(kMaximaBarrier);
    // The tile's maximum over both halves: both warpgroups move the reference alike.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = h == 0 ? r0 : r1;
      const float both = fmaxf(tile_max[h], sh.tile_max[warpgroup ^ 1][r]);
      const warpgroup_math::Reference ref = warpgroup_math::next_reference(both, row_max[h]);
      alpha[h] = ref.alpha;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const float p0 = warpgroup_math::weight(s[4 * i + 2 * h], ref.max);
        const float p1 = warpgroup_math::weight(s[4 * i + 2 * h + 1], ref.max);
        sum += p0 + p1;  // unrounded, so lse is exact to float32 (P x V takes the bf16 weights)
        *reinterpret_cast<std::uint32_t*>(sh.probs + wgmma::swizzled_offset(r, first_key + 8 * i + 2 * c, kProbBytes)) =
            warpgroup_math::bf16x2_bits(p0, p1);
      }
      row_max[h] = ref.max;
      row_sum[h] = row_sum[h] * alpha[h] + sum;
    }
    bulk_copy_fence();  // the probabilities' ordinary stores before the wgmma read them
    math_barrier(kWeightsBarrier);
    if (__any_sync(0xFFFFFFFFu, alpha[0] != 1.0f || alpha[1] != 1.0f)) warpgroup_math::rescale(o, alpha[0], alpha[1]);
    warpgroup_math::issue_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs, sh.keys[buffer], warpgroup);
    if (t + 1 < tiles) {
      decode_tile(t + 1);
      const int next = (t + 1) % kKeyBuffers;
      bulk_barrier_wait(&sh.keys_full[next], static_cast<std::uint32_t>((t + 1) / kKeyBuffers) & 1u);
      issue_scores(s, sh.q, sh.keys[next] + first_key * 128);
      wgmma::wait<1>();  // this tile's P x V (committed first)
    } else {
      wgmma::wait<0>();
    }
    wgmma::fence_operands(o);
    __syncwarp();  // every lane's reads of the tile come before lane 0 releases it
    if (lane == 0) barrier_arrive(&sh.keys_empty[buffer]);
    wgmma::wait<0>();  // the next tile's scores
    wgmma::fence_operands(s);
  }

  // Each head's sum over both warpgroups' keys; its total and reference
  // maximum then go where the thread's quad reads them (its warpgroup's
  // tile_max, no longer read by the other one, and head_max).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[h], 2);
  }
  if (c == 0) {
    sh.part_sum[warpgroup][r0] = row_sum[0];
    sh.part_sum[warpgroup][r1] = row_sum[1];
  }
  math_barrier(kTotalsBarrier);
  if (c == 0) {
    sh.tile_max[warpgroup][r0] = sh.part_sum[0][r0] + sh.part_sum[1][r0];
    sh.tile_max[warpgroup][r1] = sh.part_sum[0][r1] + sh.part_sum[1][r1];
    sh.head_max[warpgroup][r0] = row_max[0];
    sh.head_max[warpgroup][r1] = row_max[1];
  }
  __syncwarp();
  warpgroup_io::store_output<Codec, Epilogue::kOutput>(p, StagedRows{}, o, sh.tile_max[warpgroup],
                                                       sh.head_max[warpgroup], row, head0, 0, warpgroup, r0, r1, c);
#else
  __trap();  // launched only where the sm_90a code exists (sparse_mla_prefill.cu)
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mlakv::cuda::prefill
