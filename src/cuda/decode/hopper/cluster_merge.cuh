// SPDX-License-Identifier: Apache-2.0
// The splits of a row merged inside the decode kernel: the blocks of a row's
// splits run as one thread-block cluster (along y), each stages its partial
// result (every head's 512 float32 outputs, already divided by its sum, and
// its lse) in its own shared memory, and after a cluster barrier each block
// merges a slice of the heads' outputs, reading every split's staging through
// distributed shared memory. No partial result reaches global memory and no
// merge kernel runs (what the partials' stores and the merge cost:
// docs/kernel_history.md). The arithmetic is the merge
// kernel's (MergedDims, attention_result.cuh), split by split in the same
// order, so both give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/decode/attention_result.cuh"
#include "cuda/ptx/cluster.cuh"
#include "params/attention_params.h"

namespace mlakv::cuda::cluster_merge {

/// The splits of a row that merge in their cluster (the wide tiles' launch
/// says why two); the merge below takes up to kMostSplits.
inline constexpr int kClusterSplits = 2;
inline constexpr int kMostSplits = 8;  // the portable cluster size

/// A block's partial result staged in its shared memory (attention_result.cuh's StagedRows).
template <int kBlockHeads>
struct Staging {
  alignas(16) float rows[kBlockHeads][kStagedRowFloats];
  float lse[kBlockHeads];

  __device__ StagedRows view() { return {&rows[0][0], lse}; }
};

/// Block y of the cluster (of `splits` along y, one block along x) merges
/// float4 units [y units, (y + 1) units) of the block's heads x 128 units
/// (units the ceiling of their count over splits), `threads` threads striding
/// over them, and stores the output (bf16) and lse.
template <int kBlockHeads>
__device__ void merge(const params::SparseDecodeParams& p, const Staging<kBlockHeads>& staging, std::int64_t row,
                      std::int64_t head0, int splits, int thread, int threads) {
  constexpr int kUnitsPerHead = kValueDim / 4;
  constexpr int kUnits = kBlockHeads * kUnitsPerHead;
  const int units = (kUnits + splits - 1) / splits;
  const std::uint32_t y = cluster::rank();  // the cluster is one block wide: split s is block s
  for (int u = thread; u < units; u += threads) {
    const int unit = static_cast<int>(y) * units + u;
    if (unit >= kUnits) break;
    const int head = unit / kUnitsPerHead;
    const int d = 4 * (unit % kUnitsPerHead);
    if (head0 + head >= p.heads) continue;
    float lse[kMostSplits];
    float4 part[kMostSplits];
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < kMostSplits; ++s) {
      if (s < splits) {
        lse[s] = cluster::load(cluster::peer_address(&staging.lse[head], s));
        part[s] = cluster::load4(cluster::peer_address(&staging.rows[head][d], s));
      }
    }
#pragma unroll
    for (int s = 0; s < kMostSplits; ++s) {
      if (s < splits) m = fmaxf(m, lse[s]);
    }
    MergedDims merged;
#pragma unroll
    for (int s = 0; s < kMostSplits; ++s) {
      if (s >= splits) break;
      merged.add(m == -INFINITY ? 0.0f : expf(lse[s] - m), part[s]);
    }
    merged.store(p, row, head0 + head, d, m);
  }
}

}  // namespace mlakv::cuda::cluster_merge
