// SPDX-License-Identifier: Apache-2.0
// The wide-tile warpgroup sparse decode's launcher, compiled for sm_90a only
// (the mlakv_sm90a object library in CMakeLists.txt): one instantiation per
// record it takes.
#include "cuda/launch_decode_kernel.h"
#include "cuda/sparse_mla_decode_wide_tiles.cuh"

namespace mlakv::cuda::wide_tiles {
namespace {

template <class Codec, bool kPartial, bool kCrossover, int kBlockHeads>
cudaError_t launch_kernel(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                          cudaStream_t stream) {
  static_assert(kSharedBytes<kBlockHeads> <= kSharedLimit, "one block fits an SM");
  const std::int64_t blocks_per_row = (p.heads + kBlockHeads - 1) / kBlockHeads;
  const dim3 grid(static_cast<unsigned>(p.rows * blocks_per_row), static_cast<unsigned>(splits));
  // With crossover a row's blocks pair up (blocks_per_row is even).
  return launch_decode_kernel<sparse_mla_decode_wide_tiles_kernel<Codec, kPartial, kCrossover, kBlockHeads>>(
      grid, kThreads, kSharedBytes<kBlockHeads>, kCrossover ? 2 : 1, p, units_per_split, device, stream);
}

template <class Codec, bool kCrossover, int kBlockHeads>
cudaError_t launch_blocks(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                          cudaStream_t stream) {
  return splits == 1 ? launch_kernel<Codec, false, kCrossover, kBlockHeads>(p, splits, units_per_split, device, stream)
                     : launch_kernel<Codec, true, kCrossover, kBlockHeads>(p, splits, units_per_split, device, stream);
}

}  // namespace

template <class Codec>
cudaError_t launch(const params::SparseDecodeParams& p, int splits, int units_per_split, int device,
                   cudaStream_t stream) {
  if (crossover_for(p.heads)) return launch_blocks<Codec, true, kHeads>(p, splits, units_per_split, device, stream);
  if constexpr (kOuterScale<Codec>) {
    return cudaErrorNotSupported;  // the per-token-scaled record takes crossover only (wide_tiles_for): not built
  } else {
    return launch_blocks<Codec, false, kHeads>(p, splits, units_per_split, device, stream);
  }
}

template <class Codec>
cudaError_t launch_transposed(const params::SparseDecodeParams& p, int block_heads, int splits, int units_per_split,
                              int device, cudaStream_t stream) {
  return block_heads == 16 ? launch_blocks<Codec, false, 16>(p, splits, units_per_split, device, stream)
                           : launch_blocks<Codec, false, 32>(p, splits, units_per_split, device, stream);
}

template cudaError_t launch<codec::CodecFp8E4m3>(const params::SparseDecodeParams&, int, int, int, cudaStream_t);
template cudaError_t launch<codec::CodecFp8DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8Rope>(const params::SparseDecodeParams&, int, int, int,
                                                           cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4DsMlaFp8RopePts>(const params::SparseDecodeParams&, int, int, int,
                                                              cudaStream_t);
template cudaError_t launch<codec::CodecNvfp4Fp8DsMla>(const params::SparseDecodeParams&, int, int, int, cudaStream_t);
template cudaError_t launch_transposed<codec::CodecFp8E4m3>(const params::SparseDecodeParams&, int, int, int, int,
                                                            cudaStream_t);
template cudaError_t launch_transposed<codec::CodecFp8DsMla>(const params::SparseDecodeParams&, int, int, int, int,
                                                             cudaStream_t);
template cudaError_t launch_transposed<codec::CodecNvfp4DsMla>(const params::SparseDecodeParams&, int, int, int, int,
                                                               cudaStream_t);
template cudaError_t launch_transposed<codec::CodecNvfp4DsMlaFp8Rope>(const params::SparseDecodeParams&, int, int, int,
                                                                      int, cudaStream_t);
template cudaError_t launch_transposed<codec::CodecNvfp4Fp8DsMla>(const params::SparseDecodeParams&, int, int, int, int,
                                                                  cudaStream_t);

}  // namespace mlakv::cuda::wide_tiles
