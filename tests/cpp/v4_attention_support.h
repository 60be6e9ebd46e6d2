// SPDX-License-Identifier: Apache-2.0
// Shared by the DeepSeek V4 decode tests (CPU and CUDA): a cache of
// synthetic V4 tokens (448 NoPE + 64 RoPE) in one V4-family format, written
// into padded pages as the engines lay them out, the keys as gather_records'
// bf16 output gives them, and an independent double-precision attention over
// a main and an extra cache with per-row lengths and a per-head sink: the
// reference the library's decode must match.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attention_support.h"
#include "mlakv/mlakv.h"
#include "test_support.h"

namespace mlakv::test {

constexpr int kV4Nope = 448;
constexpr int kV4Rope = 64;
constexpr int kV4Dim = kV4Nope + kV4Rope;  // d_qk, and the value width

/// The DeepSeek V4 family's formats: those whose token is 448 NoPE + 64 RoPE values.
inline std::vector<Format> v4_formats() {
  std::vector<Format> out;
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims == kV4Nope) out.push_back(info.format);
  }
  return out;
}

/// `tokens` V4 tokens written into [num_blocks, block_size, record] pages of
/// page_bytes() each (the padded page of a block-planar format).
struct V4Cache {
  Format format;
  std::int64_t tokens;
  std::int64_t block_size;
  std::int64_t num_blocks;
  std::int64_t block_stride;
  std::vector<std::uint8_t> bytes;

  V4Cache(Format f, std::int64_t n, std::int64_t block, std::uint64_t seed)
      : format(f), tokens(n), block_size(block), num_blocks((n + block - 1) / block) {
    block_stride = page_bytes(format_info(f), block_size);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::uint16_t> nope(static_cast<std::size_t>(n) * kV4Nope);
    std::vector<std::uint16_t> rope(static_cast<std::size_t>(n) * kV4Rope);
    for (auto& v : nope) v = round_bf16(0.5f * normal(rng));
    for (auto& v : rope) v = round_bf16(normal(rng));
    bytes.assign(static_cast<std::size_t>(num_blocks * block_stride), 0xA5);
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) slots[t] = t;
    write_records(f, make_view(nope.data(), DType::kBFloat16, {n, kV4Nope}),
                  make_view(rope.data(), DType::kBFloat16, {n, kV4Rope}), view(),
                  make_view(slots.data(), DType::kInt64, {n}));
  }

  TensorView view() { return view_of(bytes.data()); }
  /// The same layout over another copy of the bytes (a device copy).
  TensorView view_of(void* data) const {
    TensorView v = make_view(data, DType::kUInt8, {num_blocks, block_size, record_bytes()});
    v.strides[0] = block_stride;
    v.strides[1] = record_bytes();
    return v;
  }
  int record_bytes() const { return format_info(format).record_bytes; }
  std::int64_t capacity() const { return num_blocks * block_size; }

  /// The [512] bf16 key of every slot (448 NoPE then 64 RoPE), widened, as gather_records gives it.
  std::vector<float> keys() {
    const std::int64_t n = capacity();
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) slots[t] = t;
    std::vector<std::uint16_t> rows(static_cast<std::size_t>(n) * kV4Dim);
    TensorView nope = make_view(rows.data(), DType::kBFloat16, {n, kV4Nope});
    nope.strides[0] = kV4Dim;
    TensorView rope = make_view(rows.data() + kV4Nope, DType::kBFloat16, {n, kV4Rope});
    rope.strides[0] = kV4Dim;
    gather_records(format, view(), make_view(slots.data(), DType::kInt64, {n}), nope, rope);
    std::vector<float> out(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) out[i] = codec::load_input<codec::InputDtype::kBf16>(rows[i]);
    return out;
  }
};

/// One key set's entries: [R, K] slots (-1 and past-capacity slots are skipped) and optional [R] lengths.
struct V4Entries {
  std::int64_t topk = 0;
  std::vector<std::int32_t> indices;
  std::vector<std::int32_t> topk_len;  // empty: every row uses all K

