// SPDX-License-Identifier: Apache-2.0
// The CUDA sparse prefill: the decode's kernels over the prefill's rows, a
// block per (row, heads) and no workspace (so no split of a row and nothing
// allocated), which reads every format and architecture the decode reads. A
// kernel of FlashMLA's prefill shape measured slower than these so far
// (docs/prefill.md: the designs, their times and the next one).
#include "cuda/cuda_backend.h"

namespace mlakv::cuda {

cudaError_t sparse_mla_prefill(const params::SparsePrefillParams& p, cudaStream_t stream) {
  return sparse_mla_decode(p, stream);
}

}  // namespace mlakv::cuda
