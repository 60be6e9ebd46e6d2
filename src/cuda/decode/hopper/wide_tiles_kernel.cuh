// SPDX-License-Identifier: Apache-2.0
// The sparse MLA decode for blocks of 64 heads (or, for rows of up to 32
// heads, one block of 16 or 32 whose products are transposed:
// transposed_products.cuh) on Hopper (sm_90a) in tiles of 64 keys, for the
// FP8 records and the NVFP4 ones without a per-token scale (that one takes
// warpgroups_kernel.cuh's 32-key tiles, whose deeper pipeline
// hides its slower decode). Three warpgroups hand work to each other
// through mbarriers:
//   - eight decoder warps (warpgroup 2's four, kDecoderWarpTokens records a
//     tile each, and warpgroup 1's, kValueWarpTokens) load their records of
//     a tile straight from global memory (the next tile's asked of L2 ahead)
//     and decode them with the shared codecs into one of two bf16 key tiles
//     (the readers' bf16 values, or for NVFP4 their fragment decode in
//     io.cuh's order; zeros for an entry without a record); with
//     crossover (a row's two blocks of 64 heads in a cluster) they decode
//     this block's half of each tile and bulk-copy it into the peer's tile;
//   - math warpgroup 0 scores a tile (64 heads x 64 keys x 576 dims), runs its
//     online softmax in registers, publishes the bf16 probabilities and each
//     head's rescale factor, and adds P x V for output dims 0..255;
//   - math warpgroup 1 adds P x V for output dims 256..511 from the published
//     probabilities, between its decodes.
// The key tile serves both products: K-major rows of 576 dims for the scores
// and, read MN-major, the value rows (its first 512 dims) for P x V. With 64
// keys (the scores' wgmma N) the query tile is read from shared memory half
// as often per key as with 32; the query and two key tiles fill shared
// memory, so records are not staged there.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/decode/attention_result.cuh"
#include "cuda/decode/hopper/cluster_merge.cuh"
#include "cuda/decode/hopper/io.cuh"
#include "cuda/decode/hopper/math.cuh"
#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/hopper/transposed_products.cuh"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/ptx/bulk_copy.cuh"
#include "cuda/ptx/cluster.cuh"
#include "cuda/ptx/warp.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "dispatch/visit_codec.h"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda::wide_tiles {

using warpgroup_math::rescale;
using warpgroups::kProducerRegisters;
using warpgroups::kScoreRegisters;
using warpgroups::kValueRegisters;

/// Each of math warpgroup 0's warps' maxima of its keys by head (two tiles
/// alternating), then its part of each head's sum: the transposed products
/// spread a head's keys over the 4 warps.
template <int kBlockHeads>
struct WarpTotals {
  float max[2][4][kBlockHeads];
  float sum[4][kBlockHeads];
};
struct NoWarpTotals {};

/// Shared memory of a block of kBlockHeads heads (64, or 16 or 32 with the
/// transposed products).
template <int kBlockHeads>
struct Storage {
  static constexpr bool kTransposed = kBlockHeads < kHeads;
  alignas(1024) std::uint8_t q[kColumnBlocks * kBlockHeads * 128];
  alignas(1024) std::uint8_t keys[kKeyBuffers][kColumnBlocks * kKeyBlockBytes];
  alignas(1024) std::uint8_t probs[kBlockHeads * kTileTokens * 2];
  float alpha[kBlockHeads];  // each head's rescale factor of the published probabilities
  float row_sum[kBlockHeads];
  float row_max[kBlockHeads];  // log2 domain
  // Transposed: math warpgroup 0's warps' parts of each head's maximum and sum.
  std::conditional_t<kTransposed, WarpTotals<kBlockHeads>, NoWarpTotals> warps;
  alignas(16) std::uint8_t valid[kKeyBuffers][kTileTokens];  // token t of the key tile has a record
  // 8 decoder warp arrivals: the tile is decoded (with crossover, each
  // expecting the bytes its counterpart in the peer block stores here).
  std::uint64_t keys_full[kKeyBuffers];
  // 8 math warp arrivals: both products read it (16 with crossover: the peer's too).
  std::uint64_t keys_empty[kKeyBuffers];
  std::uint64_t probs_full;   // 4 arrivals of warpgroup 0: P and alpha are in
  std::uint64_t probs_empty;  // 4 arrivals of warpgroup 1: its P x V read them
  std::uint64_t totals_full;  // 4 arrivals of warpgroup 0: each head's sum and maximum are in
};

template <int kBlockHeads>
inline constexpr int kSharedBytes = static_cast<int>(sizeof(Storage<kBlockHeads>)) + 1024;  // + alignment slack

/// What an entry without a record decodes from (its keys are stored as zeros).
__device__ const uint4 kZeroRecord[kMaxRecordBytes / 16] = {};

/// Whether the codec's decode of kZeroRecord is already all zeros (for any
/// decode parameters), so the decoders store it without selecting zeros.
template <class Codec>
inline constexpr bool kZeroRecordDecodesToZero = requires {
  requires Codec::kZeroRecordDecodesToZero;
};

/// Where a crossover decoder puts its tile's records a second time: the
/// peer block's key tile and valid flags, and the barrier those copies
/// complete on (shared::cluster addresses of the same buffer).
struct PeerTile {
  std::uint32_t keys;
  std::uint32_t valid;
  std::uint32_t full;
};

