// SPDX-License-Identifier: Apache-2.0
// CUDA reader of the DeepSeek V4 family (block-planar V4 and V4.1 pages,
// token-major V4.1 records): one warp per group of output rows. The warp
// loads each row's data row and scale row (or its whole record) into shared
// memory with coalesced 16-byte and 8-byte loads, each lane decodes its 16
// values with the lane-parallel codec (codec/v4_lanes.h) and stores them as
// float32 or bf16. Rows without a valid slot (-1, past capacity, past a
// sequence's length) are zeros.
#include "cuda/cuda_backend.h"
#include "cuda/warp.cuh"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda {
namespace {

// Four warps per block and two rows per warp, as the 512 + 64 reader
// (gather_records.cu): both rows' loads are in flight before either is decoded.
constexpr int kWarpsPerBlock = 4;
constexpr int kRowsPerWarp = 2;

// Where a token's bytes lie, and where the warp stages them: a block-planar
// token's data row then its scale row, or a token-major record whole (its
// scale row follows its codes).
template <class Codec>
struct StagedToken {
  static constexpr bool kPlanar = Codec::kScaleRow.region == format::kScaleRegion;
  static constexpr int kDataBytes = kPlanar ? Codec::kDataRow.bytes : Codec::Spec::kRecordBytes;
  static constexpr int kScaleBytes = kPlanar ? Codec::kScaleRow.bytes : 0;
  static constexpr int kScaleAt = kPlanar ? kDataBytes : Codec::kScaleRow.offset;
  static constexpr int kBytes = (kDataBytes + kScaleBytes + 15) / 16 * 16;
  static constexpr int kDataChunks = kDataBytes / 16;
  static constexpr int kDataChunksPerLane = (kDataChunks + kWarpSize - 1) / kWarpSize;  // 1 or 2
  static constexpr int kScaleLanes = kScaleBytes / 8;  // 8-byte pieces: a V4 scale row is only 8-byte aligned
  static_assert(kDataBytes % 16 == 0 && kScaleBytes % 8 == 0 && kScaleLanes <= kWarpSize);
};

// The lane's 16 values in the output type: canonical f32 (one NaN), or bf16
// (encode_bf16 of each value, every NaN 0x7FFF): the CPU reader's stores.
template <class Codec, class Out>
__device__ __forceinline__ void decode_lane_out(int lane, const std::uint8_t* data_row, const std::uint8_t* scale_row,
                                                Out (&out)[codec::kV4LaneValues]) {
  if constexpr (sizeof(Out) == sizeof(float)) {
    Codec::decode_lane(lane, data_row, scale_row, out);
#pragma unroll
    for (int i = 0; i < codec::kV4LaneValues; ++i) out[i] = codec::canonical_nan(out[i]);
  } else {
    Codec::decode_lane_bf16(lane, data_row, scale_row, out);
  }
}

// Stores the lane's values at dst: 16-byte stores where the row allows them.
template <class Out, bool kVector>
__device__ __forceinline__ void store_lane(Out* dst, const Out (&values)[codec::kV4LaneValues]) {
  if constexpr (kVector) {
#pragma unroll
    for (int c = 0; c < static_cast<int>(sizeof(values) / 16); ++c) {
      uint4 v;
      memcpy(&v, reinterpret_cast<const char*>(values) + 16 * c, 16);
      reinterpret_cast<uint4*>(dst)[c] = v;
    }
  } else {
#pragma unroll
    for (int i = 0; i < codec::kV4LaneValues; ++i) dst[i] = values[i];
  }
}

// kVector: both outputs' rows are 16-byte aligned. kStaged: besides, k_pe_out
// continues kv_c_out's row ([N, 512] viewed as [:, :448] and [:, 448:]), so
// the row is assembled in shared memory and stored as whole 16-byte chunks,
// every store instruction writing contiguous sectors.
template <class Codec, class Out, bool kVector, bool kStaged>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize) gather_pages_kernel(const params::GatherParams p) {
  static_assert(codec::kV4Lanes == kWarpSize, "a lane of the codec is a lane of the warp");
  using Token = StagedToken<Codec>;
  constexpr int kRowBytes = (Codec::kNope + Codec::kRope) * static_cast<int>(sizeof(Out));
  __shared__ SmemRecord<Token::kBytes> smem_tokens[kWarpsPerBlock][kRowsPerWarp];
  __shared__ SmemRecord<kStaged ? kRowBytes : 16> smem_rows[kWarpsPerBlock];
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);  // unsigned: a shift, not a signed division
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::int64_t first_row = (static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp) * kRowsPerWarp;
  if (first_row >= p.num_rows) return;

  // Slots first, then every load of every row with no branch between them (an
  // invalid row reads slot 0's bytes and discards them), so all are in flight at once.
  bool valid[kRowsPerWarp];
  const uint4* data[kRowsPerWarp];
  const uint2* scale[kRowsPerWarp];
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const std::int64_t row = first_row + k;
    const std::int64_t slot = row < p.num_rows ? params::row_slot(p.source, p.cache, row) : -1;
    valid[k] = params::slot_in_range(p.cache, slot);
    const params::PagePosition at = params::page_position(p.cache, valid[k] ? slot : 0);
    data[k] = reinterpret_cast<const uint4*>(
        params::field_address(p.cache, at, Codec::kDataRow.region, Codec::kDataRow.offset));
    scale[k] = reinterpret_cast<const uint2*>(
        params::field_address(p.cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset));
  }
  uint4 chunks[kRowsPerWarp][Token::kDataChunksPerLane];
  uint2 scale_piece[kRowsPerWarp];
  // The scale row's pieces go to the last lanes, which hold one data chunk where the first lanes may hold two.
  const int scale_lane = lane - (kWarpSize - Token::kScaleLanes);
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
#pragma unroll
    for (int j = 0; j < Token::kDataChunksPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      if (c < Token::kDataChunks) chunks[k][j] = __ldg(data[k] + c);
    }
    if constexpr (Token::kScaleLanes > 0) {
      if (scale_lane >= 0) scale_piece[k] = __ldg(scale[k] + scale_lane);
    }
  }
