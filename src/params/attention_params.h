// SPDX-License-Identifier: Apache-2.0
// Validated descriptions of one sparse decode and one merge: what the public
// attention API hands to a backend. Strides are in elements.
#pragma once

#include <cmath>
#include <cstdint>

#include "params/params.h"

namespace mlakv::params {

/// A second key set (SparseDecodeExtraCache): rows attend to its entries
/// together with the main cache's. topk = 0 when there is none.
struct ExtraKeySet {
  Format format;
  CacheLayout cache;
  const std::int32_t* indices;  // [R, topk]
  std::int64_t indices_stride_row_elems;
  const std::int32_t* topk_len;  // [R] or null
  std::int64_t topk;
};

/// What the kernels of the 512 + 64 records read (passed by value: its
/// layout is theirs, so fields the DeepSeek V4 family adds live in
/// SparseAttentionParams, not here).
struct SparseDecodeParams {
  Format format;
  CacheLayout cache;
  codec::DecodeParams decode;
  const float* k_scale_device;  // when set (CUDA), replaces decode.k_scale
  const std::uint16_t* q;       // [R, H, 576] bf16
  std::int64_t q_stride_row_elems;
  std::int64_t q_stride_head_elems;
  const std::int32_t* indices;  // [R, K]
  std::int64_t indices_stride_row_elems;
  const std::int32_t* topk_len;  // [R] or null
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t topk;
  float sm_scale;
  std::uint16_t* out;  // [R, H, 512] bf16
  std::int64_t out_stride_row_elems;
  std::int64_t out_stride_head_elems;
  float* lse;  // [R, H]
  std::int64_t lse_stride_row_elems;
  std::int64_t lse_stride_head_elems;
  void* workspace;  // CUDA split-K partials, or null
  std::int64_t workspace_bytes;
};

/// A validated sparse attention call (decode or prefill): the 512 + 64
/// kernels' parameters and the DeepSeek V4 family's d_qk, sink and extra cache.
struct SparseAttentionParams : SparseDecodeParams {
  std::int64_t qk_dim;     // q's and a key's values: 576 (V3.2-era formats) or 512 (DeepSeek V4 family)
  const float* attn_sink;  // [H] or null: out *= e^lse / (e^lse + e^sink[h])
  std::int64_t attn_sink_stride_elems;
  ExtraKeySet extra;  // extra.topk == 0: none
};

/// The first min(max(topk_len[r], 0), topk) entries of row r (all topk without lengths).
MLAKV_HD std::int64_t clamped_entries(const std::int32_t* topk_len, std::int64_t topk, std::int64_t row) {
  if (topk_len == nullptr) return topk;
  const std::int64_t n = topk_len[row];
  return n < 0 ? 0 : (n > topk ? topk : n);
}

/// The entries of row r a decode uses: the first min(max(topk_len[r], 0), K).
MLAKV_HD std::int64_t row_entries(const SparseDecodeParams& p, std::int64_t row) {
  if (p.topk_len == nullptr) return p.topk;
  const std::int64_t n = p.topk_len[row];
  return n < 0 ? 0 : (n > p.topk ? p.topk : n);
}

/// The extra key set's entries of row r.
MLAKV_HD std::int64_t extra_row_entries(const SparseAttentionParams& p, std::int64_t row) {
  return clamped_entries(p.extra.topk_len, p.extra.topk, row);
}

/// The factor a sink scales a head's output by: e^lse / (e^lse + e^sink) =
/// 1 / (1 + e^(sink - lse)); 1 without a sink, 0 for a row with no key
/// (lse = -inf; its output is zeros anyway).
MLAKV_HD float sink_factor(const SparseAttentionParams& p, std::int64_t head, float lse) {
  if (p.attn_sink == nullptr) return 1.0f;
  if (lse == -INFINITY) return 0.0f;
  return 1.0f / (1.0f + expf(p.attn_sink[head * p.attn_sink_stride_elems] - lse));
}

/// One [R, H, width] array and its [R, H] lse: a side of a merge.
struct AttentionState {
  void* out;
  std::int64_t out_stride_row_elems;
  std::int64_t out_stride_head_elems;
  float* lse;
  std::int64_t lse_stride_row_elems;
  std::int64_t lse_stride_head_elems;
};

struct MergeParams {
  bool out_is_float32;  // else bf16
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t width;
  AttentionState a;
  AttentionState b;
  AttentionState merged;
};

}  // namespace mlakv::params
