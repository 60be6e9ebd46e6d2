// SPDX-License-Identifier: Apache-2.0
// Turns public views into validated kernel params, or throws mlakv::Error.
// Rules run in FlashMLA's order (device, dtype, shape, layout, alignment), and
// everything is checked before a backend touches a byte.
#pragma once

#include "api/check.h"
#include "mlakv/readers.h"
#include "mlakv/writers.h"
#include "params/params.h"

namespace mlakv::api {

params::WriteParams validate_write(const Check& check, Format format, const TensorView& kv_c, const TensorView& k_pe,
                                   const TensorView& kv_cache, const TensorView& slot_mapping, const TensorView* scale);

params::GatherParams validate_gather(const Check& check, Format format, const TensorView& kv_cache,
                                     const TensorView& slots, const TensorView& kv_c_out, const TensorView& k_pe_out,
                                     const GatherOptions& options);

/// Rows come from a block table: row cu_seq_lens[b] + i (i < seq_lens[b])
/// decodes position i of sequence b; other rows are zeros.
params::GatherParams validate_gather_paged(const Check& check, Format format, const TensorView& kv_cache,
                                           const TensorView& block_table, const TensorView& seq_lens,
                                           const TensorView& cu_seq_lens, const TensorView& kv_c_out,
                                           const TensorView& k_pe_out, const GatherOptions& options);

/// (T, 1, 64) -> (T, 64): the stock entry point's squeeze of vLLM's k_pe view.
TensorView squeeze_middle_unit_dim(const TensorView& view);
/// (T, 1) -> (T,): the stock entry point's flattening of a column of slots.
TensorView flatten_column(const TensorView& view);
/// A bf16-, fp16- or int8-typed cache (what engines allocate for `auto` and
/// fp8) as the uint8 view of the same bytes: [num_blocks, block_size, 576]
/// bf16 is [num_blocks, block_size, 1152] uint8. Other views are unchanged
/// (a non-contiguous last dim is left for validation to refuse).
TensorView cache_as_bytes(const TensorView& view);

}  // namespace mlakv::api

#include "mlakv/attention.h"
#include "mlakv/prefill.h"
#include "params/attention_params.h"
#include "params/prefill_params.h"

namespace mlakv::api {

/// Everything sparse_mla_decode reads and writes; a workspace, when given on
/// CUDA, must hold sparse_mla_decode_workspace_size() bytes.
params::SparseDecodeParams validate_sparse_decode(const Check& check, Format format, const TensorView& q,
                                                  const TensorView& kv_cache, const TensorView& indices,
                                                  const TensorView& out, const TensorView& lse,
                                                  const SparseDecodeOptions& options);

/// Everything sparse_mla_prefill reads and writes: the decode's rules for the
/// arguments both take (a prefill row is a decode row).
params::SparsePrefillParams validate_sparse_prefill(const Check& check, Format format, const TensorView& q,
                                                    const TensorView& kv_cache, const TensorView& indices,
                                                    const TensorView& out, const TensorView& lse,
                                                    const SparsePrefillOptions& options);

params::MergeParams validate_merge(const Check& check, const TensorView& out_a, const TensorView& lse_a,
                                   const TensorView& out_b, const TensorView& lse_b, const TensorView& out,
                                   const TensorView& lse);

}  // namespace mlakv::api
