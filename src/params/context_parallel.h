// SPDX-License-Identifier: Apache-2.0
// The arithmetic of the context-parallel steps, written once for the CPU loops
// and the CUDA kernels: where vLLM's interleaved layout puts a token (this
// rank's slot or -1), and the N-way merge of partial attention results.
#pragma once

#include <cmath>
#include <cstdint>

#include "codec/element.h"
#include "params/attention_params.h"
#include "params/merge.h"

namespace mlakv::params {

struct LocalSlotsParams {
  const std::int32_t* indices;  // [R, K] token positions
  std::int64_t indices_stride_row_elems;
  const std::int32_t* req_id;       // [R]
  const std::int32_t* block_table;  // [num_reqs, max_blocks]
  std::int64_t table_stride_row_elems;
  std::int64_t num_reqs;
  std::int64_t max_blocks;
  std::int32_t* local_slots;  // [R, K]
  std::int64_t local_stride_row_elems;
  std::int64_t rows;
  std::int64_t topk;
  std::int64_t world_size;
  std::int64_t rank;
  std::int64_t interleave;
  std::int64_t block_size;
};

/// This rank's flat slot of position `position` of block-table row `req`, or -1
/// (vLLM's _compute_slot_mapping_kernel, read for one rank).
MLAKV_HD std::int32_t local_slot(const LocalSlotsParams& p, std::int32_t req, std::int32_t position) {
  if (position < 0 || req < 0 || req >= p.num_reqs) return -1;
  const std::int64_t virtual_block = p.block_size * p.world_size;
  const std::int64_t block = position / virtual_block;
  if (block >= p.max_blocks) return -1;
  const std::int64_t v = position - block * virtual_block;
  if ((v / p.interleave) % p.world_size != p.rank) return -1;
  const std::int64_t id = p.block_table[req * p.table_stride_row_elems + block];
  if (id < 0) return -1;
  const std::int64_t slot = id * p.block_size + (v / (p.interleave * p.world_size)) * p.interleave + v % p.interleave;
  return slot > INT32_MAX ? -1 : static_cast<std::int32_t>(slot);
}

/// Partials one N-way merge takes at most (a DCP group is a node's GPUs: 8 today).
inline constexpr std::int64_t kMaxMergeParts = 64;

struct StackedMergeParams {
  bool out_is_float32;  // else bf16
  std::int64_t parts;   // N
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t width;
  const void* outs;  // [N, R, H, D]
  std::int64_t outs_stride_part_elems;
  std::int64_t outs_stride_row_elems;
  std::int64_t outs_stride_head_elems;
  const float* lses;  // [N, R, H]
  std::int64_t lses_stride_part_elems;
  std::int64_t lses_stride_row_elems;
  std::int64_t lses_stride_head_elems;
  AttentionState merged;  // [R, H, D] and [R, H]
};

MLAKV_HD float stacked_lse(const StackedMergeParams& p, std::int64_t part, std::int64_t row, std::int64_t head) {
  return p.lses[part * p.lses_stride_part_elems + row * p.lses_stride_row_elems + head * p.lses_stride_head_elems];
}

/// The largest lse of (row, head) over the N partials (-inf when all are).
MLAKV_HD float stacked_max_lse(const StackedMergeParams& p, std::int64_t row, std::int64_t head) {
  float m = -INFINITY;
  for (std::int64_t n = 0; n < p.parts; ++n) m = fmaxf(m, stacked_lse(p, n, row, head));
  return m;
}

/// Partial n's weight e^(lse_n - max): 0 for lse -inf (or all -inf).
MLAKV_HD float stacked_weight(const StackedMergeParams& p, std::int64_t part, std::int64_t row, std::int64_t head,
                              float max_lse) {
  const float l = stacked_lse(p, part, row, head);
  return max_lse == -INFINITY || l == -INFINITY ? 0.0f : expf(l - max_lse);
}

MLAKV_HD float load_stacked(const StackedMergeParams& p, std::int64_t offset) {
  if (p.out_is_float32) return static_cast<const float*>(p.outs)[offset];
  return codec::load_input<codec::InputDtype::kBf16>(static_cast<const std::uint16_t*>(p.outs)[offset]);
}

MLAKV_HD void store_merged(const StackedMergeParams& p, std::int64_t offset, float v) {
  if (p.out_is_float32) {
    static_cast<float*>(p.merged.out)[offset] = v;
  } else {
    static_cast<std::uint16_t*>(p.merged.out)[offset] = codec::encode_bf16(v);
  }
}

/// Dims [d0, d1) of the merged (row, head), given the N weights and their sum.
/// A weight of 0 skips its partial (its out may hold anything, NaN included);
/// a NaN sum (a partial's lse NaN or +inf) makes every dim NaN, as the two-way merge.
MLAKV_HD void merge_dims(const StackedMergeParams& p, std::int64_t row, std::int64_t head, const float* weights,
                         float sum, std::int64_t d0, std::int64_t d1, std::int64_t step) {
  const std::int64_t out = row * p.merged.out_stride_row_elems + head * p.merged.out_stride_head_elems;
  const std::int64_t in = row * p.outs_stride_row_elems + head * p.outs_stride_head_elems;
  for (std::int64_t d = d0; d < d1; d += step) {
    float acc = 0.0f;
    for (std::int64_t n = 0; n < p.parts; ++n) {
      const float w = weights[n];
      if (w > 0.0f) acc += w * load_stacked(p, n * p.outs_stride_part_elems + in + d);
    }
    store_merged(p, out + d, sum == 0.0f ? 0.0f : acc / sum);  // a NaN sum (a NaN or +inf lse) gives NaN
  }
}

/// The merged lse: -inf when every partial is empty; NaN when a partial's lse
/// is NaN or +inf (its weight, and so the sum, is NaN), as the two-way merge.
MLAKV_HD float merged_lse(float max_lse, float sum) { return sum == 0.0f ? -INFINITY : max_lse + logf(sum); }

}  // namespace mlakv::params
