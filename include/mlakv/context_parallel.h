// SPDX-License-Identifier: Apache-2.0
// Context-parallel decode (vLLM's decode context parallel, DCP): the cache of
// every sequence is sharded along the token axis over the N ranks of a group,
// each rank decodes the top-k entries it owns, and the N partial results are
// merged by their log-sum-exp. These are the two per-rank steps around
// sparse_mla_decode; the collective that moves the partials between ranks is
// NCCL's (mlakv/context_parallel_nccl.h, or torch.distributed in Python).
// docs/context_parallel.md describes the layout and a whole step.
#pragma once

#include <cstdint>

#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv {

/// vLLM's interleaved token layout over `world_size` ranks: token t of a
/// sequence lives on rank (t / interleave) % world_size; each rank stores its
/// tokens densely in its own blocks of `block_size` tokens, addressed by its
/// block table (vLLM's `cp_kv_cache_interleave_size`, `dcp_world_size`, `dcp_rank`).
struct ContextParallelLayout {
  std::int64_t world_size = 1;
  std::int64_t rank = 0;
  std::int64_t interleave = 1;   // must divide block_size
  std::int64_t block_size = 64;  // tokens per block of this rank's cache
};

/// This rank's flat cache slots of each row's top-k token positions: position
/// p of the row's sequence (block-table row req_id[r]) is local when
/// (p mod (block_size * N)) / interleave mod N == rank; its slot is
///   block_table[req_id[r], p / (block_size * N)] * block_size
///     + (v / (interleave * N)) * interleave + v mod interleave,  v = p mod (block_size * N),
/// and -1 otherwise, so sparse_mla_decode(indices = local_slots) attends over
/// exactly this rank's share. A negative position, a position past the block
/// table's width, a negative block id, a req_id outside the table, or a slot
/// past int32 also gives -1. CPU arrays run on the caller's thread; CUDA
/// arrays launch on `stream` without synchronizing or allocating.
void dcp_local_slots(const TensorView& indices,      // [R, K] int32 token positions in the sequence, -1 none
                     const TensorView& req_id,       // [R] int32: the block-table row of query row r
                     const TensorView& block_table,  // [num_reqs, max_blocks] int32, this rank's block ids
                     const TensorView& local_slots,  // [R, K] int32, written
                     const ContextParallelLayout& layout, StreamHandle stream = nullptr);

/// The N-way merge of partial results over disjoint key sets (one per rank):
/// out = sum_n e^lse_n out_n / sum_n e^lse_n, lse = log sum_n e^lse_n, in
/// float32 from the largest lse, partials taken in order n = 0..N-1. Exact up
/// to rounding; a partial with lse = -inf contributes nothing (whatever its
/// out holds), and all -inf gives zeros and -inf. out and lse share no byte
/// with the inputs.
void merge_attention_states(const TensorView& outs,  // [N, R, H, D] bf16 | float32
                            const TensorView& lses,  // [N, R, H] float32
                            const TensorView& out,   // [R, H, D], outs' dtype, written
                            const TensorView& lse,   // [R, H] float32, written
                            StreamHandle stream = nullptr);

}  // namespace mlakv
