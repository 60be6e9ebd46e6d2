// SPDX-License-Identifier: Apache-2.0
// The wide-tile warpgroup sparse decode's launcher, compiled for sm_90a only
// (the mlakv_sm90a object library in CMakeLists.txt): one instantiation per
// record it takes.
#include "cuda/launch_decode_kernel.h"
#include "cuda/sparse_mla_decode_wide_tiles.cuh"

namespace mlakv::cuda::wide_tiles {
namespace {

template <class Codec, Epilogue kEpilogue, bool kCrossover, int kBlockHeads>
inline constexpr auto kKernel = sparse_mla_decode_wide_tiles_kernel<Codec, kEpilogue, kCrossover, kBlockHeads>;

template <class Codec, Epilogue kEpilogue, bool kCrossover, int kBlockHeads>
cudaError_t launch_kernel(const params::SparseDecodeParams& p, dim3 grid, dim3 cluster, int units_per_split, int device,
                          cudaStream_t stream) {
  static_assert(kSharedBytes<kBlockHeads> <= kSharedLimit, "one block fits an SM");
  return launch_decode_kernel<kKernel<Codec, kEpilogue, kCrossover, kBlockHeads>>(
      grid, kThreads, kSharedBytes<kBlockHeads>, cluster, p, units_per_split, device, stream);
}

// A row in one block (or crossover pair) writes the output. A row split in
// two merges in its cluster (cluster_merge.cuh) where the device holds every
// cluster of the grid at once (one wave, as the split plan assumed): 1.02-1.10x
// at R = 64 on the H200 (bench/results/h200-ea381ad-cluster-merge-r64.txt).
// More splits, and crossover pairs, merge through the workspace and the
// merge kernel: there the staged merge was 0.94-0.98x for NVFP4 at 64 and
// 128 heads, R = 8..32 (bench/results/h200-29ef764-cluster-merge.txt).
template <class Codec, bool kCrossover, int kBlockHeads>
cudaError_t launch_blocks(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                          cudaStream_t stream, bool& merged) {
  const std::int64_t blocks_per_row = (p.heads + kBlockHeads - 1) / kBlockHeads;
  const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(splits));
  // With crossover a row's blocks pair up (blocks_per_row is even).
  const dim3 pair(kCrossover ? 2u : 1u, 1u);
  merged = false;
  if (splits == 1) {
    return launch_kernel<Codec, Epilogue::kOutput, kCrossover, kBlockHeads>(p, grid, pair, units_per_split, device,
                                                                            stream);
  }
  if constexpr (!kCrossover) {
    constexpr int kMerged = cluster_merge::kClusterSplits;
    const dim3 cluster(1u, static_cast<unsigned>(kMerged));
    if (splits == kMerged &&
        p.rows * blocks_per_row <= resident_clusters<kKernel<Codec, Epilogue::kCluster, false, kBlockHeads>, kMerged>(
                                       cluster, kThreads, kSharedBytes<kBlockHeads>, device)) {
      merged = true;
      return launch_kernel<Codec, Epilogue::kCluster, false, kBlockHeads>(p, grid, cluster, units_per_split, device,
                                                                          stream);
    }
  }
  return launch_kernel<Codec, Epilogue::kWorkspace, kCrossover, kBlockHeads>(p, grid, pair, units_per_split, device,
                                                                             stream);
}

}  // namespace

template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                   cudaStream_t stream, bool& merged) {
  merged = false;
  if (crossover_for(p.heads)) {
    return launch_blocks<Codec, true, kHeads>(p, splits, units_per_split, device, stream, merged);
  }
  if constexpr (kOuterScale<Codec>) {
    return cudaErrorNotSupported;  // the per-token-scaled record takes crossover only (wide_tiles_for): not built
  } else {
    return launch_blocks<Codec, false, kHeads>(p, splits, units_per_split, device, stream, merged);
  }
}

template <class Codec>
cudaError_t launch_transposed(const params::SparseDecodeParams& p, int block_heads, int splits, int units_per_split,
                              int device, cudaStream_t stream, bool& merged) {
  return block_heads == 16 ? launch_blocks<Codec, false, 16>(p, splits, units_per_split, device, stream, merged)
                           : launch_blocks<Codec, false, 32>(p, splits, units_per_split, device, stream, merged);
}

template cudaError_t launch<codec::CodecFp8E4m3>(const params::SparseDecodeParams&, int, int, int, cudaStream_t, bool&);
template cudaError_t launch<codec::CodecFp8DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t,
                                                  bool&);
template cudaError_t launch<codec::CodecNvfp4DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t,
                                                    bool&);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8Rope>(const params::SparseDecodeParams&, int, int, int,
                                                           cudaStream_t, bool&);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8RopePts>(const params::SparseDecodeParams&, int, int, int,
                                                              cudaStream_t, bool&);
template cudaError_t launch<codec::CodecNvfp4Fp8DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t,
                                                       bool&);
template cudaError_t launch_transposed<codec::CodecFp8E4m3>(const params::SparseDecodeParams&, int, int, int, int,
                                                            cudaStream_t, bool&);
template cudaError_t launch_transposed<codec::CodecFp8DsMla>(const params::SparseDecodeParams&, int, int, int, int,
                                                             cudaStream_t, bool&);
template cudaError_t launch_transposed<codec::CodecNvfp4DsMla>(const params::SparseDecodeParams&, int, int, int, int,
                                                               cudaStream_t, bool&);
template cudaError_t launch_transposed<codec::CodecNvfp4DsMlaFp8Rope>(const params::SparseDecodeParams&, int, int, int,
                                                                      int, cudaStream_t, bool&);
template cudaError_t launch_transposed<codec::CodecNvfp4Fp8DsMla>(const params::SparseDecodeParams&, int, int, int, int,
                                                                  cudaStream_t, bool&);

}  // namespace mlakv::cuda::wide_tiles
