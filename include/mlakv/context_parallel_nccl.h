// SPDX-License-Identifier: Apache-2.0
// The collective step of context-parallel decode over a caller's NCCL
// communicator (one rank per GPU): every rank's partial (out, lse) goes to
// the ranks that need it, and the N partials are merged with the N-way
// merge_attention_states. Built only when CMake finds NCCL (target
// mlakv::nccl, MLAKV_WITH_NCCL); mlakv never creates a communicator.
//
// Everything is enqueued on `stream` (NCCL calls, copies, the merge):
// nothing synchronizes with the host and nothing is allocated (the caller
// passes a workspace), so a CUDA graph may capture the step. Bad arguments
// throw mlakv::Error before any NCCL call is made.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

struct ncclComm;

namespace mlakv {

/// The same type as ncclComm_t (pass one directly).
using NcclCommHandle = ncclComm*;

/// Workspace bytes of merge_across_ranks (sharded = false) or
/// merge_across_ranks_sharded (true) for R rows, H heads of width D in
/// `dtype` (bf16 or float32) over `world_size` ranks.
std::size_t merge_across_ranks_workspace_size(std::int64_t rows, std::int64_t heads, std::int64_t width, DType dtype,
                                              std::int64_t world_size, bool sharded);

/// All-gather of every rank's (out, lse), then the N-way merge: every rank
/// gets the result over all ranks' keys for all H heads.
void merge_across_ranks(const TensorView& out,         // [R, H, D] bf16 | float32, contiguous: this rank's partial
                        const TensorView& lse,         // [R, H] float32, contiguous
                        const TensorView& workspace,   // uint8 [>= merge_across_ranks_workspace_size(..., false)]
                        const TensorView& merged_out,  // [R, H, D], out's dtype, written
                        const TensorView& merged_lse,  // [R, H] float32, written
                        NcclCommHandle comm, StreamHandle stream);

/// The head-sharded variant (vLLM's cp_lse_ag_out_rs: every rank decoded all
/// H = N H_rank heads over its keys): rank j receives every rank's partial of
/// heads [j H_rank, (j + 1) H_rank) by an all-to-all (grouped ncclSend/ncclRecv,
/// the bytes of a reduce-scatter) and merges them.
void merge_across_ranks_sharded(const TensorView& out,         // [R, H, D] bf16 | float32, contiguous, H % N == 0
                                const TensorView& lse,         // [R, H] float32, contiguous
                                const TensorView& workspace,   // uint8 [>= ..._workspace_size(..., true)]
                                const TensorView& merged_out,  // [R, H / N, D], out's dtype, written
                                const TensorView& merged_lse,  // [R, H / N] float32, written
                                NcclCommHandle comm, StreamHandle stream);

}  // namespace mlakv