  /// Random slots of [0, capacity), a `invalid_every`-th entry -1 (0: none), and lengths in [0, K] if asked.
  static V4Entries random(std::int64_t rows, std::int64_t topk, std::int64_t capacity, bool with_lengths,
                          int invalid_every, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(capacity - 1));
    V4Entries e;
    e.topk = topk;
    e.indices.resize(static_cast<std::size_t>(rows * topk));
    for (std::size_t i = 0; i < e.indices.size(); ++i) {
      e.indices[i] = invalid_every > 0 && i % invalid_every == 1 ? -1 : slot(rng);
    }
    if (with_lengths) {
      std::uniform_int_distribution<std::int32_t> len(0, static_cast<std::int32_t>(topk));
      for (std::int64_t r = 0; r < rows; ++r) e.topk_len.push_back(r == 0 ? static_cast<std::int32_t>(topk) : len(rng));
    }
    return e;
  }

  std::int64_t used(std::int64_t row) const {
    return topk_len.empty() ? topk : std::clamp<std::int64_t>(topk_len[row], 0, topk);
  }
};

inline std::vector<std::uint16_t> random_v4_queries(std::int64_t rows, std::int64_t heads, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(rows * heads * kV4Dim));
  for (auto& v : q) v = round_bf16(0.5f * normal(rng));
  return q;
}

struct V4Reference {
  std::vector<double> out;  // [R, H, 512]
  std::vector<double> lse;  // [R, H]
};

/// softmax(sm_scale q.k) v in double over each row's valid main and extra
/// entries, then out *= e^lse / (e^lse + e^sink[h]) where a sink is given.
inline V4Reference v4_reference_attention(const std::vector<std::uint16_t>& q, std::int64_t rows, std::int64_t heads,
                                          const std::vector<float>& main_keys, std::int64_t main_capacity,
                                          const V4Entries& main, const std::vector<float>* extra_keys,
                                          std::int64_t extra_capacity, const V4Entries* extra,
                                          const std::vector<float>& sink, double sm_scale) {
  V4Reference ref{
      std::vector<double>(static_cast<std::size_t>(rows * heads * kV4Dim), 0.0),
      std::vector<double>(static_cast<std::size_t>(rows * heads), -std::numeric_limits<double>::infinity())};
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<const float*> used;
    for (std::int64_t i = 0; i < main.used(r); ++i) {
      const std::int64_t s = main.indices[r * main.topk + i];
      if (s >= 0 && s < main_capacity) used.push_back(main_keys.data() + s * kV4Dim);
    }
    if (extra != nullptr) {
      for (std::int64_t i = 0; i < extra->used(r); ++i) {
        const std::int64_t s = extra->indices[r * extra->topk + i];
        if (s >= 0 && s < extra_capacity) used.push_back(extra_keys->data() + s * kV4Dim);
      }
    }
    if (used.empty()) continue;
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::uint16_t* qh = q.data() + (r * heads + h) * kV4Dim;
      std::vector<double> scores;
      double m = -std::numeric_limits<double>::infinity();
      for (const float* key : used) {
        double dot = 0.0;
        for (int d = 0; d < kV4Dim; ++d)
          dot += static_cast<double>(codec::load_input<codec::InputDtype::kBf16>(qh[d])) * key[d];
        scores.push_back(sm_scale * dot);
        m = std::max(m, scores.back());
      }
      double l = 0.0;
      double* out = ref.out.data() + (r * heads + h) * kV4Dim;
      for (std::size_t j = 0; j < used.size(); ++j) {
        const double w = std::exp(scores[j] - m);
        l += w;
        for (int d = 0; d < kV4Dim; ++d) out[d] += w * used[j][d];
      }
      const double lse = m + std::log(l);
      const double sink_scale = sink.empty() ? 1.0 : 1.0 / (1.0 + std::exp(static_cast<double>(sink[h]) - lse));
      for (int d = 0; d < kV4Dim; ++d) out[d] = out[d] / l * sink_scale;
      ref.lse[r * heads + h] = lse;
    }
  }
  return ref;
}

}  // namespace mlakv::test
