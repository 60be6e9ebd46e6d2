// SPDX-License-Identifier: Apache-2.0
// Shared by the attention tests: a cache of synthetic tokens in one format,
// random queries, and an independent double-precision attention computed from
// gather_records' bf16 keys (the reference the library's decode must match).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mlakv/mlakv.h"
#include "test_support.h"

namespace mlakv::test {

/// `tokens` MLA-like tokens written into a dense [blocks, 64, record] cache.
struct AttentionCache {
  Format format;
  std::int64_t tokens;
  std::int64_t block_size = 64;
  std::int64_t num_blocks;
  float k_scale = 1.0f;
  std::vector<std::uint8_t> bytes;

  AttentionCache(Format f, std::int64_t n, std::uint64_t seed) : format(f), tokens(n) {
    num_blocks = (n + block_size - 1) / block_size;
    const DType dtype = f == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::uint16_t> kv(static_cast<std::size_t>(n) * 512);
    std::vector<std::uint16_t> pe(static_cast<std::size_t>(n) * 64);
    for (auto& v : kv) v = dtype == DType::kFloat16 ? round_fp16(0.5f * normal(rng)) : round_bf16(0.5f * normal(rng));
    for (auto& v : pe) v = dtype == DType::kFloat16 ? round_fp16(normal(rng)) : round_bf16(normal(rng));
    const int record = format_info(f).record_bytes;
    bytes.assign(static_cast<std::size_t>(num_blocks * block_size * record), 0);
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) slots[t] = t;
    const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
    write_records(f, make_view(kv.data(), dtype, {n, 512}), make_view(pe.data(), dtype, {n, 64}), view(),
                  make_view(slots.data(), DType::kInt64, {n}), &scale);
  }

  TensorView view() { return make_view(bytes.data(), DType::kUInt8, {num_blocks, block_size, record_bytes()}); }
  int record_bytes() const { return format_info(format).record_bytes; }
  std::int64_t capacity() const { return num_blocks * block_size; }

  /// The [576] bf16 key of every slot, widened, as gather_records gives it.
  std::vector<float> keys() {
    const std::int64_t n = capacity();
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) slots[t] = t;
    std::vector<std::uint16_t> rows(static_cast<std::size_t>(n) * 576);
    GatherOptions options;
    const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
    options.scale = &scale;
    TensorView kv = make_view(rows.data(), DType::kBFloat16, {n, 512});
    kv.strides[0] = 576;
    TensorView pe = make_view(rows.data() + 512, DType::kBFloat16, {n, 64});
    pe.strides[0] = 576;
    gather_records(format, view(), make_view(slots.data(), DType::kInt64, {n}), kv, pe, options);
    std::vector<float> out(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) out[i] = codec::load_input<codec::InputDtype::kBf16>(rows[i]);
    return out;
  }
};

inline std::vector<std::uint16_t> random_queries(std::int64_t rows, std::int64_t heads, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(rows * heads * 576));
  for (auto& v : q) v = round_bf16(normal(rng));
  return q;
}

struct ReferenceAttention {
  std::vector<double> out;  // [R, H, 512]
  std::vector<double> lse;  // [R, H]
};

/// softmax(sm_scale q.k) v in double over each row's valid entries.
inline ReferenceAttention reference_attention(const std::vector<float>& keys, std::int64_t capacity,
                                              const std::vector<std::uint16_t>& q, std::int64_t rows,
                                              std::int64_t heads, const std::vector<std::int32_t>& indices,
                                              std::int64_t topk, const std::vector<std::int32_t>& topk_len,
                                              double sm_scale) {
  ReferenceAttention ref{
      std::vector<double>(static_cast<std::size_t>(rows * heads * 512), 0.0),
      std::vector<double>(static_cast<std::size_t>(rows * heads), -std::numeric_limits<double>::infinity())};
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t n = topk_len.empty() ? topk : std::clamp<std::int64_t>(topk_len[r], 0, topk);
    std::vector<std::int64_t> used;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t s = indices[r * topk + i];
      if (s >= 0 && s < capacity) used.push_back(s);
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      if (used.empty()) continue;
      const std::uint16_t* qh = q.data() + (r * heads + h) * 576;
      std::vector<double> scores;
      double m = -std::numeric_limits<double>::infinity();
      for (const std::int64_t s : used) {
        double dot = 0.0;
        for (int d = 0; d < 576; ++d) {
          dot += static_cast<double>(codec::load_input<codec::InputDtype::kBf16>(qh[d])) * keys[s * 576 + d];
        }
        scores.push_back(sm_scale * dot);
        m = std::max(m, scores.back());
      }
      double l = 0.0;
      double* out = ref.out.data() + (r * heads + h) * 512;
      for (std::size_t j = 0; j < used.size(); ++j) {
        const double w = std::exp(scores[j] - m);
        l += w;
        for (int d = 0; d < 512; ++d) out[d] += w * keys[used[j] * 576 + d];
      }
      for (int d = 0; d < 512; ++d) out[d] /= l;
      ref.lse[r * heads + h] = m + std::log(l);
    }
  }
  return ref;
}