/// A decoder warp's share of every tile: tokens first..first + count - 1.
/// Its lanes hold the record addresses of `32 / count` tiles at a time (a
/// batch), and the slots of the batch after, loaded a batch before they are
/// needed; a slot becomes an address (a division by the page size) once per
/// batch, not at every use.
struct DecoderShare {
  int first;
  int count;
  const std::uint8_t* records = nullptr;  // lane l: token first + l % count of the batch's tile l / count
  std::int64_t next_slots = -1;           // the slots of the same tokens of the next batch

  __device__ int batch_tiles() const { return kWarpSize / count; }
};

/// The slots of a batch of tiles from first_tile: lane l holds token
/// share.first + l % share.count of tile first_tile + l / share.count, or -1
/// past the block's range (and on lanes past the batch).
__device__ __forceinline__ std::int64_t slot_batch(const params::SparseDecodeParams& p, std::int64_t row,
                                                   std::int64_t begin, std::int64_t end, int first_tile,
                                                   const DecoderShare& share, int lane) {
  const int tile = lane / share.count;
  const std::int64_t entry =
      begin + static_cast<std::int64_t>(first_tile + tile) * kTileTokens + share.first + lane % share.count;
  return tile < share.batch_tiles() && entry < end ? __ldg(p.indices + row * p.indices_stride_row_elems + entry) : -1;
}

/// Lane `from`'s record address, or slot.
__device__ __forceinline__ const std::uint8_t* shuffle(const std::uint8_t* record, int from) {
  return reinterpret_cast<const std::uint8_t*>(
      __shfl_sync(0xFFFFFFFFu, static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(record)), from));
}
__device__ __forceinline__ std::int64_t shuffle(std::int64_t slot, int from) {
  return __shfl_sync(0xFFFFFFFFu, static_cast<long long>(slot), from);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Asks L2 for the 128-byte line at `at`.
__device__ __forceinline__ void prefetch_line(const std::uint8_t* at) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(at) : "memory");
}

/// Asks L2 for the lines of a warp's `count` records (one per lane, token
/// lane % count; null for none), every lane at once: lane l the lines
/// l / count, + 32 / count, ... of its record, the last one at its last byte
/// (a record that does not start on a line ends on one line more).
template <int kRecordBytes>
__device__ __forceinline__ void prefetch_records(const std::uint8_t* record, int count, int lane) {
  constexpr int kLines = (kRecordBytes + 127) / 128 + 1;
  if (record == nullptr) return;
  for (int k = lane / count; k < kLines; k += kWarpSize / count) {
    prefetch_line(record + (128 * k < kRecordBytes ? 128 * k : kRecordBytes - 1));
  }
}

/// Decodes kRoundTokens records, 8 lanes each, every lane into its token's
/// row `row` of `keys`: in step i, lane (g = lane / 8, j = lane % 8) decodes
/// latent group 8 i + j (dims 16 (8 i + j)..) of its token's `record`, so that
/// the 32 lanes' 16-byte stores spread evenly over the swizzle's 8 chunk
/// columns (4 stores each: the fewest for 512 bytes); and the lane decodes
/// RoPE pairs 4 j..4 j + 3, one 16-byte chunk of the row, stored at once (a
/// 4-byte store costs as many shared store instructions as a 16-byte one).
/// A lane whose token has no record decodes the zero record and stores
/// zeros.
template <class Codec>
__device__ __forceinline__ void decode_round(std::uint8_t* keys, const codec::DecodeParams& params,
                                             const std::uint8_t* record, bool valid, int row, int lane) {
  constexpr int kLanesPerToken = kWarpSize / kRoundTokens;
  constexpr int kSteps = codec::kLanes / kLanesPerToken;
  static_assert(kLanesPerToken == codec::kGroupStride && kSteps == codec::kStridedGroups &&
                    codec::kLatentPerLane == 16 && codec::kRopePerLane == 2,
                "the store offsets below; a lane's groups are decode_latent_keys_strided's; its RoPE chunk is 8 dims");
  const int j = lane & (kLanesPerToken - 1);  // non-negative: the loads' offsets fold into immediates
  // Step i's swizzled latent store offsets (wgmma::swizzled_offset) from step
  // 0's: its group 8 i + j starts 2 i column blocks on, in chunk 2 (j % 4) of
  // its block (the high 8 dims in the chunk after, offset ^ 16). The RoPE
  // pairs 4 j.. are chunk j of block 8.
  __builtin_assume(__isGlobal(record));  // global loads, which the shared stores below cannot alias
  const int row_at = row * 128;
  const int latent_at = (j / 4) * kKeyBlockBytes + row_at + ((2 * (j % 4)) ^ (row & 7)) * 16;
  const int rope_at = 8 * kKeyBlockBytes + row_at + (j ^ (row & 7)) * 16;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // The zero record's decode is the zeros to store, or else is replaced by them.
  constexpr bool kDecoded = kZeroRecordDecodesToZero<Codec>;
  // The steps' groups decoded at once (independent: all loads in flight),
  // as bf16 pairs: in fragment order for NVFP4, else in dim order.
  alignas(16) std::uint32_t latents[kSteps][8];
  decode_latent_keys_strided<Codec>(j, record, params, latents);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const std::uint32_t(&latent)[8] = latents[i];
    const int at[2] = {latent_at + 2 * i * kKeyBlockBytes, (latent_at ^ 16) + 2 * i * kKeyBlockBytes};
    const uint4 low = valid || kDecoded ? reinterpret_cast<const uint4*>(latent)[0] : zero;
    const uint4 high = valid || kDecoded ? reinterpret_cast<const uint4*>(latent)[1] : zero;
    *reinterpret_cast<uint4*>(keys + at[0]) = low;
    *reinterpret_cast<uint4*>(keys + at[1]) = high;
  }
  alignas(16) std::uint32_t rope[4];  // RoPE pairs 4 j.. as bf16 pairs
  codec::decode_rope_quad_bf16_bits<Codec>(j, record, params, rope);
  if constexpr (kFragmentDecode<Codec> && kKeyTileScale<Codec> != 1.0f) {
    // The RoPE dims carry the latent dims' factor too, so that one accumulator
    // holds the scores times it (exact for every value from 2^-118 in
    // magnitude; the scores undo it in f32).
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      rope[i] = codec::bits_of(
          __hmul2(codec::vec_from_bits<__nv_bfloat162>(rope[i]), __float2bfloat162_rn(kKeyTileScale<Codec>)));
    }
  }
  const uint4 pairs = valid || kDecoded ? *reinterpret_cast<const uint4*>(rope) : zero;
  *reinterpret_cast<uint4*>(keys + rope_at) = pairs;
}

