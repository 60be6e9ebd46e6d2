// SPDX-License-Identifier: Apache-2.0
// Each public call's argument checks without the call: everything it would
// validate (devices, dtypes, shapes, strides, alignment, overlap, the format's
// rules) and throw as mlakv::Error, and nothing run. Data is never read except
// a CPU k_scale's value, so the views may describe memory that does not exist
// (torch's fake tensors: mlakv.torch's fake implementations call these, so a
// traced program refuses what running it would).
#pragma once

#include <string_view>

#include "mlakv/attention.h"
#include "mlakv/context_parallel.h"
#include "mlakv/formats.h"
#include "mlakv/prefill.h"
#include "mlakv/readers.h"
#include "mlakv/tensor_view.h"

namespace mlakv {

void check_concat_and_cache_mla(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                                const TensorView& slot_mapping, std::string_view kv_cache_dtype,
                                const TensorView* scale = nullptr);

void check_concat_and_cache_nvfp4_mla_fp8_rope(const TensorView& kv_c, const TensorView& k_pe,
                                               const TensorView& kv_cache, const TensorView& slot_mapping,
                                               const TensorView* scale = nullptr, bool per_token_scale = false);

void check_gather_records(Format format, const TensorView& kv_cache, const TensorView& slots,
                          const TensorView& kv_c_out, const TensorView& k_pe_out, const GatherOptions& options = {});

void check_gather_records_paged(Format format, const TensorView& kv_cache, const TensorView& block_table,
                                const TensorView& seq_lens, const TensorView& cu_seq_lens, const TensorView& kv_c_out,
                                const TensorView& k_pe_out, const GatherOptions& options = {});

void check_sparse_mla_decode(Format format, const TensorView& q, const TensorView& kv_cache, const TensorView& indices,
                             const TensorView& out, const TensorView& lse, const SparseDecodeOptions& options = {});

void check_sparse_mla_prefill(Format format, const TensorView& q, const TensorView& kv_cache, const TensorView& indices,
                              const TensorView& out, const TensorView& lse, const SparsePrefillOptions& options = {});

void check_merge_attention_states(const TensorView& out_a, const TensorView& lse_a, const TensorView& out_b,
                                  const TensorView& lse_b, const TensorView& out, const TensorView& lse);
void check_dcp_local_slots(const TensorView& indices, const TensorView& req_id, const TensorView& block_table,
                           const TensorView& local_slots, const ContextParallelLayout& layout);
void check_merge_attention_states(const TensorView& outs, const TensorView& lses, const TensorView& out,
                                  const TensorView& lse);

}  // namespace mlakv