#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
#pragma unroll
    for (int j = 0; j < Token::kDataChunksPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      if (c < Token::kDataChunks) reinterpret_cast<uint4*>(smem_tokens[warp][k].bytes)[c] = chunks[k][j];
    }
    if constexpr (Token::kScaleLanes > 0) {
      if (scale_lane >= 0) {
        reinterpret_cast<uint2*>(smem_tokens[warp][k].bytes + Token::kDataBytes)[scale_lane] = scale_piece[k];
      }
    }
  }
  __syncwarp();

#pragma unroll
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const std::int64_t row = first_row + k;
    if (row >= p.num_rows) break;
    Out values[codec::kV4LaneValues] = {};
    if (valid[k]) {
      const std::uint8_t* token = smem_tokens[warp][k].bytes;
      decode_lane_out<Codec>(lane, token, token + Token::kScaleAt, values);
    }
    Out* kv_row = static_cast<Out*>(p.kv_c_out) + row * p.kv_c_out_stride_elems;
    if constexpr (kStaged) {
      Out* staged = reinterpret_cast<Out*>(smem_rows[warp].bytes);
      store_lane<Out, true>(staged + lane * codec::kV4LaneValues, values);
      __syncwarp();
      warp_copy16<kRowBytes>(kv_row, staged, lane);
      __syncwarp();  // the staging row is rewritten for the next row
    } else {
      Out* pe_row = static_cast<Out*>(p.k_pe_out) + row * p.k_pe_out_stride_elems;
      store_lane<Out, kVector>(codec::v4_lane_values(lane, kv_row, pe_row), values);
    }
  }
}

template <class Codec, class Out>
cudaError_t launch(const params::GatherParams& p, cudaStream_t stream) {
  constexpr std::int64_t kRowsPerBlock = kWarpsPerBlock * kRowsPerWarp;
  const auto blocks = static_cast<unsigned>((p.num_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto rows16 = [](const void* base, std::int64_t stride_elems) {
    return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 &&
           (stride_elems * static_cast<std::int64_t>(sizeof(Out))) % 16 == 0;
  };
  const bool vector = rows16(p.kv_c_out, p.kv_c_out_stride_elems) && rows16(p.k_pe_out, p.k_pe_out_stride_elems);
  const bool fused = static_cast<Out*>(p.k_pe_out) == static_cast<Out*>(p.kv_c_out) + Codec::kNope &&
                     p.k_pe_out_stride_elems == p.kv_c_out_stride_elems;
  if (vector && fused) {
    gather_pages_kernel<Codec, Out, true, true><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  } else if (vector) {
    gather_pages_kernel<Codec, Out, true, false><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  } else {
    gather_pages_kernel<Codec, Out, false, false><<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t gather_pages(const params::GatherParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  return codec::visit_part_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    return p.out_dtype == params::OutDtype::kFloat32 ? launch<Codec, float>(p, stream)
                                                     : launch<Codec, std::uint16_t>(p, stream);
  });
}

}  // namespace mlakv::cuda
