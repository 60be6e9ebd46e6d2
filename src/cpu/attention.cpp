// SPDX-License-Identifier: Apache-2.0
// CPU attention: the float32 reference of the sparse decode and of the merge.
// Keys and values are the records' bf16 decodes (the readers' bf16 output).
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel_for.h"
#include "dispatch/visit_codec.h"
#include "mlakv/vocabulary.h"
#include "params/merge.h"

namespace mlakv::cpu {
namespace {

constexpr int kKeyDim = kQueryDim;

float widen_bf16(std::uint16_t bits) { return codec::load_input<codec::InputDtype::kBf16>(bits); }

template <class Codec>
void decode_key(const std::uint8_t* record, const codec::DecodeParams& params, float* key) {
  for (int lane = 0; lane < codec::kLanes; ++lane) {
    std::uint16_t kv[codec::kLatentPerLane];
    std::uint16_t pe[codec::kRopePerLane];
    codec::decode_lane_bf16_bits<Codec>(lane, record, params, kv, pe);
    for (int i = 0; i < codec::kLatentPerLane; ++i) key[lane * codec::kLatentPerLane + i] = widen_bf16(kv[i]);
    for (int i = 0; i < codec::kRopePerLane; ++i) {
      key[codec::kLatentDim + lane * codec::kRopePerLane + i] = widen_bf16(pe[i]);
    }
  }
}

// One (row, head): scores, then a two-pass softmax over the row's keys.
void attend(const params::SparseDecodeParams& p, std::int64_t row, std::int64_t head, const std::vector<float>& keys,
            std::int64_t n) {
  const std::uint16_t* q_bits = p.q + row * p.q_stride_row_elems + head * p.q_stride_head_elems;
  float q[kKeyDim];
  for (int d = 0; d < kKeyDim; ++d) q[d] = widen_bf16(q_bits[d]);
  std::vector<float> scores(static_cast<std::size_t>(n));
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t j = 0; j < n; ++j) {
    const float* key = keys.data() + j * kKeyDim;
    float dot = 0.0f;
    for (int d = 0; d < kKeyDim; ++d) dot += q[d] * key[d];
    scores[j] = p.sm_scale * dot;
    m = std::fmax(m, scores[j]);
  }
  float acc[kValueDim] = {};
  float l = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    const float w = std::exp(scores[j] - m);
    l += w;
    const float* value = keys.data() + j * kKeyDim;
    for (int d = 0; d < kValueDim; ++d) acc[d] += w * value[d];
  }
  std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems;
  for (int d = 0; d < kValueDim; ++d) out[d] = codec::encode_bf16(n > 0 ? acc[d] / l : 0.0f);
  p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] =
      n > 0 ? m + std::log(l) : -std::numeric_limits<float>::infinity();
}

}  // namespace

void sparse_mla_decode(const params::SparseDecodeParams& p) {
  codec::visit_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) {
    std::vector<std::int64_t> slots;
    std::vector<float> keys;
    for (std::int64_t row = 0; row < p.rows; ++row) {
      slots.clear();
      const std::int64_t entries = params::row_entries(p, row);
      for (std::int64_t i = 0; i < entries; ++i) {
        const std::int64_t slot = p.indices[row * p.indices_stride_row_elems + i];
        if (params::slot_in_range(p.cache, slot)) slots.push_back(slot);
      }
      const auto n = static_cast<std::int64_t>(slots.size());
      keys.resize(static_cast<std::size_t>(n) * kKeyDim);
      parallel_for(
          n,
          [&](std::int64_t j) {
            decode_key<Codec>(params::record_address(p.cache, slots[j]), p.decode, keys.data() + j * kKeyDim);
          },
          64);
      parallel_for(
          p.heads, [&](std::int64_t head) { attend(p, row, head, keys, n); }, 1);
    }
  });
}

void merge_attention_states(const params::MergeParams& p) {
  parallel_for(
      p.rows * p.heads,
      [&p](std::int64_t i) {
        const std::int64_t r = i / p.heads;
        const std::int64_t h = i % p.heads;
        const params::MergeWeights w = params::merge_weights(params::lse_at(p.a, r, h), params::lse_at(p.b, r, h));
        const std::int64_t a = params::out_offset(p.a, r, h);
        const std::int64_t b = params::out_offset(p.b, r, h);
        const std::int64_t out = params::out_offset(p.merged, r, h);
        for (std::int64_t d = 0; d < p.width; ++d) {
          params::store_state(
              p, p.merged, out + d,
              params::merged_value(w, params::load_state(p, p.a, a + d), params::load_state(p, p.b, b + d)));
        }
        params::lse_at(p.merged, r, h) = params::merged_lse(w);
      },
      64);
}

}  // namespace mlakv::cpu
