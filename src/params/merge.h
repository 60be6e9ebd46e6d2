// SPDX-License-Identifier: Apache-2.0
// The arithmetic of merge_attention_states, written once for the CPU loop and
// the CUDA kernel: weights exp(lse - max) of the two sides, their weighted
// mean, and the merged lse. A side of weight 0 (lse -inf, or underflow) adds
// nothing, whatever its output holds.
#pragma once

#include <cmath>
#include <cstdint>

#include "codec/element.h"
#include "params/attention_params.h"

namespace mlakv::params {

struct MergeWeights {
  float a;
  float b;
  float sum;
  float max;
  bool empty;  // both sides -inf: zeros and lse -inf
};

MLAKV_HD MergeWeights merge_weights(float lse_a, float lse_b) {
  const float m = fmaxf(lse_a, lse_b);
  const bool empty = m == -INFINITY;
  const float wa = empty ? 0.0f : expf(lse_a - m);
  const float wb = empty ? 0.0f : expf(lse_b - m);
  return {wa, wb, wa + wb, m, empty};
}

MLAKV_HD float merged_value(const MergeWeights& w, float va, float vb) {
  const float ta = w.a > 0.0f ? w.a * va : 0.0f;
  const float tb = w.b > 0.0f ? w.b * vb : 0.0f;
  return w.empty ? 0.0f : (ta + tb) / w.sum;
}

MLAKV_HD float merged_lse(const MergeWeights& w) { return w.empty ? w.max : w.max + logf(w.sum); }

MLAKV_HD std::int64_t out_offset(const AttentionState& s, std::int64_t row, std::int64_t head) {
  return row * s.out_stride_row_elems + head * s.out_stride_head_elems;
}

MLAKV_HD float& lse_at(const AttentionState& s, std::int64_t row, std::int64_t head) {
  return s.lse[row * s.lse_stride_row_elems + head * s.lse_stride_head_elems];
}

/// Element `offset` of a side's output, float32 or bf16.
MLAKV_HD float load_state(const MergeParams& p, const AttentionState& s, std::int64_t offset) {
  if (p.out_is_float32) return static_cast<const float*>(s.out)[offset];
  return codec::load_input<codec::InputDtype::kBf16>(static_cast<const std::uint16_t*>(s.out)[offset]);
}

MLAKV_HD void store_state(const MergeParams& p, const AttentionState& s, std::int64_t offset, float v) {
  if (p.out_is_float32) {
    static_cast<float*>(s.out)[offset] = v;
  } else {
    static_cast<std::uint16_t*>(s.out)[offset] = codec::encode_bf16(v);
  }
}

}  // namespace mlakv::params
