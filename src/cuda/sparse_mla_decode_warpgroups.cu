// SPDX-License-Identifier: Apache-2.0
// The warpgroup sparse decode's launcher, compiled for sm_90a only (its own
// object library in CMakeLists.txt): one instantiation per NVFP4 record (the
// FP8 records always take the wide tiles: sparse_mla_decode.cu).
#include "cuda/launch_decode_kernel.h"
#include "cuda/sparse_mla_decode_warpgroups.cuh"

namespace mlakv::cuda::warpgroups {
namespace {

template <class Codec, bool kPartial>
cudaError_t launch_kernel(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                          cudaStream_t stream) {
  constexpr int kBytes = kSharedBytes<Codec::Spec::kRecordBytes>;
  static_assert(kBytes <= kSharedLimit, "one block fits an SM");
  const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
  const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(splits));
  return launch_decode_kernel<sparse_mla_decode_warpgroups_kernel<Codec, kPartial>>(grid, kThreads, kBytes, dim3(1, 1),
                                                                                    p, units_per_split, device, stream);
}

}  // namespace

template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                   cudaStream_t stream) {
  return splits == 1 ? launch_kernel<Codec, false>(p, splits, units_per_split, device, stream)
                     : launch_kernel<Codec, true>(p, splits, units_per_split, device, stream);
}

template cudaError_t launch<codec::CodecNvfp4DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8Rope>(const params::SparseDecodeParams&, int, int, int,
                                                           cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8RopePts>(const params::SparseDecodeParams&, int, int, int,
                                                              cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4Fp8DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t);

}  // namespace mlakv::cuda::warpgroups
