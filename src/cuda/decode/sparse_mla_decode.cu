// SPDX-License-Identifier: Apache-2.0
// The CUDA sparse MLA decode's dispatcher: what the call's codec and device
// allow, the plan of its kernel family and splits (plan.h), the family's
// launcher, and the split-merge kernel after a decode whose splits wrote
// the workspace. Adding a family (docs/attention.md) adds its case below.
#include <algorithm>
#include <cstdint>

#include "cuda/cuda_backend.h"
#include "cuda/decode/hopper/launch.h"
#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/decode/merge_splits.h"
#include "cuda/decode/plan.h"
#include "cuda/decode/shared_tile/launch.h"
#include "cuda/decode/split_dims/launch.h"
#include "cuda/decode/v4/launch.h"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda {
namespace {

// Whether this build holds the sm_90a code of the warpgroup kernels and `device` runs it.
bool warpgroups_run_on(int device) {
#if MLAKV_SM90A
  return device_capability(device) == 90;
#else
  (void)device;
  return false;
#endif
}

// What the planner needs of the codec of `format` on `device`: its decode,
// and whether the warpgroup kernels (the 32-key tiles: records whose ring of
// two tiles fits beside their key tiles; the wide tiles: records of up to
// 656 bytes) are built for it and run there.
KernelChoice choice_for(Format format, int device) {
  return codec::visit_codec(format, [device]<class Codec>(codec::Tag<Codec>) {
    const bool warpgroups = warpgroups::kFits<Codec::Spec::kRecordBytes> && warpgroups_run_on(device);
    return KernelChoice{kFragmentDecode<Codec>, kOuterScale<Codec>, warpgroups,
                        warpgroups && wide_tiles::kFits<Codec::Spec::kRecordBytes>};
  });
}

}  // namespace

std::int64_t sparse_decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t topk, int device) {
  // The larger of the 512 + 64 kernels' and the DeepSeek V4 decode's split workspace.
  return std::max(decode_workspace_bytes(rows, heads, topk, multiprocessor_count(device)),
                  v4::decode_workspace_bytes(rows, heads, topk, device));
}

cudaError_t sparse_mla_decode(const params::SparseAttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  if (p.qk_dim == 512) return v4::launch_decode(p, stream);  // the DeepSeek V4 family: its own folder, decode/v4/
  int device = 0;
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) return status;
  const DecodePlan plan = plan_decode(choice_for(p.format, device), p.rows, p.heads, p.topk,
                                      multiprocessor_count(device), p.workspace != nullptr ? p.workspace_bytes : 0);
  cudaError_t status = cudaErrorNotSupported;
  bool merged = false;  // the wide tiles merge a row's splits in its cluster where they can
  switch (plan.kernel) {
    case DecodeKernel::kSharedTile:
      status = shared_tile::launch(p, plan, device, stream);
      break;
    case DecodeKernel::kSplitDims:
      status = split_dims::launch(p, plan, device, stream);
      break;
    case DecodeKernel::kWarpgroups:  // planned only where warpgroups_run_on
#if MLAKV_SM90A
      status = warpgroups::launch(p, plan, device, stream);
#endif
      break;
    case DecodeKernel::kWideTiles:
    case DecodeKernel::kTransposedProducts:
#if MLAKV_SM90A
      status = wide_tiles::launch(p, plan, device, stream, merged);
#endif
      break;
  }
  if (status != cudaSuccess || plan.splits == 1 || merged) return status;
  return launch_merge_splits(p, plan.splits, stream);
}

}  // namespace mlakv::cuda