inline float widen(std::uint16_t bf16) { return codec::load_input<codec::InputDtype::kBf16>(bf16); }

/// A decode's (or prefill's) bf16 out and float32 lse against a double
/// reference: |out - ref| <= 2^-8 |ref| + abs_tol (bf16 output rounding plus
/// float32 accumulation; the first 5 misses reported), lse within 1e-4
/// relative, and -inf exactly where the reference has no key.
inline void expect_close_to_reference(const std::vector<std::uint16_t>& out, const std::vector<float>& lse,
                                      const std::vector<double>& ref_out, const std::vector<double>& ref_lse,
                                      double abs_tol, const std::string& what) {
  int reported = 0;
  for (std::size_t i = 0; i < ref_out.size() && reported < 5; ++i) {
    const double g = widen(out[i]);
    const double tol = std::ldexp(std::fabs(ref_out[i]), -8) + abs_tol;
    if (!(std::fabs(g - ref_out[i]) <= tol)) {
      ADD_FAILURE() << what << ": out[" << i << "] = " << g << ", reference " << ref_out[i];
      ++reported;
    }
  }
  for (std::size_t i = 0; i < ref_lse.size(); ++i) {
    if (std::isinf(ref_lse[i])) {
      EXPECT_EQ(lse[i], -std::numeric_limits<float>::infinity()) << what << ": lse[" << i << "]";
    } else {
      EXPECT_NEAR(lse[i], ref_lse[i], 1e-4 * std::max(1.0, std::fabs(ref_lse[i]))) << what << ": lse[" << i << "]";
    }
  }
}

/// The arguments of a sparse decode or prefill of 2 rows of 16 heads over a
/// small cache in format F, with out and lse filled with sentinels (0x1234,
/// 7.0) so that a refused call can be shown to have written nothing.
template <Format F>
class SparseRowsArguments : public ::testing::Test {
 protected:
  AttentionCache cache{F, 64, 1};
  std::vector<std::uint16_t> q = random_queries(2, 16, 1);
  std::vector<std::int32_t> indices = std::vector<std::int32_t>(2 * 8, 1);
  std::vector<std::uint16_t> out = std::vector<std::uint16_t>(2 * 16 * 512, 0x1234);
  std::vector<float> lse = std::vector<float>(2 * 16, 7.0f);
  TensorView q_view = make_view(q.data(), DType::kBFloat16, {2, 16, 576});
  TensorView indices_view = make_view(indices.data(), DType::kInt32, {2, 8});
  TensorView out_view = make_view(out.data(), DType::kBFloat16, {2, 16, 512});
  TensorView lse_view = make_view(lse.data(), DType::kFloat32, {2, 16});
};

/// Element i of a float32 or bf16 array held as bytes, as a float.
inline float element_as_float(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
  if (dtype == DType::kFloat32) {
    float value;
    std::memcpy(&value, bytes.data() + 4 * i, 4);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, bytes.data() + 2 * i, 2);
  return widen(bits);
}

/// The largest |value| among the keys' latent parts: the scale of the output's error.
inline double max_abs_value(const std::vector<float>& keys) {
  double m = 0.0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i % 576 < 512) m = std::max(m, static_cast<double>(std::fabs(keys[i])));
  }
  return m;
}

}  // namespace mlakv::test