/// Issues (and commits) the tile's scores, 64 heads x 64 keys.
__device__ __forceinline__ void issue_scores(float (&scores)[32], const std::uint8_t* q, const std::uint8_t* keys) {
  wgmma::fence_operands(scores);
  warpgroup_math::issue_over_query_dims<kQueryBlockBytes, kKeyBlockBytes>(
      q, keys, [&](int k, std::uint64_t a, std::uint64_t b) { wgmma::mma_64x64(scores, a, b, k > 0 ? 1 : 0); });
}

// The kernel's phases, each a role of a warpgroup: the decoders, the scores
// and softmax, P x V, the epilogue. They are inlined into the kernel body
// (which keeps the handshakes and the decode as lambdas) so that its sm_90a
// code is what it was with them written inline.

/// Warpgroup 2: each decoder warp's share of every tile (tokens from
/// first_token + 4 kValueTokens + kDecoderTokens warp), then the cluster's end.
template <Epilogue kEpilogue, bool kCrossover, int kValueTokens, int kDecoderTokens, class StartDecoder, class Decode,
          class MergeInCluster>
__device__ __forceinline__ void run_decoders(int first_token, int warp, int tiles, const StartDecoder& start_decoder,
                                             const Decode& decode, const MergeInCluster& merge_in_cluster) {
  warpgroup_math::keep_registers<kProducerRegisters>();
  DecoderShare d{first_token + 4 * kValueTokens + kDecoderTokens * warp, kDecoderTokens};
  start_decoder(d);
#pragma unroll 1
  for (int t = 0; t < tiles; ++t) decode.template operator()<kDecoderTokens / kRoundTokens>(d, t);
  if constexpr (kEpilogue == Epilogue::kCluster) {
    merge_in_cluster();
  } else if constexpr (kCrossover) {
    cluster::sync();  // the math warpgroups' last remote arrivals
  }
}

/// Math warpgroup 1 of a block of 64 heads: P x V for dims 256..511 of each
/// tile, between its decodes (value_warpgroup).
template <int kBlockHeads, class ValueWarpgroup>
__device__ __forceinline__ void add_values(Storage<kBlockHeads>& sh, float (&o)[128], int r0, int r1,
                                           const ValueWarpgroup& value_warpgroup) {
  warpgroup_math::keep_registers<kValueRegisters>();
  value_warpgroup([&](int buffer) {
    const float alpha0 = sh.alpha[r0];
    const float alpha1 = sh.alpha[r1];
    if (__any_sync(0xFFFFFFFFu, alpha0 != 1.0f || alpha1 != 1.0f)) rescale(o, alpha0, alpha1);
    warpgroup_math::add_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs, sh.keys[buffer], 1);
  });
}

/// The same for a block of 16 or 32 heads (transposed products).
template <int kBlockHeads, class ValueWarpgroup>
__device__ __forceinline__ void add_values_transposed(Storage<kBlockHeads>& sh, float (&o)[4][kBlockHeads / 2], int c,
                                                      const ValueWarpgroup& value_warpgroup) {
  namespace tp = transposed_products;
  constexpr int kN = kBlockHeads;
  constexpr int kI = tp::kThreadHeads<kN>;
  warpgroup_math::keep_registers<kValueRegisters>();
  value_warpgroup([&](int buffer) {
    float alpha[kI];
    bool moved = false;
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      alpha[i] = sh.alpha[tp::thread_head(i, c)];
      moved |= alpha[i] != 1.0f;
    }
    if (__any_sync(0xFFFFFFFFu, moved)) tp::rescale<kN>(o, alpha);
    tp::add_probs_times_values<kN>(o, sh.probs, sh.keys[buffer], 1);
  });
}

