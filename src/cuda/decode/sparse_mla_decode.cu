// SPDX-License-Identifier: Apache-2.0
// The CUDA sparse MLA decode's dispatcher: the codec of the call's format,
// the plan of its kernel family and splits (plan.h), the family's launcher,
// and the split-merge kernel after a decode whose splits wrote the
// workspace. Adding a family (docs/attention.md) adds its case below.
#include <cstdint>

#include "cuda/cuda_backend.h"
#include "cuda/decode/hopper/launch.h"
#include "cuda/decode/hopper/shape.h"
#include "cuda/decode/key_fragment.cuh"
#include "cuda/decode/merge_splits.h"
#include "cuda/decode/plan.h"
#include "cuda/decode/shared_tile/launch.h"
#include "cuda/decode/split_dims/launch.h"
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

// The records whose ring of at least two tiles fits beside the 32-key
// warpgroup kernel's tiles, and those the wide tiles take (every one that fits).
template <class Codec>
inline constexpr bool kFitsWarpgroups = warpgroups::kFits<Codec::Spec::kRecordBytes>;
template <class Codec>
inline constexpr bool kFitsWideTiles = wide_tiles::kFits<Codec::Spec::kRecordBytes>;

template <class Codec>
KernelChoice choice_for(int device) {
  const bool warpgroups = kFitsWarpgroups<Codec> && warpgroups_run_on(device);
  return {kFragmentDecode<Codec>, kOuterScale<Codec>, warpgroups, warpgroups && kFitsWideTiles<Codec>};
}

}  // namespace

std::int64_t sparse_decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t topk, int device) {
  return decode_workspace_bytes(rows, heads, topk, multiprocessor_count(device));
}

cudaError_t sparse_mla_decode(const params::SparseDecodeParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
  int device = 0;
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) return status;
  const int multiprocessors = multiprocessor_count(device);
  const std::int64_t workspace_bytes = p.workspace != nullptr ? p.workspace_bytes : 0;
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    const DecodePlan plan =
        plan_decode(choice_for<Codec>(device), p.rows, p.heads, p.topk, multiprocessors, workspace_bytes);
    // A family the plan never picks for the codec is not built for it: the
    // if constexpr branches below follow choice_for and kernel_for.
    cudaError_t status = cudaErrorNotSupported;
    bool merged = false;  // the wide tiles merge a row's splits in its cluster where they can
    switch (plan.kernel) {
      case DecodeKernel::kSharedTile:
        status = shared_tile::launch<Codec>(p, plan, device, stream);
        break;
      case DecodeKernel::kSplitDims:
        if constexpr (kFragmentDecode<Codec>) status = split_dims::launch<Codec>(p, plan, device, stream);
        break;
      case DecodeKernel::kWarpgroups:
#if MLAKV_SM90A
        if constexpr (kFitsWarpgroups<Codec> && kFragmentDecode<Codec>) {
          status = warpgroups::launch<Codec>(p, plan, device, stream);
        }
#endif
        break;
      case DecodeKernel::kWideTiles:
      case DecodeKernel::kTransposedProducts:
#if MLAKV_SM90A
        if constexpr (kFitsWarpgroups<Codec> && kFitsWideTiles<Codec>) {
          status = wide_tiles::launch<Codec>(p, plan, device, stream, merged);
        }
#endif
        break;
    }
    if (status != cudaSuccess || plan.splits == 1 || merged) return status;
    return launch_merge_splits(p, plan.splits, stream);
  });
}

}  // namespace mlakv::cuda
