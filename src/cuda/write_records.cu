// SPDX-License-Identifier: Apache-2.0
// CUDA writer: one warp per token. Lane l loads its 16 latent and 2 RoPE
// inputs, the warp combines amaxes (shuffles within a tile, one reduction
// across the warp), every lane encodes its part of the record with the shared
// codec, into shared memory from which the warp stores the record with
// 16-byte stores (cache base and strides are 16-byte aligned), or, for the
// records of whole aligned runs, straight to the cache.
#include <type_traits>

#include "cuda/cuda_backend.h"
#include "cuda/ptx/warp.cuh"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda {
namespace {

// Four warps (tokens) per block: an SM frees a block's slot only when all its
// warps are done, and smaller blocks waste less of it on the block's last
// warp; decode launches of a few tokens spread over more SMs. (The layouts
// timed against it: docs/kernel_history.md.)
constexpr int kWarpsPerBlock = 4;

// Lane l's 16 latent values are bytes [32l, 32l + 32) of the row: two 16-byte
// loads when the row allows it, else eight 4-byte loads (rows are only
// guaranteed 4-byte aligned). Returns a word that depends on every load, for
// once_arrived.
template <int kLoadBytes>
__device__ __forceinline__ std::uint32_t load_lane(const std::uint8_t* kv_c_row, const std::uint8_t* k_pe_row, int lane,
                                                   codec::LaneInputs& in) {
  constexpr int kLatentBytes = codec::kLatentPerLane * 2;
  constexpr int kRopeBytes = codec::kRopePerLane * 2;
  static_assert(kRopeBytes == 4, "two RoPE values are one 32-bit load");
  const std::uint8_t* src = kv_c_row + lane * kLatentBytes;
  const unsigned r = __ldg(reinterpret_cast<const unsigned*>(k_pe_row + lane * kRopeBytes));
  memcpy(in.k_pe, &r, 4);
  std::uint32_t every_load = r;
  if constexpr (kLoadBytes == 16) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(src));
    const uint4 b = __ldg(reinterpret_cast<const uint4*>(src) + 1);
    memcpy(in.kv_c, &a, 16);
    memcpy(in.kv_c + 8, &b, 16);
    every_load ^= a.x ^ b.x;
  } else {
#pragma unroll
    for (int i = 0; i < kLatentBytes / 4; ++i) {
      const unsigned w = __ldg(reinterpret_cast<const unsigned*>(src) + i);
      memcpy(in.kv_c + 2 * i, &w, 4);
      every_load ^= w;
    }
  }
  return every_load;
}

// Records whose lanes write whole aligned runs (the 16-bit copies, one E4M3
// code per value) are stored from registers: no staging round trip, which
// shortens a decode step's single-token launch. The others write scattered
// bytes and scale fields, which cost more as global stores than the staging.
// One warp per token, one launch per token range: persistent and grid-stride
// grids and wider per-token layouts were timed slower or mixed
// (docs/kernel_history.md).
template <class Codec>
constexpr bool kStoreInPlace = requires {
  Codec::kElementDtype;
}
|| std::is_same_v<Codec, codec::CodecFp8E4m3>;

// Warps an SM must hold at once, as blocks (the launch bounds' second
// argument). The writers wait mostly on their loads (ncu: long scoreboard),
// so warps in flight count: launches of many tokens take a variant capped for
// 56 warps, small ones (one short wave whose time is one warp's chain) the
// uncapped one, which a tighter register budget would slow. fp8_ds_mla and
// pts spill under the cap, so they and the 16-bit formats ask for the 48
// warps they fit anyway. (Measurements: docs/kernel_history.md.)
constexpr int kFitBlocksPerSm = 48 / kWarpsPerBlock;
constexpr int kManyTokensBlocksPerSm = 56 / kWarpsPerBlock;
constexpr std::int64_t kManyTokens = 16384;  // well past one wave of 132 SMs x 48 warps

// What the launch bounds ask for on the architecture being compiled: an
// sm_120 SM holds 1,536 threads (48 warps), so asking it for 56 would only be
// ignored (with a ptxas warning).
constexpr int blocks_per_sm_here(int wanted) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  constexpr int kMost = 1536 / (kWarpsPerBlock * kWarpSize);
  return wanted < kMost ? wanted : kMost;
