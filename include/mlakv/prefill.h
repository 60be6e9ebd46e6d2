// SPDX-License-Identifier: Apache-2.0
// Prefill-time sparse MLA attention that reads compact records directly: each
// of s_q query rows (a prompt's tokens) attends to the top-k cached tokens an
// indexer selected for it, with sparse_mla_decode's semantics exactly (a
// prefill row is a decode row: keys are the records' bf16 decode, entries
// that are negative, past the cache's capacity or past topk_len[r] are never
// read, natural-log lse, zeros and lse = -inf for a row without a valid
// entry). What differs is the shape of the work: many rows that share nothing
// but the cache, none split (no workspace). CUDA runs the decode's kernels
// over them today (docs/prefill.md: the prefill kernels measured so far were
// slower); the name is where a faster prefill kernel goes.
#pragma once

#include "mlakv/attention.h"
#include "mlakv/formats.h"
#include "mlakv/readers.h"
#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv {

struct SparsePrefillOptions {
  /// Score scale; 0 means the default 1/sqrt(d_qk) (576 or 512).
  float sm_scale = 0.0f;
  /// [s_q] int32 (optional): row r uses only its first topk_len[r] entries
  /// (values are clamped to [0, topk]).
  const TensorView* topk_len = nullptr;
  /// rope_dtype (fp8_ds_mla) and scale (fp8_e4m3), as for gather_records.
  GatherOptions decode = {};
  /// [H] float32 (optional, DeepSeek V4 family): a per-head attention sink,
  /// as sparse_mla_decode's: out is scaled by e^lse / (e^lse + e^sink[h]),
  /// lse is unchanged; -inf: no sink.
  const TensorView* attn_sink = nullptr;
};

/// Formats: those supports(format, backend, Operation::kPrefill) names. CPU
/// arrays run the decode's float32 reference; CUDA arrays launch on `stream`
/// without synchronizing or allocating (graph capturable).
void sparse_mla_prefill(Format format,
                        const TensorView& q,         // [s_q, H, d_qk] bf16, innermost-contiguous (d_qk 576 or 512)
                        const TensorView& kv_cache,  // [num_blocks, block_size, record_bytes] uint8
                        const TensorView& indices,   // [s_q, topk] int32 flat slots, innermost-contiguous
                        const TensorView& out,       // [s_q, H, 512] bf16, written
                        const TensorView& lse,       // [s_q, H] float32, written
                        const SparsePrefillOptions& options = {}, StreamHandle stream = nullptr);

}  // namespace mlakv