/// The epilogue of a block of 16 or 32 heads (transposed products): each
/// math warpgroup's output, merged in the cluster with the cluster merge.
template <class Codec, Epilogue kEpilogue, int kBlockHeads, class WaitTotals, class Staging, class MergeInCluster>
__device__ __forceinline__ void store_output_transposed(const params::SparseDecodeParams& p, Storage<kBlockHeads>& sh,
                                                        const float (&o)[4][kBlockHeads / 2], std::int64_t row,
                                                        std::int64_t head0, int split, int warpgroup, int warp,
                                                        int lane, const WaitTotals& wait_totals, const Staging& staging,
                                                        const MergeInCluster& merge_in_cluster) {
  namespace tp = transposed_products;
  constexpr int kN = kBlockHeads;
  wait_totals();
  if constexpr (kEpilogue == Epilogue::kCluster) {
    asm volatile("bar.sync 4, 256;\n" ::: "memory");  // both math warpgroups are done with the key tiles
    tp::store_output<Codec, kEpilogue, kN>(p, staging().view(), o, sh.row_sum, sh.row_max, row, head0, split, warpgroup,
                                           warp, lane);
    merge_in_cluster();
  } else {
    tp::store_output<Codec, kEpilogue, kN>(p, StagedRows{}, o, sh.row_sum, sh.row_max, row, head0, split, warpgroup,
                                           warp, lane);
  }
}

/// The epilogue of a block of 64 heads: each math warpgroup's output (merged
/// in the cluster with the cluster merge); with crossover no block leaves
/// while its peer may still arrive on its barriers.
template <class Codec, Epilogue kEpilogue, bool kCrossover, int kBlockHeads, class WaitTotals, class Staging,
          class MergeInCluster>
__device__ __forceinline__ void store_output(const params::SparseDecodeParams& p, Storage<kBlockHeads>& sh,
                                             const float (&o)[128], std::int64_t row, std::int64_t head0, int split,
                                             int warpgroup, int r0, int r1, int c, const WaitTotals& wait_totals,
                                             const Staging& staging, const MergeInCluster& merge_in_cluster) {
  constexpr bool kClusterMerge = kEpilogue == Epilogue::kCluster;
  wait_totals();
  if constexpr (kClusterMerge) {
    asm volatile("bar.sync 4, 256;\n" ::: "memory");  // both math warpgroups are done with the key tiles
    warpgroup_io::store_output<Codec, kEpilogue>(p, staging().view(), o, sh.row_sum, sh.row_max, row, head0, split,
                                                 warpgroup, r0, r1, c);
    merge_in_cluster();
  } else {
    warpgroup_io::store_output<Codec, kEpilogue>(p, StagedRows{}, o, sh.row_sum, sh.row_max, row, head0, split,
                                                 warpgroup, r0, r1, c);
    if constexpr (kCrossover) cluster::sync();  // no block leaves while its peer may still arrive on its barriers
  }
}

