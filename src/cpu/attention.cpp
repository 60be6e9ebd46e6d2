// SPDX-License-Identifier: Apache-2.0
// CPU attention: the float32 reference of the sparse decode and of the merge.
// Keys and values are the records' bf16 decodes (the readers' bf16 output):
// 576-value keys with 512-value values, or the DeepSeek V4 family's 512 and 512.
#include <algorithm>
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

// Keys are decoded and attended in chunks, so a call's temporaries are bounded
// whatever K is (a row of a million entries needs no more memory than one of
// kChunkKeys); a row of at most kChunkKeys valid entries is the plain
// two-pass softmax.
constexpr std::int64_t kChunkKeys = 2048;

// Walks a row's entries, main cache first, then the extra cache, and hands out
// the valid ones a chunk at a time.
class RowEntries {
 public:
  RowEntries(const params::SparseDecodeParams& p, std::int64_t row)
      : p_(p),
        sets_{{p.format, &p.cache, p.indices + row * p.indices_stride_row_elems, params::row_entries(p, row)},
              {p.extra.format, &p.extra.cache,
               p.extra.topk > 0 ? p.extra.indices + row * p.extra.indices_stride_row_elems : nullptr,
               p.extra.topk > 0 ? params::extra_row_entries(p, row) : 0}} {}

  /// Decodes up to kChunkKeys more valid entries' keys into `keys` ([n, qk_dim]); returns n (0: done).
  std::int64_t next_chunk(std::vector<float>& keys) {
    keys.clear();
    std::int64_t n = 0;
    while (set_ < 2 && n < kChunkKeys) {
      const Set& s = sets_[set_];
      slots_.clear();
      for (; entry_ < s.count && n + static_cast<std::int64_t>(slots_.size()) < kChunkKeys; ++entry_) {
        if (params::slot_in_range(*s.cache, s.entries[entry_])) slots_.push_back(s.entries[entry_]);
      }
      decode(s, keys);
      n += static_cast<std::int64_t>(slots_.size());
      if (entry_ == s.count) {
        ++set_;
        entry_ = 0;
      }
    }
    return n;
  }

 private:
  struct Set {
    Format format;
    const params::CacheLayout* cache;
    const std::int32_t* entries;
    std::int64_t count;
  };

  // Appends the keys of slots_ (decoded with set `s`'s codec) to `keys`.
  void decode(const Set& s, std::vector<float>& keys) const {
    const std::int64_t key_dim = p_.qk_dim;
    const std::size_t first = keys.size();
    keys.resize(first + slots_.size() * static_cast<std::size_t>(key_dim));
    float* out = keys.data() + first;
    const auto n = static_cast<std::int64_t>(slots_.size());
    if (codec::is_part_coded(s.format)) {
      codec::visit_part_codec(s.format, [&]<class Codec>(codec::Tag<Codec>) {
        parallel_for(
            n, [&](std::int64_t j) { decode_part_coded_key<Codec>(*s.cache, slots_[j], out + j * key_dim); }, 64);
      });
      return;
    }
    codec::visit_codec(s.format, [&]<class Codec>(codec::Tag<Codec>) {
      parallel_for(
          n,
          [&](std::int64_t j) {
            decode_key<Codec>(params::record_address(*s.cache, slots_[j]), p_.decode, out + j * key_dim);
          },
          64);
    });
  }

  const params::SparseDecodeParams& p_;
  Set sets_[2];
  int set_ = 0;
  std::int64_t entry_ = 0;
  std::vector<std::int64_t> slots_;
};

// A head's softmax so far: running max m, sum l of e^(score - m), and the
// e^(score - m)-weighted sum of values.
struct HeadState {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  float acc[kValueDim] = {};
};

// Adds a chunk of n keys to one (row, head): the chunk's scores, their max,
// the state rescaled to it (exact for the first chunk: a two-pass softmax),
// then the chunk's weights; values are a key's first 512 values.
void attend_chunk(const params::SparseDecodeParams& p, std::int64_t row, std::int64_t head,
                  const std::vector<float>& keys, std::int64_t n, HeadState& state) {
  const std::int64_t key_dim = p.qk_dim;
  const std::uint16_t* q_bits = p.q + row * p.q_stride_row_elems + head * p.q_stride_head_elems;
  float q[kMaxKeyDim];
  for (std::int64_t d = 0; d < key_dim; ++d) q[d] = widen_bf16(q_bits[d]);
  std::vector<float> scores(static_cast<std::size_t>(n));
  float m = state.m;
  for (std::int64_t j = 0; j < n; ++j) {
    const float* key = keys.data() + j * key_dim;
    float dot = 0.0f;
    for (std::int64_t d = 0; d < key_dim; ++d) dot += q[d] * key[d];
    scores[j] = p.sm_scale * dot;
    m = std::fmax(m, scores[j]);
  }
  if (state.l > 0.0f && m != state.m) {
    const float rescale = std::exp(state.m - m);
    state.l *= rescale;
    for (float& a : state.acc) a *= rescale;
  }
  state.m = m;
  for (std::int64_t j = 0; j < n; ++j) {
    const float w = std::exp(scores[j] - m);
    state.l += w;
    const float* value = keys.data() + j * key_dim;
    for (int d = 0; d < kValueDim; ++d) state.acc[d] += w * value[d];
  }
}

void store_head(const params::SparseDecodeParams& p, std::int64_t row, std::int64_t head, const HeadState& state,
                bool any) {
  const float lse = any ? state.m + std::log(state.l) : -std::numeric_limits<float>::infinity();
  const float sink = params::sink_factor(p, head, lse);
  std::uint16_t* out = p.out + row * p.out_stride_row_elems + head * p.out_stride_head_elems;
  for (int d = 0; d < kValueDim; ++d) out[d] = codec::encode_bf16(any ? state.acc[d] / state.l * sink : 0.0f);
  p.lse[row * p.lse_stride_row_elems + head * p.lse_stride_head_elems] = lse;
}

}  // namespace

void sparse_mla_decode(const params::SparseDecodeParams& p) {
  std::vector<float> keys;
  std::vector<HeadState> heads(static_cast<std::size_t>(p.heads));
  for (std::int64_t row = 0; row < p.rows; ++row) {
    std::fill(heads.begin(), heads.end(), HeadState{});
    RowEntries entries(p, row);
    bool any = false;
    for (std::int64_t n = entries.next_chunk(keys); n > 0; n = entries.next_chunk(keys)) {
      any = true;
      parallel_for(
          p.heads, [&](std::int64_t head) { attend_chunk(p, row, head, keys, n, heads[head]); }, 1);
    }
    for (std::int64_t head = 0; head < p.heads; ++head) store_head(p, row, head, heads[head], any);
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
