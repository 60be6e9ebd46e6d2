// SPDX-License-Identifier: Apache-2.0
// The CUDA sparse prefill: the decode's kernels over the prefill's rows, a
// block per (row, heads) and no workspace (so no split of a row and nothing
// allocated), which reads every format and architecture the decode reads. A
// prefill kernel of FlashMLA's shape (a block per row and 64 heads, two math
// warpgroups splitting each 64-key tile, decoders filling swizzled key
// tiles) was built and measured slower than them at every shape of issue 42
// (0.76-0.93x at 64 / 128 heads; docs/prefill.md has the designs, the
// numbers and the next one), so it is not here.
#include "cuda/cuda_backend.h"

namespace mlakv::cuda {

cudaError_t sparse_mla_prefill(const params::SparsePrefillParams& p, cudaStream_t stream) {
  return sparse_mla_decode(p, stream);
}

}  // namespace mlakv::cuda
