// SPDX-License-Identifier: Apache-2.0
// Validated descriptions of one sparse decode and one merge: what the public
// attention API hands to a backend. Strides are in elements.
#pragma once

#include <cstdint>

#include "params/params.h"

namespace mlakv::params {

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

/// The entries of row r a decode uses: the first min(max(topk_len[r], 0), K).
MLAKV_HD std::int64_t row_entries(const SparseDecodeParams& p, std::int64_t row) {
  if (p.topk_len == nullptr) return p.topk;
  const std::int64_t n = p.topk_len[row];
  return n < 0 ? 0 : (n > p.topk ? p.topk : n);
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
