// SPDX-License-Identifier: Apache-2.0
// The sparse MLA decode for blocks of 64 heads on Hopper (sm_90a), on
// warpgroup tensor-core instructions (wgmma) whose operands stay in shared
// memory, with three warpgroups that hand work to each other through
// mbarriers instead of block-wide barriers:
//   - the producer (warpgroup 2) bulk-copies each tile's 32 records into a
//     ring of kStages tiles (warp w: tokens 8w..8w+7, addresses found four
//     tiles at a time, a batch ahead), decodes them with the shared codecs
//     into one of kKeyBuffers bf16 key tiles (the readers' bf16 values; zeros
//     for an entry without a record) and marks the tile full;
//   - math warpgroup 0 scores the tiles (64 heads x 32 keys x 576 dims), one
//     tile ahead: tile t + 1's scores run on the tensor cores while tile t's
//     online softmax runs in registers; it publishes tile t's bf16
//     probabilities and each head's rescale factor, and adds P x V for output
//     dims 0..255;
//   - math warpgroup 1 adds P x V for output dims 256..511 from the
//     published probabilities.
// The key tile serves both products: K-major rows of 576 dims for the
// scores, and, read MN-major, the value rows (its first 512 dims) for P x V.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/hopper/io.cuh"
#include "cuda/decode/hopper/math.cuh"
#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/ptx/bulk_copy.cuh"
#include "cuda/ptx/warp.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "dispatch/visit_codec.h"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda::warpgroups {

using warpgroup_math::rescale;

template <int kRecordBytes>
struct Storage {
  static constexpr int kRing = kStages<kRecordBytes>;
  static constexpr int kKeys = kKeyBuffers<kRecordBytes>;
  alignas(1024) std::uint8_t q[kColumnBlocks * kQueryBlockBytes];
  alignas(1024) std::uint8_t keys[kKeys][kColumnBlocks * kKeyBlockBytes];
  alignas(1024) std::uint8_t probs[2][kProbBytes];
  alignas(16) std::uint8_t records[kRing][kProducerWarps][kWarpTokens][kRecordBytes];
  float alpha[2][kHeads];  // each head's rescale factor of the tile (by probability tile)
  float row_sum[kHeads];
  float row_max[kHeads];                               // log2 domain
  alignas(16) std::uint8_t valid[kKeys][kTileTokens];  // token t of the key tile has a record
  int staged_valid[kRing][kTileTokens];                // which ring entries hold a record
  std::uint64_t landed[kRing][kProducerWarps];         // bulk copies of a warp's records are in
  std::uint64_t keys_full[kKeys];                      // 8 decoder warp arrivals: the tile is decoded
  std::uint64_t keys_empty[kKeys];                     // 8 math warp arrivals: both products read it
  std::uint64_t probs_full[2];                         // 128 arrivals of warpgroup 0: P and alpha are in
  std::uint64_t probs_empty[2];                        // 4 arrivals of warpgroup 1: its P x V read them
};

template <int kRecordBytes>
inline constexpr int kSharedBytes = static_cast<int>(sizeof(Storage<kRecordBytes>)) + 1024;  // + alignment slack

