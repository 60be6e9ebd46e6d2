// SPDX-License-Identifier: Apache-2.0
// Where the sparse decode kernels put one head's result: the normalized bf16
// output row and its lse, or, for one split of a row, a float32 partial row
// and its lse in the caller's workspace (workspace.h), which the merge
// kernel combines.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "codec/element.h"
#include "cuda/decode/workspace.h"
#include "mlakv/vocabulary.h"
#include "params/attention_params.h"

namespace mlakv::cuda {

/// What one decode block owns: query row `row`, kHeads heads from `head0`,
/// and split `split` of the row's entries, [begin, end): splits walk
/// units_per_split units of 64 entries (the split plan's unit), and entries
/// past the row's topk_len are not the block's.
struct BlockRange {
  std::int64_t row;
  std::int64_t head0;
  int split;
  std::int64_t begin;
  std::int64_t end;

  /// Tiles of kTileTokens entries the block walks.
  template <int kTileTokens>
  __device__ int tiles() const {
    return end > begin ? static_cast<int>((end - begin + kTileTokens - 1) / kTileTokens) : 0;
  }
};

template <int kHeads>
__device__ __forceinline__ BlockRange block_range(const params::SparseDecodeParams& p, int units_per_split) {
  const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) / blocks_per_row;
  const int split = static_cast<int>(blockIdx.y);
  const std::int64_t begin = static_cast<std::int64_t>(split) * units_per_split * 64;
  const std::int64_t end =
      std::min<std::int64_t>(params::row_entries(p, row), begin + static_cast<std::int64_t>(units_per_split) * 64);
  return {row, (static_cast<std::int64_t>(blockIdx.x) % blocks_per_row) * kHeads, split, begin, end};
}

/// lo and hi as bf16 bits, lo in the low half: encode_bf16 of each, in one
/// paired conversion (conversion_proofs_test proves them equal for every float).
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) { return codec::encode_bf16x2(lo, hi); }

/// A head's online-softmax totals turned into its output scale and lse: a head
/// that saw no valid entry (sum 0) gives zeros and -inf.
struct HeadTotals {
  float inv_sum;
  float lse;  // natural log
};

__device__ __forceinline__ HeadTotals finish_head(float sum, float row_max_log2) {
  constexpr float kLn2 = 0.6931471805599453f;
  if (!(sum > 0.0f)) return {0.0f, -INFINITY};
  return {1.0f / sum, (row_max_log2 + log2f(sum)) * kLn2};
}

/// The destination of one (split, row, head): kPartial writes the workspace.
template <bool kPartial>
struct HeadStore {
  void* out;   // the head's 512-wide row: bf16 in out, or float32 in the workspace
  float* lse;  // where its lse goes

  __device__ HeadStore(const params::SparseDecodeParams& p, std::int64_t splits, std::int64_t split, std::int64_t row,
                       std::int64_t head) {
    if constexpr (kPartial) {
      const std::int64_t index = (split * p.rows + row) * p.heads + head;
      out = static_cast<float*>(p.workspace) + index * kValueDim;
      lse = reinterpret_cast<float*>(static_cast<std::uint8_t*>(p.workspace) +
                                     lse_offset_bytes(splits, p.rows, p.heads)) +
            index;
    } else {
      out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems;
      lse = p.lse + row * p.lse_stride_row_elems + head * p.lse_stride_head_elems;
    }
  }

  /// Output dims dim and dim + 1 (dim even).
  __device__ __forceinline__ void store_pair(int dim, float a, float b) const {
    if constexpr (kPartial) {
      *reinterpret_cast<float2*>(static_cast<float*>(out) + dim) = make_float2(a, b);
    } else {
      *reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(out) + dim) = pack_bf16x2(a, b);
    }
  }
};

/// A head's 4 output dims merged from its splits' partials (each divided by
/// its own sum) by their lse, split by split: the merge kernel and the
/// cluster merge (cluster_merge.cuh) both use it, so both give the same bits.
/// `max` is the largest lse of the head's splits; w = exp(lse - max) (0 for
/// an empty split, whose partial holds zeros but weighs nothing either way).
struct MergedDims {
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float total = 0.0f;

  __device__ __forceinline__ void add(float w, float4 partial) {
    if (w == 0.0f) return;
    acc.x += w * partial.x;
    acc.y += w * partial.y;
    acc.z += w * partial.z;
    acc.w += w * partial.w;
    total += w;
  }

  /// Dims d..d + 3 of (row, head) as bf16, and at d = 0 the head's lse.
  __device__ __forceinline__ void store(const params::SparseDecodeParams& p, std::int64_t row, std::int64_t head, int d,
                                        float max) const {
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems + d;
    reinterpret_cast<std::uint32_t*>(out)[0] = pack_bf16x2(acc.x * inv, acc.y * inv);
    reinterpret_cast<std::uint32_t*>(out)[1] = pack_bf16x2(acc.z * inv, acc.w * inv);
    if (d == 0) {
      p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] =
          total > 0.0f ? max + logf(total) : -INFINITY;
    }
  }
};

/// Where a block's result goes: the output (a row in one split), its split's
/// rows of the workspace (merged by the merge kernel), or its shared memory,
/// staged for its cluster's merge (a row's splits in one cluster:
/// cluster_merge.cuh).
enum class Epilogue { kOutput, kWorkspace, kCluster };

/// A block's staged partial result (Epilogue::kCluster): head h's 512 float32
/// outputs at rows + h kStagedRowFloats (padded by 4: a warp's 8-byte stores
/// of 8 dims of 4 heads 2 apart fall in distinct banks), its lse at lse[h].
inline constexpr int kStagedRowFloats = kValueDim + 4;
struct StagedRows {
  float* rows;
  float* lse;
};

/// One staged head, with HeadStore's interface. Its pairs go as one 64-bit
/// integer: given a float2 store, the compiler split it into two 4-byte stores.
struct StagedHead {
  float* out;
  float* lse;
  __device__ __forceinline__ void store_pair(int dim, float a, float b) const {
    *reinterpret_cast<unsigned long long*>(out + dim) =
        static_cast<unsigned long long>(__float_as_uint(b)) << 32 | __float_as_uint(a);
  }
};

/// The destination of head `head` of the row (staged: head - head0 of the
/// block's; a dead head, which the caller passes as 0 and never stores,
/// stages as the first) for a block's epilogue. The output and workspace are addressed
/// from the parameters at each head, as before the staging existed: a
/// destination object holding a reference to the parameters made the
/// compiler reload the workspace address, rebuild every store's address and
/// split each float2 store in two (docs/kernel_history.md).
template <Epilogue kEpilogue>
__device__ __forceinline__ auto head_destination(const params::SparseDecodeParams& p, const StagedRows& staged,
                                                 std::int64_t split, std::int64_t row, std::int64_t head0,
                                                 std::int64_t head) {
  if constexpr (kEpilogue == Epilogue::kCluster) {
    const std::int64_t h = head < head0 ? 0 : head - head0;
    return StagedHead{staged.rows + h * kStagedRowFloats, staged.lse + h};
  } else {
    return HeadStore<kEpilogue == Epilogue::kWorkspace>(p, gridDim.y, split, row, head);
  }
}

}  // namespace mlakv::cuda
