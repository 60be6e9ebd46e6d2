// SPDX-License-Identifier: Apache-2.0
// Host side of the DeepSeek V4 decode: the key sets from the validated
// parameters, the split plan, and the launches of the decode and the merge.
#include "cuda/cuda_backend.h"
#include "cuda/decode/launch_decode_kernel.h"
#include "cuda/decode/v4/kernel.cuh"
#include "cuda/decode/v4/launch.h"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda::v4 {
namespace {

// The kernel's view of a V4-family key set: its coding and where its scale rows lie (the codec's kScaleRow).
KeySet key_set(Format format, const params::CacheLayout& cache, const std::int32_t* indices,
               std::int64_t indices_stride_row_elems, const std::int32_t* topk_len, std::int64_t topk) {
  KeySet set{cache, indices, indices_stride_row_elems, topk_len, topk, Coding::kFp8Tiles64, 0, 0};
  codec::visit_part_codec(format, [&]<class Codec>(codec::Tag<Codec>) {
    static_assert(Codec::kDataRow.offset == 0, "a token's data row starts its record (or its row of the page)");
    set.scale_region = Codec::kScaleRow.region;
    set.scale_offset = Codec::kScaleRow.offset;
    if constexpr (Codec::Spec::kTileSize == 64) {
      set.coding = Coding::kFp8Tiles64;
    } else if constexpr (Codec::Spec::kTileSize == 32) {
      set.coding = Coding::kMxfp8;
    } else {
      static_assert(Codec::Spec::kTileSize == 16, "the V4.1 FP4 tiles");
      set.coding = Coding::kFp4;
    }
  });
  return set;
}

// Launches the merge of `splits` partials as a programmatic dependent of the decode just launched on `stream`.
cudaError_t launch_merge(const params::SparseAttentionParams& p, int splits, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(p.rows * p.heads));
  config.blockDim = dim3(kMergeThreads);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, merge_kernel, p, splits);
}

template <auto kKernel>
cudaError_t launch_kernel(dim3 grid, int threads, int shared_bytes, const DecodeArgs& args, int device,
                          cudaStream_t stream) {
  if (const cudaError_t status = allow_shared_bytes<kKernel>(shared_bytes, device); status != cudaSuccess) {
    return status;
  }
  DecodeLaunch launch(grid, threads, shared_bytes, dim3(1, 1), stream);
  return cudaLaunchKernelEx(&launch.config, kKernel, args);
}

template <int kGroups>
cudaError_t launch_groups(const DecodeArgs& args, int splits, int device, cudaStream_t stream) {
  using S = Shape<kGroups>;
  const std::int64_t blocks_per_row = (args.p.heads + S::kHeads - 1) / S::kHeads;
  const dim3 grid(static_cast<unsigned>(args.p.rows * blocks_per_row), static_cast<unsigned>(splits));
  constexpr int kShared = sizeof(Storage<kGroups>);
  if (splits == 1)
    return launch_kernel<decode_kernel<kGroups, false>>(grid, S::kThreads, kShared, args, device, stream);
  if (const cudaError_t status =
          launch_kernel<decode_kernel<kGroups, true>>(grid, S::kThreads, kShared, args, device, stream);
      status != cudaSuccess) {
    return status;
  }
  return launch_merge(args.p, splits, stream);
}

}  // namespace

std::int64_t decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t entries, int device) {
  return workspace_bytes(rows, heads, entries, multiprocessor_count(device));
}

cudaError_t launch_decode(const params::SparseAttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  int device = 0;
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) return status;
  DecodeArgs args{};
  args.p = p;
  args.main = key_set(p.format, p.cache, p.indices, p.indices_stride_row_elems, p.topk_len, p.topk);
  args.extra = key_set(p.extra.format, p.extra.cache, p.extra.indices, p.extra.indices_stride_row_elems,
                       p.extra.topk_len, p.extra.topk);
  args.main_tiles = static_cast<int>(tiles_of(p.topk));
  args.tiles = args.main_tiles + static_cast<int>(tiles_of(p.extra.topk));
  Plan plan = plan_decode(p.rows, p.heads, args.tiles, multiprocessor_count(device));
  if (p.workspace == nullptr || p.workspace_bytes < plan_workspace_bytes(plan, p.rows, p.heads)) {
    plan.splits = 1;
    plan.tiles_per_split = std::max(args.tiles, 1);
  }
  args.tiles_per_split = plan.tiles_per_split;
  switch (plan.groups) {
    case 1:
      return launch_groups<1>(args, plan.splits, device, stream);
    case 2:
      return launch_groups<2>(args, plan.splits, device, stream);
    default:
      return launch_groups<4>(args, plan.splits, device, stream);
  }
}

}  // namespace mlakv::cuda::v4