#else
  return wanted;
#endif
}

template <class Codec>
constexpr bool kCapForManyTokens =
    std::is_same_v<Codec, codec::CodecNvfp4DsMla> || std::is_same_v<Codec, codec::CodecNvfp4DsMlaFp8Rope> ||
    std::is_same_v<Codec, codec::CodecNvfp4Fp8DsMla>;

template <class Codec, codec::InputDtype kDtype, int kLoadBytes, int kMinBlocks>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize, blocks_per_sm_here(kMinBlocks))
    write_records_kernel(const params::WriteParams p) {
  constexpr int kRecordBytes = Codec::Spec::kRecordBytes;
  __shared__ SmemRecord<kRecordBytes> smem_records[kWarpsPerBlock];
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);  // unsigned: a shift, not a signed division
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::int64_t token = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (token >= p.num_tokens) return;

  // Issue the slot, input and scale loads together: none depends on another.
  const std::int64_t slot = __ldg(p.slot_mapping + token);
  codec::LaneInputs in;
  const std::uint32_t arrived =
      load_lane<kLoadBytes>(p.kv_c + token * p.kv_c_stride_bytes, p.k_pe + token * p.k_pe_stride_bytes, lane, in);
  codec::EncodeParams params = p.encode;
  if (p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
  if (!once_arrived(params::slot_in_range(p.cache, slot), arrived)) return;  // warp-uniform

  codec::LaneAmax amax = Codec::template lane_amax<kDtype>(in);
  if constexpr (Codec::kLatentAmaxLanes == kWarpSize) {
    amax.latent = warp_amax(amax.latent);
  } else if constexpr (Codec::kLatentAmaxLanes > 1) {
    amax.latent = warp_group_max<Codec::kLatentAmaxLanes>(amax.latent);
  }
  if constexpr (Codec::kRopeAmax) amax.rope = warp_amax(amax.rope);

  if constexpr (kStoreInPlace<Codec>) {
    Codec::template encode_lane<kDtype>(lane, amax, in, params, params::record_address(p.cache, slot));
  } else {
    std::uint8_t* smem_record = smem_records[warp].bytes;
    Codec::template encode_lane<kDtype>(lane, amax, in, params, smem_record);
    __syncwarp();
    warp_copy16<kRecordBytes>(params::record_address(p.cache, slot), smem_record, lane);
  }
}

template <class Codec, codec::InputDtype kDtype, int kMinBlocks>
cudaError_t launch_kernel(const params::WriteParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const bool rows16 = reinterpret_cast<std::uintptr_t>(p.kv_c) % 16 == 0 && p.kv_c_stride_bytes % 16 == 0;
  if (rows16) {
    write_records_kernel<Codec, kDtype, 16, kMinBlocks><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  } else {
    write_records_kernel<Codec, kDtype, 4, kMinBlocks><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

template <class Codec, codec::InputDtype kDtype>
cudaError_t launch(const params::WriteParams& p, cudaStream_t stream) {
  if constexpr (kCapForManyTokens<Codec>) {
    if (p.num_tokens >= kManyTokens) return launch_kernel<Codec, kDtype, kManyTokensBlocksPerSm>(p, stream);
  }
  return launch_kernel<Codec, kDtype, kFitBlocksPerSm>(p, stream);
}

}  // namespace

cudaError_t write_records(const params::WriteParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  if (codec::is_part_coded(p.format)) return write_pages(p, stream);
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    // A 16-bit record only ever receives its own dtype (validated), so only that variant is built.
    if constexpr (requires { Codec::kElementDtype; }) {
      return launch<Codec, Codec::kElementDtype>(p, stream);
    } else {
      return p.dtype == codec::InputDtype::kBf16 ? launch<Codec, codec::InputDtype::kBf16>(p, stream)
                                                 : launch<Codec, codec::InputDtype::kFp16>(p, stream);
    }
  });
}

}  // namespace mlakv::cuda
