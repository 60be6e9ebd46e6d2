// SPDX-License-Identifier: Apache-2.0
// The sparse prefill kernel's launcher, compiled for sm_90a only (the
// mlakv_sm90a object library): one instantiation per record it reads.
#include "cuda/launch_decode_kernel.h"
#include "cuda/prefill/kernel.cuh"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda::prefill {

namespace {

template <class Codec, bool kMathDecode>
cudaError_t launch_kernel(const params::SparsePrefillParams& p, int device, cudaStream_t stream) {
  constexpr auto kKernel = sparse_mla_prefill_kernel<Codec, kMathDecode>;
  if (const cudaError_t status = allow_shared_bytes<kKernel>(kSharedBytes, device); status != cudaSuccess) {
    return status;
  }
  const std::int64_t blocks_per_row = (p.heads + kHeads - 1) / kHeads;
  kKernel<<<static_cast<unsigned>(p.rows * blocks_per_row), kThreads, kSharedBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool reads(Format format) {
  return codec::visit_codec(format, []<class Codec>(codec::Tag<Codec>) { return kReads<Codec>; });
}

cudaError_t launch(const params::SparsePrefillParams& p, int device, cudaStream_t stream) {
  return codec::visit_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    if constexpr (kReads<Codec>) {
      // The per-token-scaled record's decode binds on its ALU work: the math
      // warps share it; the others' decoders alone were faster (issue 42's
      // variants, bench/results/h200-prefill-variants.txt).
      return launch_kernel<Codec, kOuterScale<Codec>>(p, device, stream);
    } else {
      return cudaErrorNotSupported;  // reads(p.format) is false: the dispatch takes the decode's kernels
    }
  });
}

}  // namespace mlakv::cuda::prefill