/// The slots of tiles [first_tile, first_tile + kBatchTiles) a producer warp
/// copies: lane 8 i + j holds token 8 warp + j of tile first_tile + i, or -1
/// past the block's range. Loaded a batch before their addresses are needed.
__device__ __forceinline__ std::int64_t slot_batch(const params::SparseDecodeParams& p, std::int64_t row,
                                                   std::int64_t begin, std::int64_t end, int first_tile, int warp,
                                                   int lane) {
  const std::int64_t entry = begin + static_cast<std::int64_t>(first_tile + lane / kWarpTokens) * kTileTokens +
                             kWarpTokens * warp + lane % kWarpTokens;
  return entry < end ? __ldg(p.indices + row * p.indices_stride_row_elems + entry) : -1;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// The producer warp's records of tile `tile` into ring stage `stage`:
/// entries without a record are not copied (the decode writes zeros). The
/// warp's reads of the stage's previous records are fenced already (the
/// fence that publishes its key tile).
template <int kRecordBytes>
__device__ __forceinline__ void issue_tile(Storage<kRecordBytes>& sh, const std::uint8_t* batch, int tile, int stage,
                                           int warp, int lane) {
  const auto* record = reinterpret_cast<const std::uint8_t*>(__shfl_sync(
      0xFFFFFFFFu, reinterpret_cast<std::uintptr_t>(batch), (tile % kBatchTiles) * kWarpTokens + lane % kWarpTokens));
  const unsigned copied = __ballot_sync(0xFFFFFFFFu, lane < kWarpTokens && record != nullptr);
  if (lane == 0) {
    bulk_barrier_expect(&sh.landed[stage][warp], static_cast<std::uint32_t>(__popc(copied)) * kRecordBytes);
  }
  if (lane < kWarpTokens) {
    sh.staged_valid[stage][kWarpTokens * warp + lane] = record != nullptr ? 1 : 0;
    if (record != nullptr) bulk_copy(sh.records[stage][warp][lane], record, kRecordBytes, &sh.landed[stage][warp]);
  }
}

/// Decodes the producer warp's kWarpTokens staged records into rows
/// kWarpTokens warp.. of `keys`: in step i, lane (g = lane / 8, j = lane % 8)
/// decodes latent group 8 i + j (dims 16 (8 i + j)..) of token g, so that the
/// 32 lanes' 16-byte stores spread evenly over the swizzle's 8 chunk columns
/// (4 stores each: the fewest for 512 bytes), and the lane its RoPE pairs
/// 4 j..4 j + 3, one 16-byte store (as the wide-tile decoders). A lane whose
/// token has no record decodes the stale bytes anyway and stores zeros.
template <class Codec>
__device__ __forceinline__ void decode_tile(Storage<Codec::Spec::kRecordBytes>& sh, const codec::DecodeParams& params,
                                            int stage, int buffer, int warp, int lane) {
  constexpr int kLanesPerToken = kWarpSize / kWarpTokens;
  constexpr int kSteps = codec::kLanes / kLanesPerToken;
  const int g = lane / kLanesPerToken;
  const int j = lane % kLanesPerToken;
  const int row = kWarpTokens * warp + g;
  __syncwarp();  // lanes < kWarpTokens wrote staged_valid when they issued the copies
  const bool valid = sh.staged_valid[stage][row] != 0;
  const std::uint8_t* record = sh.records[stage][warp][g];
  std::uint8_t* keys = sh.keys[buffer];
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll  // the steps' decodes are independent: all in flight at once
  for (int i = 0; i < kSteps; ++i) {
    const int group = kLanesPerToken * i + j;
    alignas(16) std::uint32_t latent[8];  // bf16 pairs: in fragment order for NVFP4, else in dim order
    decode_latent_key<Codec>(group, record, params, latent);
    const int col = codec::kLatentPerLane * group;
    *reinterpret_cast<uint4*>(keys + wgmma::swizzled_offset(row, col, kKeyBlockBytes)) =
        valid ? reinterpret_cast<const uint4*>(latent)[0] : zero;
    *reinterpret_cast<uint4*>(keys + wgmma::swizzled_offset(row, col + 8, kKeyBlockBytes)) =
        valid ? reinterpret_cast<const uint4*>(latent)[1] : zero;
  }
  alignas(16) std::uint32_t rope[4];  // RoPE pairs 4 j.. as bf16 pairs
  codec::decode_rope_quad_bf16_bits<Codec>(j, record, params, rope);
  *reinterpret_cast<uint4*>(keys + wgmma::swizzled_offset(row, kLatentDim + 8 * j, kKeyBlockBytes)) =
      valid ? *reinterpret_cast<const uint4*>(rope) : zero;
  if (lane < kWarpTokens)
    sh.valid[buffer][kWarpTokens * warp + lane] = sh.staged_valid[stage][kWarpTokens * warp + lane];
}

/// Issues (and commits) the tile's scores, 64 heads x 32 keys: the latent
/// dims' part into `latent`, the RoPE dims' into `rope`.
__device__ __forceinline__ void issue_scores(float (&latent)[16], float (&rope)[16], const std::uint8_t* q,
                                             const std::uint8_t* keys) {
  wgmma::fence_operands(latent);
  wgmma::fence_operands(rope);
  constexpr int kLatentSteps = kLatentDim / 16;
  warpgroup_math::issue_over_query_dims<kQueryBlockBytes, kKeyBlockBytes>(
      q, keys, [&](int k, std::uint64_t a, std::uint64_t b) {
        if (k < kLatentSteps) {
          wgmma::mma_64x32(latent, a, b, k > 0 ? 1 : 0);
        } else {
          wgmma::mma_64x32(rope, a, b, k > kLatentSteps ? 1 : 0);
        }
      });
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <class Codec, bool kPartial>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_mla_decode_warpgroups_kernel(const params::SparseDecodeParams p, int units_per_split) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kRecordBytes = Codec::Spec::kRecordBytes;
  constexpr int kRing = kStages<kRecordBytes>;
  constexpr int kKeys = kKeyBuffers<kRecordBytes>;
  static_assert(kRing >= 2 && kRing <= kBatchTiles, "the ring starts within the first batch");
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  auto& sh = *reinterpret_cast<Storage<kRecordBytes>*>(smem_raw + (1024u - shared_address(smem_raw) % 1024u) % 1024u);

  if constexpr (kPartial) asm volatile("griddepcontrol.launch_dependents;");  // the merge may start its blocks
  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / 128;
  const int warp = (tid % 128) / kWarpSize;  // within the warpgroup
  const int lane = tid % kWarpSize;
  const BlockRange block = block_range<kHeads>(p, units_per_split);
  const auto [row, head0, split, begin, end] = block;
  const int tiles = block.tiles<kTileTokens>();

  if (tid == 0) {
    for (int s = 0; s < kRing; ++s) {
      for (int w = 0; w < kProducerWarps; ++w) bulk_barrier_init(&sh.landed[s][w]);
    }
    for (int b = 0; b < kKeys; ++b) {
      barrier_init(&sh.keys_full[b], kProducerWarps);  // one arrival per decoder warp
      barrier_init(&sh.keys_empty[b], 8);
    }
    for (int b = 0; b < 2; ++b) {
      barrier_init(&sh.probs_full[b], 128);
      barrier_init(&sh.probs_empty[b], 4);
    }
    bulk_barrier_init_fence();
  }
  warpgroup_io::load_query<Codec, kThreads>(sh.q, p, row, head0, tid);
  bulk_copy_fence();  // the query's ordinary stores before the wgmma (another proxy) read them
  __syncthreads();

  // The decoders: warpgroup 1's warps are producers 0..3, warpgroup 2's 4..7.
  codec::DecodeParams params = p.decode;
  if (warpgroup != 0 && p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
  struct Decoder {
    int producer;
    const std::uint8_t* batch = nullptr;  // this lane's record of the current batch
    std::int64_t next_slots = -1;         // this lane's slot of the next batch
  };
  // Starts a decoder warp's ring: tiles 0..kRing - 1's copies.
  const auto start_ring = [&](Decoder& d) {
    d.batch = params::record_or_null(p.cache, slot_batch(p, row, begin, end, 0, d.producer, lane));
    d.next_slots = slot_batch(p, row, begin, end, kBatchTiles, d.producer, lane);
#pragma unroll
    for (int s = 0; s < kRing; ++s) {
      if (s < tiles) issue_tile(sh, d.batch, s, s, d.producer, lane);
    }
  };
  // Decodes a decoder warp's tokens of tile t into its key tile, then refills the stage.
  const auto decode = [&](Decoder& d, int t) {
    const int stage = t % kRing;
    const int buffer = t % kKeys;
    bulk_barrier_wait(&sh.landed[stage][d.producer], static_cast<std::uint32_t>(t / kRing) & 1u);
    bulk_barrier_wait(&sh.keys_empty[buffer], (static_cast<std::uint32_t>(t / kKeys) & 1u) ^ 1u);
    decode_tile<Codec>(sh, params, stage, buffer, d.producer, lane);
    bulk_copy_fence();  // the key tile's stores before the wgmma read it, the stage's reads before it is refilled
    __syncwarp();       // every lane's stores and reads of the stage (and their fences) come before lane 0
                        // publishes the tile and a lane refills the stage
    if (lane == 0) barrier_arrive(&sh.keys_full[buffer]);
    if (const int tile = t + kRing; tile < tiles) {
      if (tile % kBatchTiles == 0) {  // its slots were loaded a batch ago
        d.batch = params::record_or_null(p.cache, d.next_slots);
        d.next_slots = slot_batch(p, row, begin, end, tile + kBatchTiles, d.producer, lane);
      }
      issue_tile(sh, d.batch, tile, stage, d.producer, lane);
    }
  };
  if (warpgroup == 2) {
    warpgroup_math::keep_registers<kProducerRegisters>();
    Decoder d{4 + warp};
    start_ring(d);
#pragma unroll 1
    for (int t = 0; t < tiles; ++t) decode(d, t);
    return;  // every copy issued was waited for
  }

  const int g = lane / 4;  // accumulator rows 16 warp + g and + 8, columns 2 c, 2 c + 1 of each 8
  const int c = lane % 4;
  const int r0 = 16 * warp + g;
  const int r1 = r0 + 8;
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;

  float row_max[2] = {-INFINITY, -INFINITY};  // the online softmax of rows r0, r1 (warpgroup 0)
  float row_sum[2] = {0.0f, 0.0f};            // this thread's columns only, summed over the quad at the end
  if (warpgroup == 0) {
    warpgroup_math::keep_registers<kScoreRegisters>();
    const float score_scale = p.sm_scale * 1.4426950408889634f;  // scores in the log2 domain
    float s[16];                                                 // tile t's scores
    // Tile t: its online softmax, its probabilities published, its P x V
    // issued; with `in_flight`, tile t + 1's scores run on the tensor cores
    // meanwhile.
    const auto run_tile = [&](int t, bool in_flight, float(&next_latent)[16], float(&next_rope)[16]) {
      const int buffer = t % kKeys;
      const int probs = t % 2;
      const std::uint32_t phase = static_cast<std::uint32_t>(t / 2) & 1u;
      float tile_max[2];
      warpgroup_math::mask_scores<4>(s, warpgroup_math::valid_key_bits<4>(sh.valid[buffer], c), score_scale, tile_max);
      float alpha[2];
      std::uint32_t packed[2][4];
      warpgroup_math::softmax_weights<4>(s, tile_max, row_max, row_sum, alpha,
                                         [&](int h, int i, std::uint32_t bits) { packed[h][i] = bits; });
      bulk_barrier_wait(&sh.probs_empty[probs], phase ^ 1u);  // warpgroup 1 is done with tile t - 2's
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        *reinterpret_cast<std::uint32_t*>(sh.probs[probs] + wgmma::swizzled_offset(r0, 8 * i + 2 * c, kProbBytes)) =
            packed[0][i];
        *reinterpret_cast<std::uint32_t*>(sh.probs[probs] + wgmma::swizzled_offset(r1, 8 * i + 2 * c, kProbBytes)) =
            packed[1][i];
      }
      if (c == 0) {
        sh.alpha[probs][r0] = alpha[0];
        sh.alpha[probs][r1] = alpha[1];
      }
      bulk_copy_fence();  // the probabilities' ordinary stores before the wgmma read them
      barrier_arrive(&sh.probs_full[probs]);
      if (__any_sync(0xFFFFFFFFu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
        // No ordinary instruction may write an accumulator while a wgmma is in
        // flight (ptxas would serialize every wgmma): the scores land first.
        if (in_flight) {
          wgmma::wait<0>();
          wgmma::fence_operands(next_latent);
          wgmma::fence_operands(next_rope);
        }
        rescale(o, alpha[0], alpha[1]);
      }
      bulk_barrier_wait(&sh.probs_full[probs], phase);  // every warp's probabilities are in
      warpgroup_math::issue_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs[probs], sh.keys[buffer], 0);
      wgmma::wait<0>();  // tile t's P x V (and tile t + 1's scores)
      wgmma::fence_operands(o);
      __syncwarp();  // every lane's reads of the tile's state come before lane 0 releases it
      if (lane == 0) barrier_arrive(&sh.keys_empty[buffer]);
    };
    // The scores with the latent keys' factor undone (exact: a power of two).
    const auto combine = [&](const float(&latent)[16], const float(&rope)[16]) {
#pragma unroll
      for (int i = 0; i < 16; ++i) s[i] = latent[i] * (1.0f / kKeyTileScale<Codec>)+rope[i];
    };
    if (tiles > 0) {
      float latent[16];
      float rope[16];
      bulk_barrier_wait(&sh.keys_full[0], 0u);
      issue_scores(latent, rope, sh.q, sh.keys[0]);
      wgmma::wait<0>();
      wgmma::fence_operands(latent);
      wgmma::fence_operands(rope);
      combine(latent, rope);
    }
#pragma unroll 1
    for (int t = 0; t + 1 < tiles; ++t) {
      float latent[16];
      float rope[16];
      bulk_barrier_wait(&sh.keys_full[(t + 1) % kKeys], static_cast<std::uint32_t>((t + 1) / kKeys) & 1u);
      issue_scores(latent, rope, sh.q, sh.keys[(t + 1) % kKeys]);
      run_tile(t, true, latent, rope);
      wgmma::fence_operands(latent);
      wgmma::fence_operands(rope);
      combine(latent, rope);
    }
    if (tiles > 0) {
      float unused[16];
      run_tile(tiles - 1, false, unused, unused);
    }
    warpgroup_math::publish_row_totals(row_sum, row_max, sh.row_sum, sh.row_max, r0, r1, c);
  } else {
    warpgroup_math::keep_registers<kValueRegisters>();
    // This warpgroup's half of tile t + kKeys - 1's decode before tile t's
    // P x V: as far ahead as the key tiles allow (the tile kKeys before is
    // released by the P x V of tile t - 1), so that the decode never waits on
    // warpgroup 0, which scores tile t + 1 before it publishes tile t's weights.
    constexpr int kAhead = kKeys - 1;
    Decoder d{warp};
    start_ring(d);
#pragma unroll 1
    for (int t = 0; t < kAhead && t < tiles; ++t) decode(d, t);
#pragma unroll 1
    for (int t = 0; t < tiles; ++t) {
      if (t + kAhead < tiles) decode(d, t + kAhead);
      const int buffer = t % kKeys;
      const int probs = t % 2;
      bulk_barrier_wait(&sh.keys_full[buffer], static_cast<std::uint32_t>(t / kKeys) & 1u);
      bulk_barrier_wait(&sh.probs_full[probs], static_cast<std::uint32_t>(t / 2) & 1u);
      const float alpha0 = sh.alpha[probs][r0];
      const float alpha1 = sh.alpha[probs][r1];
      if (__any_sync(0xFFFFFFFFu, alpha0 != 1.0f || alpha1 != 1.0f)) rescale(o, alpha0, alpha1);
      warpgroup_math::add_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs[probs], sh.keys[buffer], 1);
      __syncwarp();  // every lane's reads of the weights' tile state come before lane 0 releases it
      if (lane == 0) {
        barrier_arrive(&sh.keys_empty[buffer]);
        barrier_arrive(&sh.probs_empty[probs]);
      }
    }
  }
  asm volatile("bar.sync 1, 256;\n" ::: "memory");  // the math warpgroups: warpgroup 0's totals are in

  warpgroup_io::store_output<Codec, kPartial ? Epilogue::kWorkspace : Epilogue::kOutput>(
      p, StagedRows{}, o, sh.row_sum, sh.row_max, row, head0, split, warpgroup, r0, r1, c);
#else
  __trap();  // launched only where the sm_90a code exists (plan.cpp: kernel_for)
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mlakv::cuda::warpgroups
