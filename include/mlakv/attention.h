// SPDX-License-Identifier: Apache-2.0
// Decode-time attention that reads compact records directly: the sparse MLA
// decode of DeepSeek-V3.2 / GLM-5 and DeepSeek V4 style models (each query row
// attends to the top-k cached tokens an indexer selected), and the merge of
// partial results computed over disjoint key sets (context-parallel decode
// across GPUs).
//
// Keys are a record's decoded values exactly as gather_records' bf16 output
// gives them: d_qk = 576 (512 latent, then 64 RoPE) for the V3.2-era formats,
// whose values are the 512 latent values; d_qk = 512 (448 NoPE, then 64 RoPE)
// for the DeepSeek V4 family, whose values are all 512 (format_info(f).geometry
// says which). Scores are sm_scale * dot(q, key) in float32; out is softmax
// over a row's valid entries applied to the values; lse is the natural-log
// sum of exp(score) over those entries. A row with no valid entry gives zeros
// and lse = -inf. CPU arrays run the float32 reference; CUDA arrays launch on
// `stream` (tensor cores) without synchronizing or allocating.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mlakv/formats.h"
#include "mlakv/readers.h"
#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv {

/// A second set of keys a row attends to together with the main cache's
/// (DeepSeek V4: the main cache holds the sliding window, the extra cache the
/// compressed tokens the indexer picked). Its own format (a DeepSeek V4 family
/// format, as the main cache's: a V4.1 engine pairs fp8_ds_mla_v41 with
/// nvfp4_ds_mla_v41), cache, indices and lengths; its entries follow the same
/// rules as the main ones.
struct SparseDecodeExtraCache {
  Format format{};                       ///< required: a DeepSeek V4 family format
  const TensorView* kv_cache = nullptr;  ///< [num_blocks, block_size, record_bytes] uint8 (required)
  const TensorView* indices = nullptr;   ///< [R, K_extra] int32 flat slots, innermost-contiguous (required)
  const TensorView* topk_len = nullptr;  ///< [R] int32 (optional): row r uses its first topk_len[r] extra entries
};

struct SparseDecodeOptions {
  /// Score scale; 0 means the default 1/sqrt(d_qk) (576 or 512).
  float sm_scale = 0.0f;
  /// [R] int32 (optional): row r uses only its first topk_len[r] entries
  /// (values are clamped to [0, K]).
  const TensorView* topk_len = nullptr;
  /// rope_dtype (fp8_ds_mla) and scale (fp8_e4m3), as for gather_records.
  GatherOptions decode = {};
  /// CUDA only (optional): a uint8 buffer of at least
  /// sparse_mla_decode_workspace_size() bytes on the arrays' device. With it,
  /// long rows are split over more thread blocks and merged; without it each
  /// (row, 16 heads) is one thread block. The CPU ignores it after checking it
  /// as CUDA does (device, dtype, layout, no overlap with the other arguments).
  const TensorView* workspace = nullptr;
  /// [H] float32 (optional, DeepSeek V4 family): a per-head attention sink, a
  /// logit that takes softmax mass but carries no value: out is scaled by
  /// e^lse / (e^lse + e^sink[h]) (as FlashMLA), lse is unchanged. -inf: no sink.
  const TensorView* attn_sink = nullptr;
  /// (optional, DeepSeek V4 family) a second cache attended together with kv_cache.
  const SparseDecodeExtraCache* extra = nullptr;
};

/// Workspace bytes sparse_mla_decode uses on `device` for R query rows, H
/// heads and K entries per row (with an extra cache, K = K + K_extra; 0 on the
/// CPU). Depends only on these values and the device's SM count, so it is
/// fixed for a captured graph.
std::size_t sparse_mla_decode_workspace_size(std::int64_t rows, std::int64_t heads, std::int64_t topk, Device device);

/// Formats: those supports(format, backend, Operation::kDecode) names. An
/// entry that is negative or >= the cache's capacity, or past topk_len[r],
/// contributes nothing and is never read; a duplicate entry counts as many
/// times as it appears.
void sparse_mla_decode(Format format,
                       const TensorView& q,         // [R, H, d_qk] bf16, innermost-contiguous (d_qk 576 or 512)
                       const TensorView& kv_cache,  // [num_blocks, block_size, record_bytes] uint8
                       const TensorView& indices,   // [R, K] int32 flat slots, innermost-contiguous
                       const TensorView& out,       // [R, H, 512] bf16, written
                       const TensorView& lse,       // [R, H] float32, written
                       const SparseDecodeOptions& options = {}, StreamHandle stream = nullptr);

/// Combines two partial results over disjoint key sets into the result over
/// their union: out = (e^lse_a out_a + e^lse_b out_b) / (e^lse_a + e^lse_b),
/// lse = log(e^lse_a + e^lse_b). Exact up to rounding; a side with lse = -inf
/// contributes nothing. out may be out_a or out_b (same for lse).
void merge_attention_states(const TensorView& out_a,  // [R, H, 512] bf16 | float32
                            const TensorView& lse_a,  // [R, H] float32
                            const TensorView& out_b,  // [R, H, 512], out_a's dtype
                            const TensorView& lse_b,  // [R, H] float32
                            const TensorView& out,    // [R, H, 512], out_a's dtype, written
                            const TensorView& lse,    // [R, H] float32, written
                            StreamHandle stream = nullptr);

}  // namespace mlakv
