// SPDX-License-Identifier: Apache-2.0
// The wide-tile warpgroup sparse decode's launcher, compiled for sm_90a only
// (the mlakv_sm90a object library in CMakeLists.txt): its kernels for every
// record of up to 656 bytes.
#include "cuda/decode/hopper/launch.h"
#include "cuda/decode/hopper/wide_tiles_kernel.cuh"
#include "cuda/decode/launch_decode_kernel.h"

namespace mlakv::cuda::wide_tiles {
namespace {

template <class Codec, Epilogue kEpilogue, bool kCrossover, int kBlockHeads>
inline constexpr auto kKernel = sparse_mla_decode_wide_tiles_kernel<Codec, kEpilogue, kCrossover, kBlockHeads>;

}  // namespace

cudaError_t launch(const params::SparseDecodeParams& p, const DecodePlan& plan, int device, cudaStream_t stream,
                   bool& merged) {
  merged = false;
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) -> cudaError_t {
    if constexpr (!kFits<Codec::Spec::kRecordBytes>) {
      return cudaErrorNotSupported;  // not built: the 16-bit records never take the warpgroup kernels
    } else {
      // Blocks of kBlockHeads heads (with crossover a row's blocks pair up:
      // blocks_per_row is even). A row in one block (or crossover pair) writes
      // the output. A row split in two merges in its cluster (cluster_merge.cuh)
      // where the device holds every cluster of the grid at once (one wave, as
      // the split plan assumed); more splits, and crossover pairs, write the
      // workspace (docs/kernel_history.md says why).
      const auto run = [&]<bool kCrossover, int kBlockHeads>() -> cudaError_t {
        static_assert(kSharedBytes<kBlockHeads> <= kSharedLimit, "one block fits an SM");
        const std::int64_t blocks_per_row = (p.heads + kBlockHeads - 1) / kBlockHeads;
        const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(plan.splits));
        const auto run_epilogue = [&]<Epilogue kEpilogue>(dim3 cluster) {
          return launch_decode_kernel<kKernel<Codec, kEpilogue, kCrossover, kBlockHeads>>(
              grid, kThreads, kSharedBytes<kBlockHeads>, cluster, p, plan.tiles_per_split, device, stream);
        };
        const dim3 pair(kCrossover ? 2u : 1u, 1u);
        if (plan.splits == 1) return run_epilogue.template operator()<Epilogue::kOutput>(pair);
        if constexpr (!kCrossover) {
          constexpr int kMerged = cluster_merge::kClusterSplits;
          const dim3 cluster(1u, static_cast<unsigned>(kMerged));
          if (plan.splits == kMerged &&
              p.rows * blocks_per_row <=
                  resident_clusters<kKernel<Codec, Epilogue::kCluster, false, kBlockHeads>, kMerged>(
                      cluster, kThreads, kSharedBytes<kBlockHeads>, device)) {
            merged = true;
            return run_epilogue.template operator()<Epilogue::kCluster>(cluster);
          }
        }
        return run_epilogue.template operator()<Epilogue::kWorkspace>(pair);
      };
      // The per-token-scaled record takes the wide tiles with crossover only
      // (plan.cpp: wide_tiles_for, transposed_block_heads): the rest is not built.
      if (plan.kernel == DecodeKernel::kTransposedProducts) {
        if constexpr (kOuterScale<Codec>) {
          return cudaErrorNotSupported;
        } else {
          return plan.block_heads == 16 ? run.template operator()<false, 16>() : run.template operator()<false, 32>();
        }
      }
      if (crossover_for(p.heads)) return run.template operator()<true, kHeads>();
      if constexpr (kOuterScale<Codec>) {
        return cudaErrorNotSupported;
      } else {
        return run.template operator()<false, kHeads>();
      }
    }
  });
}

}  // namespace mlakv::cuda::wide_tiles
