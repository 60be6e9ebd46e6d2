// SPDX-License-Identifier: Apache-2.0
// CUDA reader: one warp per group of output rows. The warp loads each row's record into
// shared memory with 16-byte loads, each lane decodes its 16 latent and 2 RoPE
// values with the shared codec and stores them as float32 or bf16. Rows
// without a valid slot (-1, past capacity, past a sequence's length) are zeros.
#include "cuda/cuda_backend.h"
#include "cuda/ptx/warp.cuh"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda {
namespace {

// Four warps per block, as the writers (docs/kernel_history.md).
constexpr int kWarpsPerBlock = 4;

template <class Out>
__device__ __forceinline__ Out to_out(float v) {
  if constexpr (sizeof(Out) == sizeof(float)) {
    return codec::canonical_nan(v);
  } else {
    return codec::encode_bf16(v);
  }
}

// Stores n values; vector stores when the destination allows 16-byte (latent) access.
template <class Out, int kN, bool kVector>
__device__ __forceinline__ void store_values(Out* dst, const float* values) {
  Out packed[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) packed[i] = to_out<Out>(values[i]);
  if constexpr (kVector && (kN * sizeof(Out)) % 16 == 0) {
#pragma unroll
    for (int c = 0; c < static_cast<int>(kN * sizeof(Out) / 16); ++c) {
      uint4 v;
      memcpy(&v, reinterpret_cast<const char*>(packed) + 16 * c, 16);
      reinterpret_cast<uint4*>(dst)[c] = v;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) dst[i] = packed[i];
  }
}

// Each warp decodes kRowsPerWarp rows, loading all their records before
// decoding any, so more bytes are in flight per warp (the record load depends
// on the slot load, which would otherwise leave the warp waiting twice).
// (Three and four rows per warp measured slower: docs/kernel_history.md.)
constexpr int kRowsPerWarp = 2;

// kStaged: a bf16 [N, 576] row (k_pe_out right after kv_c_out, 16-byte aligned
// rows) is assembled in shared memory and stored as whole 16-byte chunks, so
// every store instruction writes contiguous sectors.
template <class Codec, class Out, bool kVector, bool kStaged>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize) gather_records_kernel(const params::GatherParams p) {
  constexpr int kRecordBytes = Codec::Spec::kRecordBytes;
  constexpr int kRowBytes = (codec::kLatentDim + codec::kRopeDim) * static_cast<int>(sizeof(Out));
  __shared__ SmemRecord<kStaged ? kRowBytes : 16> smem_rows[kWarpsPerBlock];
  constexpr int kChunks = kRecordBytes / 16;                             // 16-byte pieces of a record
  constexpr int kChunksPerLane = (kChunks + kWarpSize - 1) / kWarpSize;  // 1..3
  __shared__ SmemRecord<kRecordBytes> smem_records[kWarpsPerBlock][kRowsPerWarp];
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);  // unsigned: a shift, not a signed division
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::int64_t first_row = (static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp) * kRowsPerWarp;
  if (first_row >= p.num_rows) return;

  // Slots first, then every record load of every row with no branch between
  // them (an invalid row reads record 0 and discards it), so all are in flight at once.
  bool valid[kRowsPerWarp];
  const uint4* src[kRowsPerWarp];
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const std::int64_t row = first_row + k;
    const std::int64_t slot = row < p.num_rows ? params::row_slot(p.source, p.cache, row) : -1;
    valid[k] = params::slot_in_range(p.cache, slot);
    src[k] = reinterpret_cast<const uint4*>(params::record_address(p.cache, valid[k] ? slot : 0));
  }
  uint4 chunks[kRowsPerWarp][kChunksPerLane];
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
#pragma unroll
    for (int j = 0; j < kChunksPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      if (c < kChunks) chunks[k][j] = __ldg(src[k] + c);
    }
  }
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
#pragma unroll
    for (int j = 0; j < kChunksPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      if (c < kChunks) reinterpret_cast<uint4*>(smem_records[warp][k].bytes)[c] = chunks[k][j];
    }
  }
  __syncwarp();
  codec::DecodeParams params = p.decode;
  if (p.k_scale_device != nullptr) params.k_scale = __ldg(p.k_scale_device);
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const std::int64_t row = first_row + k;
    if (row >= p.num_rows) break;
    Out* out_row = static_cast<Out*>(p.kv_c_out) + row * p.kv_c_out_stride_elems;
    if constexpr (kStaged && requires { &Codec::decode_lane_bf16; }) {
      // bf16 straight from the codes (codec::decode_latent_group_bf16).
      std::uint16_t kv_bits[codec::kLatentPerLane] = {};
      std::uint16_t pe_bits[codec::kRopePerLane] = {};
      if (valid[k]) Codec::decode_lane_bf16(lane, smem_records[warp][k].bytes, params, kv_bits, pe_bits);
      std::uint8_t* staged = smem_rows[warp].bytes;
      codec::store_aligned<16>(staged + 32 * lane, reinterpret_cast<const std::uint8_t*>(kv_bits));
      codec::store_aligned<16>(staged + 32 * lane + 16, reinterpret_cast<const std::uint8_t*>(kv_bits) + 16);
      codec::store_aligned<4>(staged + 2 * codec::kLatentDim + 4 * lane,
                              reinterpret_cast<const std::uint8_t*>(pe_bits));
      __syncwarp();
      warp_copy16<kRowBytes>(out_row, staged, lane);
      __syncwarp();
      continue;
    }
    float kv_c[codec::kLatentPerLane] = {};
    float k_pe[codec::kRopePerLane] = {};
    if (valid[k]) Codec::decode_lane(lane, smem_records[warp][k].bytes, params, kv_c, k_pe);
    if constexpr (kStaged) {
      Out* staged = reinterpret_cast<Out*>(smem_rows[warp].bytes);
      store_values<Out, codec::kLatentPerLane, true>(staged + lane * codec::kLatentPerLane, kv_c);
      store_values<Out, codec::kRopePerLane, false>(staged + codec::kLatentDim + lane * codec::kRopePerLane, k_pe);
      __syncwarp();
      warp_copy16<kRowBytes>(out_row, staged, lane);
      __syncwarp();  // the staging row is rewritten for the next row
    } else {
      store_values<Out, codec::kLatentPerLane, kVector>(out_row + lane * codec::kLatentPerLane, kv_c);
      store_values<Out, codec::kRopePerLane, false>(
          static_cast<Out*>(p.k_pe_out) + row * p.k_pe_out_stride_elems + lane * codec::kRopePerLane, k_pe);
    }
  }
}