/// Math warpgroup 0 of a block of 64 heads: each tile's scores (64 heads x
/// 64 keys x 576 dims), its online softmax in registers, the weights and each
/// head's rescale factor published, its P x V for dims 0..255; then each
/// head's totals. `keys` is sh.keys as the kernel addresses it (the key
/// tiles' address then folds as it did with this loop inline).
template <class Codec, int kBlockHeads, class WaitKeysFull, class ReleaseKeys, class PublishTotals>
__device__ __forceinline__ void score_tiles(const params::SparseDecodeParams& p, Storage<kBlockHeads>& sh,
                                            std::uint8_t (*keys)[kColumnBlocks * kKeyBlockBytes], int tiles,
                                            bool arrives, float (&o)[128], float (&row_max)[2], float (&row_sum)[2],
                                            int r0, int r1, int c, const WaitKeysFull& wait_keys_full,
                                            const ReleaseKeys& release_keys, const PublishTotals& publish_totals) {
  constexpr int kChunks = kTileTokens / 8;  // 8-key column chunks of the scores
  warpgroup_math::keep_registers<kScoreRegisters>();
  // Scores in the log2 domain, the key tile's factor undone (a power of two: exact).
  const float score_scale = p.sm_scale * 1.4426950408889634f * (1.0f / kKeyTileScale<Codec>);
#pragma unroll 1
  for (int t = 0; t < tiles; ++t) {
    const int buffer = t % kKeyBuffers;
    const std::uint32_t phase = static_cast<std::uint32_t>(t) & 1u;
    float s[32];
    wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
    issue_scores(s, sh.q, keys[buffer]);
    const std::uint32_t valid = warpgroup_math::valid_key_bits<kChunks>(sh.valid[buffer], c);
    wgmma::wait<0>();
    wgmma::fence_operands(s);
    float tile_max[2];
    warpgroup_math::mask_scores<kChunks>(s, valid, score_scale, tile_max);
    // The weights go straight to shared memory (no register copy beside
    // the output accumulators) once warpgroup 1 is done with tile t - 1's.
    bulk_barrier_wait(&sh.probs_empty, phase ^ 1u);
    float alpha[2];
    std::uint8_t* const probs = sh.probs;  // captured by value: ptxas then schedules as for the loop inline
    warpgroup_math::softmax_weights<kChunks>(
        s, tile_max, row_max, row_sum, alpha, [probs, r0, r1, c](int h, int i, std::uint32_t bits) {
          *reinterpret_cast<std::uint32_t*>(probs +
                                            wgmma::swizzled_offset(h == 0 ? r0 : r1, 8 * i + 2 * c, kProbBytes)) = bits;
        });
    if (c == 0) {
      sh.alpha[r0] = alpha[0];
      sh.alpha[r1] = alpha[1];
    }
    bulk_copy_fence();  // the probabilities' ordinary stores before the wgmma read them
    __syncwarp();       // every lane's stores (and fences) before lane 0 publishes them
    if (arrives) barrier_arrive(&sh.probs_full);
    if (__any_sync(0xFFFFFFFFu, alpha[0] != 1.0f || alpha[1] != 1.0f)) rescale(o, alpha[0], alpha[1]);
    bulk_barrier_wait(&sh.probs_full, phase);  // every warp's probabilities are in
    warpgroup_math::add_probs_times_values<kTileTokens, kKeyBlockBytes>(o, sh.probs, keys[buffer], 0);
    __syncwarp();  // every lane's reads of the tile come before lane 0 releases it
    if (arrives) release_keys(buffer);
  }
  warpgroup_math::publish_row_totals(row_sum, row_max, sh.row_sum, sh.row_max, r0, r1, c);
  publish_totals();
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

template <class Codec, Epilogue kEpilogue, bool kCrossover, int kBlockHeads>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_mla_decode_wide_tiles_kernel(const params::SparseDecodeParams p, int units_per_split) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool kPartial = kEpilogue == Epilogue::kWorkspace;
  constexpr bool kClusterMerge = kEpilogue == Epilogue::kCluster;
  constexpr int kRecordBytes = Codec::Spec::kRecordBytes;
  static_assert(kFits<kRecordBytes>, "records the decoders load straight from global memory");
  static_assert(kTileTokens == 64, "a tile is one unit of the split plan");
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  using Shared = Storage<kBlockHeads>;
  constexpr bool kTransposed = Shared::kTransposed;
  static_assert(!kTransposed || !kCrossover, "a row of at most 32 heads is one block");
  static_assert(sizeof(cluster_merge::Staging<kBlockHeads>) <= sizeof(Shared::keys),
                "the staging reuses the key tiles");
  static_assert(!kClusterMerge || !kCrossover, "a cluster is either a crossover pair or a row's splits");
  auto& sh = *reinterpret_cast<Shared*>(smem_raw + (1024u - shared_address(smem_raw) % 1024u) % 1024u);

  if constexpr (kPartial) asm volatile("griddepcontrol.launch_dependents;");  // the merge may start its blocks
  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / 128;
  const int warp = (tid % 128) / kWarpSize;  // within the warpgroup
  const int lane = tid % kWarpSize;
  const BlockRange block = block_range<kBlockHeads>(p, units_per_split);
  const auto [row, head0, split, begin, end] = block;
  const int tiles = block.tiles<kTileTokens>();
  constexpr int kValueTokens = kValueWarpTokens<kCrossover, kTransposed>;
  constexpr int kDecoderTokens = kDecoderWarpTokens<kCrossover, kTransposed>;
  constexpr int kDecoderWarps = kValueTokens > 0 ? 8 : 4;  // warpgroup 2's, and warpgroup 1's if they decode
  // Arrivals a warp makes on a handshake barrier: its lane 0's, after a
  // __syncwarp; with MLAKV_RACECHECK_ARRIVALS every lane's, which
  // compute-sanitizer's racecheck models (it does not model __syncwarp);
  // with crossover a math lane's remote arrival too, and of a decoder warp's
  // lanes only lane 0 announces the peer's bytes.
#if defined(MLAKV_RACECHECK_ARRIVALS)
  constexpr std::uint32_t kWarpArrivals = kWarpSize;
#else
  constexpr std::uint32_t kWarpArrivals = 1;
#endif
  const bool arrives = kWarpArrivals > 1 || lane == 0;
  // Warpgroup 0's publication of each head's totals (sh.row_sum, sh.row_max)
  // to both math warpgroups' epilogues: an mbarrier, as the weights' are.
  const auto publish_totals = [&] {
    __syncwarp();  // every lane's stores before lane 0 arrives
    if (arrives) barrier_arrive(&sh.totals_full);
  };
  const auto wait_totals = [&] { bulk_barrier_wait(&sh.totals_full, 0); };
  // With the cluster merge: the block's partial result is staged in the key
  // tiles (free once both math warpgroups have passed named barrier 4), and
  // every thread of the block, decoders too, joins the cluster barrier after
  // which the math warpgroups read the blocks' staging, and the one after
  // which none is read any more (no block leaves before: its shared memory
  // would go). The decoders do not merge: their register budget (setmaxnreg)
  // is the decode's.
  const auto staging = [&]() -> cluster_merge::Staging<kBlockHeads>& {
    return *reinterpret_cast<cluster_merge::Staging<kBlockHeads>*>(sh.keys);
  };
  const auto merge_in_cluster = [&] {
    cluster::sync();  // every block's partial result is staged
    if (warpgroup < 2) {
      cluster_merge::merge<kBlockHeads>(p, staging(), block.row, block.head0, static_cast<int>(gridDim.y), tid, 256);
    }
    cluster::sync();  // no block reads another's staging any more
  };
  // With crossover, block `rank` of the cluster decodes tokens 32 rank.. of each tile.
  const std::uint32_t rank = kCrossover ? cluster::rank() : 0u;
  const std::uint32_t peer = rank ^ 1u;

  if (tid == 0) {
    for (int b = 0; b < kKeyBuffers; ++b) {
      barrier_init(&sh.keys_full[b], kDecoderWarps * kWarpArrivals);           // one arrival per decoder warp
      barrier_init(&sh.keys_empty[b], (kCrossover ? 16 : 8) * kWarpArrivals);  // one per math warp (of both blocks)
    }
    barrier_init(&sh.probs_full, 4 * kWarpArrivals);
    barrier_init(&sh.probs_empty, 4 * kWarpArrivals);
    barrier_init(&sh.totals_full, 4 * kWarpArrivals);
    bulk_barrier_init_fence();
  }
  // A block of 16 heads has warpgroup 0 alone load its query (18 KB, which
  // only its scores read) while the decoders already load their first tile:
  // 2-4 % faster at R <= 16, within 1.5 % at R = 64 / 128 (H200,
  // bench/results/h200-fa88aab-query-loads.txt).
  // At 64 heads (72 KB, 36 loads a thread) that made warpgroup 0 later than
  // the first tile (1-6 % slower), so there every thread loads it first.
  constexpr bool kQueryByWarpgroup0 = kBlockHeads <= 16;
  if constexpr (!kQueryByWarpgroup0) {
    warpgroup_io::load_query<Codec, kThreads, kBlockHeads>(sh.q, p, row, head0, tid);
    bulk_copy_fence();  // the query's ordinary stores before the wgmma (another proxy) read them
  }
  if constexpr (kCrossover) {
    cluster::sync();  // both blocks' barriers are initialized before either copies into the other
  } else {
    __syncthreads();
  }
  if constexpr (kQueryByWarpgroup0) {
    if (warpgroup == 0) {
      warpgroup_io::load_query<Codec, 128, kBlockHeads>(sh.q, p, row, head0, tid);
      bulk_copy_fence();                                // the query's ordinary stores before the wgmma read them
      asm volatile("bar.sync 3, 128;\n" ::: "memory");  // every thread's part of the query is in
    }
  }
  // A math warp's release of a key tile (lane 0, after the warp's reads).
  const auto release_keys = [&](int buffer) {
    barrier_arrive(&sh.keys_empty[buffer]);
    if constexpr (kCrossover) cluster::arrive(cluster::peer_address(&sh.keys_empty[buffer], peer));
  };
  // Waits for a decoded key tile. With crossover, the peer's stores into it
  // (st.async, completing on keys_full) are ordinary-proxy writes: the proxy
  // fence orders them before the wgmma's reads.
  const auto wait_keys_full = [&](int buffer, std::uint32_t parity) {
    bulk_barrier_wait(&sh.keys_full[buffer], parity);
    if constexpr (kCrossover) bulk_copy_fence();
  };

  // The decoders: warpgroup 1's warp w decodes kValueWarpTokens tokens from
  // 32 rank + kValueWarpTokens w of each tile, warpgroup 2's warp w the
  // kDecoderWarpTokens from 32 rank + 4 kValueWarpTokens + kDecoderWarpTokens w.
  const int first_token = static_cast<int>(rank) * kBlockTokens<kCrossover>;
  codec::DecodeParams params = p.decode;
  if (warpgroup != 0 && p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
  // This lane's record (token lane % d.count) of tile `tile`, one of the
  // batch of tile t or the next.
  const auto record_ahead = [&](const DecoderShare& d, int t, int tile) {
    const int batch_tiles = d.batch_tiles();
    const int from = (tile % batch_tiles) * d.count + lane % d.count;
    return tile / batch_tiles != t / batch_tiles ? params::record_or_null(p.cache, shuffle(d.next_slots, from))
                                                 : shuffle(d.records, from);
  };
  const auto ask_l2 = [&](const DecoderShare& d, int t, int tile) {
    prefetch_records<kRecordBytes>(record_ahead(d, t, tile), d.count, lane);
  };
  const auto start_decoder = [&](DecoderShare& d) {
    d.records = params::record_or_null(p.cache, slot_batch(p, row, begin, end, 0, d, lane));
    d.next_slots = slot_batch(p, row, begin, end, d.batch_tiles(), d, lane);
    if (tiles > 0) ask_l2(d, 0, 0);
  };
  // Decodes a decoder warp's tokens of tile t into its key tile (and the
  // peer's), having asked L2 for its records of tile t + 1.
  const auto decode = [&]<int kRounds>(DecoderShare& d, int t) {
    static_assert(kRounds * kRoundTokens <= 16, "a lane's rounds of records");
    const int buffer = t % kKeyBuffers;
    const int batch_tiles = d.batch_tiles();
    if (t % batch_tiles == 0 && t > 0) {  // the next batch's slots were loaded a batch ago
      d.records = params::record_or_null(p.cache, d.next_slots);
      d.next_slots = slot_batch(p, row, begin, end, t + batch_tiles, d, lane);
    }
    if (t + 1 < tiles) ask_l2(d, t, t + 1);
    const int first_lane = (t % batch_tiles) * d.count;  // this tile's lanes of the batch
    // This lane's token of round r (of the warp's share).
    const auto round_token = [&](int r) { return kRoundTokens * r + lane / (kWarpSize / kRoundTokens); };
    const bool mine = shuffle(d.records, first_lane + lane % d.count) != nullptr;
    [[maybe_unused]] PeerTile to_peer{};
    if constexpr (kCrossover) {
      to_peer = {cluster::peer_address(sh.keys[buffer], peer), cluster::peer_address(sh.valid[buffer], peer),
                 cluster::peer_address(&sh.keys_full[buffer], peer)};
    }
    // Round r's record of this lane's token (the zero record for an entry without one).
    struct RoundRecord {
      const std::uint8_t* record;
      bool valid;
    };
    const auto locate = [&](int r) {
      const std::uint8_t* record = shuffle(d.records, first_lane + round_token(r));
      return RoundRecord{record != nullptr ? record : reinterpret_cast<const std::uint8_t*>(kZeroRecord),
                         record != nullptr};
    };
    const auto round = [&](int r, const RoundRecord& at) {
      decode_round<Codec>(sh.keys[buffer], params, at.record, at.valid, d.first + round_token(r), lane);
    };
    const std::uint32_t empty_parity = (static_cast<std::uint32_t>(t / kKeyBuffers) & 1u) ^ 1u;
    // Every round's records located before the wait, and their loads all in
    // flight at once after it.
    RoundRecord at[kRounds];
#pragma unroll
    for (int r = 0; r < kRounds; ++r) at[r] = locate(r);
    bulk_barrier_wait(&sh.keys_empty[buffer], empty_parity);
#pragma unroll
    for (int r = 0; r < kRounds; ++r) round(r, at[r]);
    // The valid flags, a word of 4 tokens' bytes a lane.
    const std::uint32_t has = __ballot_sync(0xFFFFFFFFu, lane < d.count && mine);
    if (lane < d.count / 4) {
      const std::uint32_t bits = has >> (4 * lane) & 0xFu;
      const std::uint32_t word = (bits & 1u) | (bits & 2u) << 7 | (bits & 4u) << 14 | (bits & 8u) << 21;
      *reinterpret_cast<std::uint32_t*>(&sh.valid[buffer][d.first + 4 * lane]) = word;
      if constexpr (kCrossover) cluster::store_async(to_peer.valid + d.first + 4 * lane, word, to_peer.full);
    }
    bulk_copy_fence();  // the key tile's stores before the wgmma (and with crossover the copies) read them
    __syncwarp();       // every lane's stores (and their fences) come before lane 0 publishes the tile
    if constexpr (kCrossover) {
      // The warp's rows of each column block are d.count whole rows, one
      // span of bytes: one bulk copy a block (9 a warp, where storing each
      // 16-byte chunk a second time took 72 remote stores a lane).
      if (lane < kColumnBlocks) {
        const std::uint32_t at = static_cast<std::uint32_t>(lane * kKeyBlockBytes + d.first * 128);
        cluster::copy_to_peer(to_peer.keys + at, sh.keys[buffer] + at, static_cast<std::uint32_t>(d.count * 128),
                              to_peer.full);
      }
    }
    if (arrives) {
      if (kCrossover && lane == 0) {
        // The counterpart warp of the peer copies as many bytes here.
        bulk_barrier_expect(&sh.keys_full[buffer], static_cast<std::uint32_t>(d.count * (kKeyRowBytes + 1)));
      } else {
        barrier_arrive(&sh.keys_full[buffer]);
      }
    }
  };
  if (warpgroup == 2) {
    run_decoders<kEpilogue, kCrossover, kValueTokens, kDecoderTokens>(first_token, warp, tiles, start_decoder, decode,
                                                                      merge_in_cluster);
    return;
  }

  // Math warpgroup 1: its part of tile t + 1's decode before tile t's P x V
  // (the key tile it fills was released by both P x V of tile t - 1), then
  // add_values(buffer) once the tile and its weights are in; it releases
  // both.
  const auto value_warpgroup = [&](auto&& add_values) {
    DecoderShare d{first_token + kValueTokens * warp, kValueTokens};
    if constexpr (kValueTokens > 0) {
      start_decoder(d);
      if (tiles > 0) decode.template operator()<kValueTokens / kRoundTokens>(d, 0);
    }
#pragma unroll 1
    for (int t = 0; t < tiles; ++t) {
      if constexpr (kValueTokens > 0) {
        if (t + 1 < tiles) decode.template operator()<kValueTokens / kRoundTokens>(d, t + 1);
      }
      const int buffer = t % kKeyBuffers;
      wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
      bulk_barrier_wait(&sh.probs_full, static_cast<std::uint32_t>(t) & 1u);
      add_values(buffer);
      __syncwarp();  // every lane's reads of the tile and the weights come before lane 0 releases them
      if (arrives) {
        release_keys(buffer);
        barrier_arrive(&sh.probs_empty);
      }
    }
  };
  const int g = lane / 4;  // accumulator rows 16 warp + g and + 8, columns 2 c, 2 c + 1 of each 8
  const int c = lane % 4;
  if constexpr (kTransposed) {
    namespace tp = transposed_products;
    constexpr int kN = kBlockHeads;
    constexpr int kI = tp::kThreadHeads<kN>;  // heads a thread holds: tp::thread_head(i, c)
    float o[4][kN / 2];                       // O^T: dims 256 warpgroup + 64 m + rows, x heads
#pragma unroll
    for (int m = 0; m < 4; ++m) {
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) o[m][i] = 0.0f;
    }
    if (warpgroup == 0) {
      warpgroup_math::keep_registers<kScoreRegisters>();
      const float score_scale = p.sm_scale * 1.4426950408889634f * (1.0f / kKeyTileScale<Codec>);
      float row_max[kI];
      float row_sum[kI];  // this thread's keys only, summed over the warpgroup at the end
#pragma unroll
      for (int i = 0; i < kI; ++i) {
        row_max[i] = -INFINITY;
        row_sum[i] = 0.0f;
      }
#pragma unroll 1
      for (int t = 0; t < tiles; ++t) {
        const int buffer = t % kKeyBuffers;
        const std::uint32_t phase = static_cast<std::uint32_t>(t) & 1u;
        float s[kN / 2];
        wait_keys_full(buffer, static_cast<std::uint32_t>(t / kKeyBuffers) & 1u);
        tp::issue_scores<kN>(s, sh.q, sh.keys[buffer]);
        const bool ok[2] = {sh.valid[buffer][16 * warp + g] != 0, sh.valid[buffer][16 * warp + g + 8] != 0};
        wgmma::wait<0>();
        wgmma::fence_operands(s);
        float part[kI];
        tp::mask_scores<kN>(s, ok, score_scale, part);
        // Each head's tile maximum from the 4 warps' (two buffers: a warp
        // writes tile t + 2's after every warp has passed tile t + 1's barrier).
        if (g == 0) {
#pragma unroll
          for (int i = 0; i < kI; ++i) sh.warps.max[t & 1][warp][tp::thread_head(i, c)] = part[i];
        }
        asm volatile("bar.sync 2, 128;\n" ::: "memory");  // warpgroup 0's maxima are in
        float tile_max[kI];
#pragma unroll
        for (int i = 0; i < kI; ++i) {
          const int head = tp::thread_head(i, c);
          tile_max[i] = fmaxf(fmaxf(sh.warps.max[t & 1][0][head], sh.warps.max[t & 1][1][head]),
                              fmaxf(sh.warps.max[t & 1][2][head], sh.warps.max[t & 1][3][head]));
        }
        float alpha[kI];
        tp::softmax_weights<kN>(s, tile_max, row_max, row_sum, alpha);
        bulk_barrier_wait(&sh.probs_empty, phase ^ 1u);  // warpgroup 1 is done with tile t - 1's
        tp::store_weights<kN>(sh.probs, s, warp, lane);
        if (warp == 0 && g == 0) {
#pragma unroll
          for (int i = 0; i < kI; ++i) sh.alpha[tp::thread_head(i, c)] = alpha[i];
        }
        bulk_copy_fence();  // the weights' stores before the wgmma read them
        __syncwarp();
        if (arrives) barrier_arrive(&sh.probs_full);
        bool moved = false;
#pragma unroll
        for (int i = 0; i < kI; ++i) moved |= alpha[i] != 1.0f;
        if (__any_sync(0xFFFFFFFFu, moved)) tp::rescale<kN>(o, alpha);
        bulk_barrier_wait(&sh.probs_full, phase);  // every warp's weights are in
        tp::add_probs_times_values<kN>(o, sh.probs, sh.keys[buffer], 0);
        __syncwarp();  // every lane's reads of the tile come before lane 0 releases it
        if (arrives) release_keys(buffer);
      }
      // Each head's sum: each warp's part (over its keys) joined within this
      // warpgroup, then published with the heads' reference maxima (the same
      // in every warp) by warp 0 for the epilogue, as the maxima of a tile are.
#pragma unroll
      for (int i = 0; i < kI; ++i) {
        float sum = row_sum[i];
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 4);
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 8);
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 16);
        if (g == 0) sh.warps.sum[warp][tp::thread_head(i, c)] = sum;
      }
      asm volatile("bar.sync 2, 128;\n" ::: "memory");  // warpgroup 0's parts are in
      if (warp == 0 && g == 0) {
#pragma unroll
        for (int i = 0; i < kI; ++i) {
          const int head = tp::thread_head(i, c);
          sh.row_sum[head] =
              sh.warps.sum[0][head] + sh.warps.sum[1][head] + sh.warps.sum[2][head] + sh.warps.sum[3][head];
          sh.row_max[head] = row_max[i];
        }
      }
      publish_totals();
    } else {
      add_values_transposed<kBlockHeads>(sh, o, c, value_warpgroup);
    }
    store_output_transposed<Codec, kEpilogue, kBlockHeads>(p, sh, o, row, head0, split, warpgroup, warp, lane,
                                                           wait_totals, staging, merge_in_cluster);
    return;
  } else {
    const int r0 = 16 * warp + g;
    const int r1 = r0 + 8;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;

    float row_max[2] = {-INFINITY, -INFINITY};  // the online softmax of rows r0, r1 (warpgroup 0)
    float row_sum[2] = {0.0f, 0.0f};            // this thread's columns only, summed over the quad at the end
    if (warpgroup == 0) {
      score_tiles<Codec, kBlockHeads>(p, sh, sh.keys, tiles, arrives, o, row_max, row_sum, r0, r1, c, wait_keys_full,
                                      release_keys, publish_totals);
    } else {
      add_values<kBlockHeads>(sh, o, r0, r1, value_warpgroup);
    }
    store_output<Codec, kEpilogue, kCrossover, kBlockHeads>(p, sh, o, row, head0, split, warpgroup, r0, r1, c,
                                                            wait_totals, staging, merge_in_cluster);
  }
#else
  __trap();  // launched only where the sm_90a code exists (plan.cpp: kernel_for)
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

}  // namespace mlakv::cuda::wide_tiles
