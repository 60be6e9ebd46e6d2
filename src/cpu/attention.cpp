// SPDX-License-Identifier: Apache-2.0
// CPU attention: the float32 reference of the sparse decode and of the merge.
// Keys and values are the records' bf16 decodes (the readers' bf16 output):
// 576-value keys with 512-value values, or the DeepSeek V4 family's 512 and 512.
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

constexpr int kMaxKeyDim = kQueryDim;  // 576; the DeepSeek V4 family's keys are 512

float widen_bf16(std::uint16_t bits) { return codec::load_input<codec::InputDtype::kBf16>(bits); }

// A key as the readers' bf16 output gives it: a 512 + 64 record's 576 values.
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

// A DeepSeek V4 family key: its 448 NoPE then 64 RoPE values, rounded to bf16 as the readers' bf16 output.
template <class Codec>
void decode_part_coded_key(const params::CacheLayout& cache, std::int64_t slot, float* key) {
  const params::PagePosition at = params::page_position(cache, slot);
  Codec::decode_token(params::field_address(cache, at, Codec::kDataRow.region, Codec::kDataRow.offset),
                      params::field_address(cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset), key,
                      key + Codec::kNope);
  for (int d = 0; d < Codec::kNope + Codec::kRope; ++d) key[d] = widen_bf16(codec::encode_bf16(key[d]));
}

// The keys one cache contributes to a row: its valid entries, decoded [n, key_dim] after `keys`' current end.
void append_keys(Format format, const params::CacheLayout& cache, const codec::DecodeParams& decode,
                 const std::int32_t* entries, std::int64_t count, std::int64_t key_dim, std::vector<float>& keys) {
  std::vector<std::int64_t> slots;
  for (std::int64_t i = 0; i < count; ++i) {
    if (params::slot_in_range(cache, entries[i])) slots.push_back(entries[i]);
  }
  const std::size_t first = keys.size();
  keys.resize(first + slots.size() * static_cast<std::size_t>(key_dim));
  float* out = keys.data() + first;
  const auto n = static_cast<std::int64_t>(slots.size());
  if (codec::is_part_coded(format)) {
    codec::visit_part_codec(format, [&]<class Codec>(codec::Tag<Codec>) {
      parallel_for(
          n, [&](std::int64_t j) { decode_part_coded_key<Codec>(cache, slots[j], out + j * key_dim); }, 64);
    });
    return;
  }
  codec::visit_codec(format, [&]<class Codec>(codec::Tag<Codec>) {
    parallel_for(
        n,
        [&](std::int64_t j) { decode_key<Codec>(params::record_address(cache, slots[j]), decode, out + j * key_dim); },
        64);
  });
}

// One (row, head): scores, then a two-pass softmax over the row's keys; values are a key's first 512 values.
void attend(const params::SparseDecodeParams& p, std::int64_t row, std::int64_t head, const std::vector<float>& keys,
            std::int64_t n) {
  const std::int64_t key_dim = p.qk_dim;
  const std::uint16_t* q_bits = p.q + row * p.q_stride_row_elems + head * p.q_stride_head_elems;
  float q[kMaxKeyDim];
  for (std::int64_t d = 0; d < key_dim; ++d) q[d] = widen_bf16(q_bits[d]);
  std::vector<float> scores(static_cast<std::size_t>(n));
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t j = 0; j < n; ++j) {
    const float* key = keys.data() + j * key_dim;
    float dot = 0.0f;
    for (std::int64_t d = 0; d < key_dim; ++d) dot += q[d] * key[d];
    scores[j] = p.sm_scale * dot;
    m = std::fmax(m, scores[j]);
  }
  float acc[kValueDim] = {};
  float l = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    const float w = std::exp(scores[j] - m);
    l += w;
    const float* value = keys.data() + j * key_dim;
    for (int d = 0; d < kValueDim; ++d) acc[d] += w * value[d];
  }
  const float lse = n > 0 ? m + std::log(l) : -std::numeric_limits<float>::infinity();
  const float sink = params::sink_factor(p, head, lse);
  std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems;
  for (int d = 0; d < kValueDim; ++d) out[d] = codec::encode_bf16(n > 0 ? acc[d] / l * sink : 0.0f);
  p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = lse;
}

}  // namespace

void sparse_mla_decode(const params::SparseDecodeParams& p) {
  std::vector<float> keys;
  for (std::int64_t row = 0; row < p.rows; ++row) {
    keys.clear();
    append_keys(p.format, p.cache, p.decode, p.indices + row * p.indices_stride_row_elems, params::row_entries(p, row),
                p.qk_dim, keys);
    if (p.extra.topk > 0) {
      append_keys(p.extra.format, p.extra.cache, p.decode, p.extra.indices + row * p.extra.indices_stride_row_elems,
                  params::extra_row_entries(p, row), p.qk_dim, keys);
    }
    const auto n = static_cast<std::int64_t>(keys.size()) / p.qk_dim;
    parallel_for(
        p.heads, [&](std::int64_t head) { attend(p, row, head, keys, n); }, 1);
  }
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
