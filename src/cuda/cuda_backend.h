// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: warp-per-token kernels over the shared lane-parallel codecs.
// Launches are asynchronous on the given stream, never synchronize and never
// allocate, so they can be captured in CUDA graphs.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "params/attention_params.h"
#include "params/context_parallel.h"
#include "params/params.h"
#include "params/prefill_params.h"

namespace mlakv::cuda {

/// Compute capability (e.g. 90) of a device; cached per device.
int device_capability(int device);
/// Whether this build carries code that runs on that capability.
bool supports_capability(int capability);
/// "sm_90, sm_100a, sm_120a (+ compute_90 PTX)": what this build was compiled for.
std::string built_architectures();

/// Returns the launch error, if any (cudaSuccess otherwise).
cudaError_t write_records(const params::WriteParams& params, cudaStream_t stream);
cudaError_t gather_records(const params::GatherParams& params, cudaStream_t stream);
/// The same for block-planar formats (write_records and gather_records forward to these).
cudaError_t write_pages(const params::WriteParams& params, cudaStream_t stream);
cudaError_t gather_pages(const params::GatherParams& params, cudaStream_t stream);

/// Number of streaming multiprocessors of a device; cached per device.
int multiprocessor_count(int device);
/// Bytes of split-K partials the sparse decode uses with a workspace.
std::int64_t sparse_decode_workspace_bytes(std::int64_t rows, std::int64_t heads, std::int64_t topk, int device);
cudaError_t sparse_mla_decode(const params::SparseDecodeParams& params, cudaStream_t stream);
/// The decode's kernels over the prefill's rows, with no workspace (src/cuda/prefill/).
cudaError_t sparse_mla_prefill(const params::SparsePrefillParams& params, cudaStream_t stream);
cudaError_t merge_attention_states(const params::MergeParams& params, cudaStream_t stream);
cudaError_t dcp_local_slots(const params::LocalSlotsParams& params, cudaStream_t stream);
cudaError_t merge_attention_states(const params::StackedMergeParams& params, cudaStream_t stream);

}  // namespace mlakv::cuda