template <class Codec, class Out>
cudaError_t launch(const params::GatherParams& p, cudaStream_t stream) {
  constexpr std::int64_t kRowsPerBlock = kWarpsPerBlock * kRowsPerWarp;
  const auto blocks = static_cast<unsigned>((p.num_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const bool vector = reinterpret_cast<std::uintptr_t>(p.kv_c_out) % 16 == 0 &&
                      (p.kv_c_out_stride_elems * static_cast<std::int64_t>(sizeof(Out))) % 16 == 0;
  const bool fused = static_cast<Out*>(p.k_pe_out) == static_cast<Out*>(p.kv_c_out) + codec::kLatentDim &&
                     p.k_pe_out_stride_elems == p.kv_c_out_stride_elems;
  if constexpr (sizeof(Out) == 2) {
    if (vector && fused) {
      gather_records_kernel<Codec, Out, true, true><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
      return cudaGetLastError();
    }
  }
  if (vector) {
    gather_records_kernel<Codec, Out, true, false><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  } else {
    gather_records_kernel<Codec, Out, false, false><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t gather_records(const params::GatherParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (codec::is_part_coded(p.format)) return gather_pages(p, stream);
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    return p.out_dtype == params::OutDtype::kFloat32 ? launch<Codec, float>(p, stream)
                                                     : launch<Codec, std::uint16_t>(p, stream);
  });
}

}  // namespace mlakv::cuda
