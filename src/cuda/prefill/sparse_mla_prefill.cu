// SPDX-License-Identifier: Apache-2.0
// The CUDA sparse prefill's dispatch: the sm_90a prefill kernel (kernel.cuh)
// where this build holds it, the device is a Hopper and the kernel reads the
// format; elsewhere the decode's kernels, which compute the same rows a block
// per (row, heads) without a workspace (no split, no allocation), so every
// format and architecture the decode reads is read here too.
#include "cuda/cuda_backend.h"
#include "cuda/prefill/shape.h"

namespace mlakv::cuda {

cudaError_t sparse_mla_prefill(const params::SparsePrefillParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.heads == 0) return cudaSuccess;
#if MLAKV_SM90A
  int device = 0;
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) return status;
  if (device_capability(device) == 90 && p.qk_dim == kQueryDim && prefill::reads(p.format)) {
    return prefill::launch(p, device, stream);
  }
#endif
  return sparse_mla_decode(p, stream);
}

}  // namespace mlakv::cuda
