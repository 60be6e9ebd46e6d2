// SPDX-License-Identifier: Apache-2.0
// The CPU sparse prefill: agreement with an independent double-precision
// attention over gather_records' keys for every format it reads, the
// decode's result bit for bit (a prefill row is a decode row), the entry
// rules (-1, past capacity, topk_len, empty rows), and argument validation
// (a bad argument named, nothing written).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_support.h"

namespace mlakv::test {
namespace {

constexpr double kDefaultScale = 0.041666666666666664;  // 1/sqrt(576)

struct Attended {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

struct Rows {
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t topk;
  std::vector<std::uint16_t> q;
  std::vector<std::int32_t> indices;
  std::vector<std::int32_t> topk_len;  // empty: none
};

// Row 0: topk random entries; row 1: -1 and past-capacity entries among them,
// limited by topk_len; row 2: nothing valid; the rest random.
Rows make_rows(std::int64_t rows, std::int64_t heads, std::int64_t topk, std::int64_t capacity, std::uint64_t seed) {
  Rows r{rows, heads, topk, random_queries(rows, heads, seed), {}, {}};
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(capacity - 1));
  r.indices.resize(static_cast<std::size_t>(rows * topk));
  for (auto& i : r.indices) i = slot(rng);
  r.topk_len.assign(static_cast<std::size_t>(rows), static_cast<std::int32_t>(topk));
  if (rows > 1) {
    for (std::int64_t i = 0; i < topk; i += 3) r.indices[topk + i] = i % 2 == 0 ? -1 : static_cast<int>(capacity);
    r.topk_len[1] = static_cast<std::int32_t>(std::max<std::int64_t>(1, topk - 5));
  }
  if (rows > 2) {
    for (std::int64_t i = 0; i < topk; ++i) r.indices[2 * topk + i] = -1;
  }
  return r;
}

template <class Options>
Options options_for(AttentionCache& cache, Rows& r, TensorView& scale, TensorView& len) {
  Options options;
  scale = make_view(&cache.k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  len = make_view(r.topk_len.data(), DType::kInt32, {r.rows});
  options.topk_len = &len;
  return options;
}

Attended prefill(AttentionCache& cache, Rows& r) {
  Attended a{std::vector<std::uint16_t>(static_cast<std::size_t>(r.rows * r.heads * 512), 0xFFFF),
             std::vector<float>(static_cast<std::size_t>(r.rows * r.heads), 12345.0f)};
  TensorView scale, len;
  const auto options = options_for<SparsePrefillOptions>(cache, r, scale, len);
  sparse_mla_prefill(cache.format, make_view(r.q.data(), DType::kBFloat16, {r.rows, r.heads, 576}), cache.view(),
                     make_view(r.indices.data(), DType::kInt32, {r.rows, r.topk}),
                     make_view(a.out.data(), DType::kBFloat16, {r.rows, r.heads, 512}),
                     make_view(a.lse.data(), DType::kFloat32, {r.rows, r.heads}), options);
  return a;
}

Attended decode(AttentionCache& cache, Rows& r) {
  Attended a{std::vector<std::uint16_t>(static_cast<std::size_t>(r.rows * r.heads * 512), 0xFFFF),
             std::vector<float>(static_cast<std::size_t>(r.rows * r.heads), 12345.0f)};
  TensorView scale, len;
  const auto options = options_for<SparseDecodeOptions>(cache, r, scale, len);
  sparse_mla_decode(cache.format, make_view(r.q.data(), DType::kBFloat16, {r.rows, r.heads, 576}), cache.view(),
                    make_view(r.indices.data(), DType::kInt32, {r.rows, r.topk}),
                    make_view(a.out.data(), DType::kBFloat16, {r.rows, r.heads, 512}),
                    make_view(a.lse.data(), DType::kFloat32, {r.rows, r.heads}), options);
  return a;
}

// |got - ref| <= 2^-8 |ref| + 1e-4 max|v|: bf16 output rounding plus float32 accumulation.
void expect_close(const Attended& got, const ReferenceAttention& ref, double value_scale, const std::string& what) {
  expect_close_to_reference(got.out, got.lse, ref.out, ref.lse, 1e-4 * value_scale, what);
}

TEST(sparse_mla_prefill, equals_softmax_attention_over_gathered_keys_for_every_format_it_reads) {
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the DeepSeek V4 family: v4_decode_test's oracle
    AttentionCache cache(info.format, 300, 7);
    Rows r = make_rows(5, 16, 70, cache.capacity(), 11);
    const Attended got = prefill(cache, r);
    const auto keys = cache.keys();
    expect_close(
        got,
        reference_attention(keys, cache.capacity(), r.q, r.rows, r.heads, r.indices, r.topk, r.topk_len, kDefaultScale),
        max_abs_value(keys), std::string(info.id));
  }
}

TEST(sparse_mla_prefill, equals_the_decode_of_the_same_rows_bit_for_bit) {
  AttentionCache cache(Format::kFp8DsMla, 2048, 3);
  Rows r = make_rows(7, 64, 300, cache.capacity(), 4);
  const Attended p = prefill(cache, r);
  const Attended d = decode(cache, r);
  EXPECT_EQ(p.out, d.out);
  EXPECT_EQ(p.lse, d.lse);
}

TEST(sparse_mla_prefill, a_row_without_valid_entries_gives_zeros_and_minus_infinity) {
  AttentionCache cache(Format::kNvfp4DsMla, 128, 2);
  Rows r = make_rows(3, 16, 64, cache.capacity(), 6);
  const Attended got = prefill(cache, r);
  for (std::int64_t i = 2 * 16 * 512; i < 3 * 16 * 512; ++i) ASSERT_EQ(got.out[i], 0) << i;
  for (std::int64_t h = 0; h < 16; ++h) EXPECT_EQ(got.lse[2 * 16 + h], -std::numeric_limits<float>::infinity());
}

// Validation: the decode's rules for the arguments both take, named in the
// prefill's words, and nothing written.
class SparsePrefillValidation : public SparseRowsArguments<Format::kFp8DsMla> {
 protected:
  void expect_rejected(const std::string& message, const SparsePrefillOptions& options = {}) {
    try {
      sparse_mla_prefill(Format::kFp8DsMla, q_view, cache.view(), indices_view, out_view, lse_view, options);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
    for (const auto v : out) ASSERT_EQ(v, 0x1234);
    for (const auto v : lse) ASSERT_EQ(v, 7.0f);
  }
};

TEST_F(SparsePrefillValidation, q_rows_must_be_576_wide) {
  q_view.shape[2] = 512;
  expect_rejected("mlakv::sparse_mla_prefill(fp8_ds_mla): q: shape must be (R, H, 576), got (2, 16, 512)");
}

TEST_F(SparsePrefillValidation, indices_must_have_one_row_per_query) {
  indices_view.shape[0] = 1;
  expect_rejected(
      "mlakv::sparse_mla_prefill(fp8_ds_mla): indices: shape must be (R, K) with R = q rows = 2, got (1, 8)");
}

TEST_F(SparsePrefillValidation, out_must_not_overlap_q) {
  out_view.data = q.data();
  out_view.shape[2] = 512;
  try {
    sparse_mla_prefill(Format::kFp8DsMla, q_view, cache.view(), indices_view, out_view, lse_view);
    ADD_FAILURE() << "accepted an out overlapping q";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlakv::sparse_mla_prefill(fp8_ds_mla): out:"), std::string::npos) << e.what();
  }
  for (const auto v : lse) ASSERT_EQ(v, 7.0f);
}

TEST_F(SparsePrefillValidation, a_sink_is_refused_for_the_v32_formats) {
  std::vector<float> sink(16, 0.0f);
  const TensorView sink_view = make_view(sink.data(), DType::kFloat32, {16});
  SparsePrefillOptions options;
  options.attn_sink = &sink_view;
  expect_rejected(
      "mlakv::sparse_mla_prefill(fp8_ds_mla): attn_sink: is read by the DeepSeek V4 family's decode only (d_qk 512), "
      "got fp8_ds_mla",
      options);
}

TEST_F(SparsePrefillValidation, topk_len_must_have_one_entry_per_row) {
  std::vector<std::int32_t> len(3, 1);
  const TensorView len_view = make_view(len.data(), DType::kInt32, {3});
  SparsePrefillOptions options;
  options.topk_len = &len_view;
  try {
    sparse_mla_prefill(Format::kFp8DsMla, q_view, cache.view(), indices_view, out_view, lse_view, options);
    ADD_FAILURE() << "accepted a topk_len of 3 rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlakv::sparse_mla_prefill(fp8_ds_mla): topk_len:"), std::string::npos)
        << e.what();
  }
  for (const auto v : out) ASSERT_EQ(v, 0x1234);
}

}  // namespace
}  // namespace mlakv::test
