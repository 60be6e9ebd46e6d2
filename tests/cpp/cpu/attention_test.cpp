// SPDX-License-Identifier: Apache-2.0
// The CPU sparse MLA decode and merge: agreement with an independent
// attention over gather_records' keys, entry rules (-1, past capacity,
// topk_len, duplicates, empty rows), merging halves, argument validation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_support.h"

namespace mlakv::test {
namespace {

constexpr double kDefaultScale = 0.041666666666666664;  // 1/sqrt(576)

struct Decoded {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

Decoded decode(AttentionCache& cache, std::vector<std::uint16_t>& q, std::int64_t rows, std::int64_t heads,
               std::vector<std::int32_t>& indices, std::int64_t topk, std::vector<std::int32_t>* topk_len = nullptr,
               float sm_scale = 0.0f) {
  Decoded d{std::vector<std::uint16_t>(static_cast<std::size_t>(rows * heads * 512), 0xFFFF),
            std::vector<float>(static_cast<std::size_t>(rows * heads), 12345.0f)};
  SparseDecodeOptions options;
  options.sm_scale = sm_scale;
  const TensorView scale = make_view(&cache.k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  TensorView len_view;
  if (topk_len != nullptr) {
    len_view = make_view(topk_len->data(), DType::kInt32, {rows});
    options.topk_len = &len_view;
  }
  sparse_mla_decode(cache.format, make_view(q.data(), DType::kBFloat16, {rows, heads, 576}), cache.view(),
                    make_view(indices.data(), DType::kInt32, {rows, topk}),
                    make_view(d.out.data(), DType::kBFloat16, {rows, heads, 512}),
                    make_view(d.lse.data(), DType::kFloat32, {rows, heads}), options);
  return d;
}

// |got - ref| <= 2^-8 |ref| + 1e-4 max|v|: bf16 output rounding plus float32 accumulation.
void expect_close(const Decoded& got, const ReferenceAttention& ref, double value_scale, const std::string& what) {
  expect_close_to_reference(got.out, got.lse, ref.out, ref.lse, 1e-4 * value_scale, what);
}

std::vector<std::int32_t> random_indices(std::int64_t rows, std::int64_t topk, std::int64_t capacity,
                                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(capacity - 1));
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * topk));
  for (auto& i : indices) i = slot(rng);
  return indices;
}

TEST(sparse_mla_decode, equals_softmax_attention_over_gathered_keys_for_every_format) {
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the decode reads the 512 + 64 token-major formats only
    AttentionCache cache(info.format, 300, 7);
    const std::int64_t rows = 3, heads = 16, topk = 70;
    auto q = random_queries(rows, heads, 11);
    auto indices = random_indices(rows, topk, cache.capacity(), 5);
    indices[3] = -1;
    indices[80] = static_cast<std::int32_t>(cache.capacity());
    const Decoded got = decode(cache, q, rows, heads, indices, topk);
    const auto keys = cache.keys();
    expect_close(got, reference_attention(keys, cache.capacity(), q, rows, heads, indices, topk, {}, kDefaultScale),
                 max_abs_value(keys), std::string(info.id));
  }
}

TEST(sparse_mla_decode, many_heads_and_2048_entries_match_the_reference) {
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 4096, 3);
  const std::int64_t rows = 1, heads = 64, topk = 2048;
  auto q = random_queries(rows, heads, 4);
  auto indices = random_indices(rows, topk, cache.capacity(), 9);
  const Decoded got = decode(cache, q, rows, heads, indices, topk);
  const auto keys = cache.keys();
  expect_close(got, reference_attention(keys, cache.capacity(), q, rows, heads, indices, topk, {}, kDefaultScale),
               max_abs_value(keys), "H=64 K=2048");
}

TEST(sparse_mla_decode, rows_longer_than_one_chunk_of_keys_match_the_reference) {
  // The CPU decodes and attends a row's keys 2048 at a time (bounded memory); 5000 entries take three chunks.
  AttentionCache cache(Format::kFp8DsMla, 6000, 4);
  const std::int64_t rows = 2, heads = 8, topk = 5000;
  auto q = random_queries(rows, heads, 5);
  auto indices = random_indices(rows, topk, cache.capacity(), 6);
  for (std::int64_t i = 0; i < topk; i += 7) indices[i] = -1;  // chunks of valid entries, not of index positions
  const Decoded got = decode(cache, q, rows, heads, indices, topk);
  const auto keys = cache.keys();
  expect_close(got, reference_attention(keys, cache.capacity(), q, rows, heads, indices, topk, {}, kDefaultScale),
               max_abs_value(keys), "K=5000");
}

TEST(sparse_mla_decode, invalid_entries_contribute_nothing) {
  AttentionCache cache(Format::kNvfp4DsMla, 128, 1);
  auto q = random_queries(1, 16, 2);
  std::vector<std::int32_t> clean = {5, 9, 77, 100};
  std::vector<std::int32_t> noisy = {-1, 5, 9, std::numeric_limits<std::int32_t>::max(), 77, 128, -7, 100};
  const Decoded a = decode(cache, q, 1, 16, clean, 4);
  const Decoded b = decode(cache, q, 1, 16, noisy, 8);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
}

TEST(sparse_mla_decode, topk_len_limits_each_row_to_its_first_entries) {
  AttentionCache cache(Format::kFp8DsMla, 128, 1);
  auto q = random_queries(3, 16, 2);
  std::vector<std::int32_t> indices = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<std::int32_t> len = {2, 0, 99};  // 99 is clamped to K = 4
  const Decoded got = decode(cache, q, 3, 16, indices, 4, &len);
  std::vector<std::int32_t> expected_indices = {1, 2, -1, -1, -1, -1, -1, -1, 9, 10, 11, 12};
  const Decoded want = decode(cache, q, 3, 16, expected_indices, 4);
  EXPECT_EQ(got.out, want.out);
  EXPECT_EQ(got.lse, want.lse);
  for (int h = 0; h < 16; ++h) EXPECT_EQ(got.lse[16 + h], -std::numeric_limits<float>::infinity());
}

TEST(sparse_mla_decode, a_duplicate_entry_counts_once_per_occurrence) {
  AttentionCache cache(Format::kBf16, 64, 4);
  auto q = random_queries(1, 16, 5);
  std::vector<std::int32_t> indices = {3, 3, 8};
  const Decoded got = decode(cache, q, 1, 16, indices, 3);
  const auto keys = cache.keys();
  expect_close(got, reference_attention(keys, cache.capacity(), q, 1, 16, indices, 3, {}, kDefaultScale),
               max_abs_value(keys), "duplicates");
  std::vector<std::int32_t> once = {3, 8};
  const Decoded single = decode(cache, q, 1, 16, once, 2);
  EXPECT_NE(got.out, single.out);
}

TEST(sparse_mla_decode, a_row_without_valid_entries_gives_zeros_and_minus_infinity) {
  AttentionCache cache(Format::kNvfp4Fp8DsMla, 64, 4);
  auto q = random_queries(2, 16, 5);
  std::vector<std::int32_t> indices = {-1, 64, 1000, -1, 2, 3};
  const Decoded got = decode(cache, q, 2, 16, indices, 3);
  for (int i = 0; i < 16 * 512; ++i) ASSERT_EQ(got.out[i], 0) << i;
  for (int h = 0; h < 16; ++h) EXPECT_EQ(got.lse[h], -std::numeric_limits<float>::infinity());
  for (int h = 16; h < 32; ++h) EXPECT_TRUE(std::isfinite(got.lse[h]));
}

TEST(sparse_mla_decode, no_entries_at_all_gives_zeros_and_minus_infinity) {
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 64, 4);
  auto q = random_queries(2, 16, 5);
  std::vector<std::int32_t> indices;
  const Decoded got = decode(cache, q, 2, 16, indices, 0);
  for (const std::uint16_t v : got.out) ASSERT_EQ(v, 0);
  for (const float l : got.lse) EXPECT_EQ(l, -std::numeric_limits<float>::infinity());
}

TEST(sparse_mla_decode, sm_scale_scales_the_scores) {
  AttentionCache cache(Format::kNvfp4DsMlaFp8RopePts, 64, 4);
  auto q = random_queries(1, 16, 5);
  auto indices = random_indices(1, 32, cache.capacity(), 8);
  const Decoded got = decode(cache, q, 1, 16, indices, 32, nullptr, 0.125f);
  const auto keys = cache.keys();
  expect_close(got, reference_attention(keys, cache.capacity(), q, 1, 16, indices, 32, {}, 0.125), max_abs_value(keys),
               "sm_scale 0.125");
}

TEST(sparse_mla_decode, never_writes_the_cache) {
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 64, 4);
  GuardedCache guarded(1, 64, 368, 64 * 368);
  TensorView view = guarded.view(368);
  std::memcpy(view.data, cache.bytes.data(), cache.bytes.size());
  const std::vector<std::uint8_t> before = guarded.storage();
  auto q = random_queries(1, 16, 5);
  auto indices = random_indices(1, 16, 64, 8);
  std::vector<std::uint16_t> out(16 * 512);
  std::vector<float> lse(16);
  sparse_mla_decode(Format::kNvfp4DsMlaFp8Rope, make_view(q.data(), DType::kBFloat16, {1, 16, 576}), view,
                    make_view(indices.data(), DType::kInt32, {1, 16}),
                    make_view(out.data(), DType::kBFloat16, {1, 16, 512}),
                    make_view(lse.data(), DType::kFloat32, {1, 16}));
  EXPECT_EQ(guarded.storage(), before);
}

TEST(merge_attention_states, merging_two_halves_gives_the_whole) {
  AttentionCache cache(Format::kNvfp4DsMla, 512, 6);
  const std::int64_t rows = 2, heads = 32, topk = 256;
  auto q = random_queries(rows, heads, 7);
  auto indices = random_indices(rows, topk, cache.capacity(), 3);
  std::vector<std::int32_t> first(indices.size(), -1), second(indices.size(), -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < topk; ++i) (i < 100 ? first : second)[r * topk + i] = indices[r * topk + i];
  }
  Decoded a = decode(cache, q, rows, heads, first, topk);
  Decoded b = decode(cache, q, rows, heads, second, topk);
  Decoded merged{std::vector<std::uint16_t>(a.out.size()), std::vector<float>(a.lse.size())};
  const auto out_view = [&](std::vector<std::uint16_t>& v) {
    return make_view(v.data(), DType::kBFloat16, {rows, heads, 512});
  };
  const auto lse_view = [&](std::vector<float>& v) { return make_view(v.data(), DType::kFloat32, {rows, heads}); };
  merge_attention_states(out_view(a.out), lse_view(a.lse), out_view(b.out), lse_view(b.lse), out_view(merged.out),
                         lse_view(merged.lse));
  const auto keys = cache.keys();
  // Each half is rounded to bf16 before merging: twice the rounding of one pass.
  const ReferenceAttention ref =
      reference_attention(keys, cache.capacity(), q, rows, heads, indices, topk, {}, kDefaultScale);
  const double value_scale = max_abs_value(keys);
  for (std::size_t i = 0; i < ref.out.size(); ++i) {
    ASSERT_NEAR(widen(merged.out[i]), ref.out[i], std::ldexp(std::fabs(ref.out[i]), -7) + 1e-3 * value_scale) << i;
  }
  for (std::size_t i = 0; i < ref.lse.size(); ++i) EXPECT_NEAR(merged.lse[i], ref.lse[i], 1e-4 * std::fabs(ref.lse[i]));
  // In place: out may be out_a.
  merge_attention_states(out_view(a.out), lse_view(a.lse), out_view(b.out), lse_view(b.lse), out_view(a.out),
                         lse_view(a.lse));
  EXPECT_EQ(a.out, merged.out);
  EXPECT_EQ(a.lse, merged.lse);
}

TEST(merge_attention_states, an_empty_side_leaves_the_other_unchanged) {
  const std::int64_t rows = 1, heads = 2, width = 4;
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> b = {std::nanf(""), 0, 0, 0, 9, 9, 9, 9};
  std::vector<float> la = {0.5f, -std::numeric_limits<float>::infinity()};
  std::vector<float> lb = {-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::vector<float> out(8, -1.0f), lse(2, 0.0f);
  const auto v3 = [&](std::vector<float>& v) { return make_view(v.data(), DType::kFloat32, {rows, heads, width}); };
  const auto v2 = [&](std::vector<float>& v) { return make_view(v.data(), DType::kFloat32, {rows, heads}); };
  merge_attention_states(v3(a), v2(la), v3(b), v2(lb), v3(out), v2(lse));
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4), std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(lse[0], 0.5f);
  EXPECT_EQ(std::vector<float>(out.begin() + 4, out.end()), std::vector<float>({0, 0, 0, 0}));
  EXPECT_EQ(lse[1], -std::numeric_limits<float>::infinity());
}

// Validation: a bad argument throws an Error naming it and writes nothing.
class SparseDecodeValidation : public SparseRowsArguments<Format::kNvfp4DsMlaFp8Rope> {
 protected:
  void expect_rejected(const std::string& message, Format format = Format::kNvfp4DsMlaFp8Rope,
                       const SparseDecodeOptions& options = {}) {
    try {
      sparse_mla_decode(format, q_view, cache.view(), indices_view, out_view, lse_view, options);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
    for (const auto v : out) ASSERT_EQ(v, 0x1234);
    for (const auto v : lse) ASSERT_EQ(v, 7.0f);
  }
};

TEST_F(SparseDecodeValidation, q_must_be_bf16) {
  q_view.dtype = DType::kFloat16;
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): q: dtype must be bf16, got fp16");
}

TEST_F(SparseDecodeValidation, q_rows_must_be_576_wide) {
  q_view.shape[2] = 512;
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): q: shape must be (R, H, 576), got (2, 16, 512)");
}

TEST_F(SparseDecodeValidation, indices_must_be_int32_with_one_row_per_query) {
  indices_view.shape[0] = 1;
  expect_rejected(
      "mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): indices: shape must be (R, K) with R = q rows = 2, got (1, "
      "8)");
  indices_view.shape[0] = 2;
  indices_view.dtype = DType::kInt64;
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): indices: dtype must be int32, got int64");
}

TEST_F(SparseDecodeValidation, out_must_match_q) {
  out_view.shape[1] = 8;
  expect_rejected(
      "mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): out: shape must be (R, H, 512) = (2, 16, 512), got (2, 8, "
      "512)");
}

TEST_F(SparseDecodeValidation, lse_must_be_float32) {
  lse_view.dtype = DType::kBFloat16;
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): lse: dtype must be float32, got bf16");
}

TEST_F(SparseDecodeValidation, topk_len_must_have_one_entry_per_row) {
  std::vector<std::int32_t> len = {1, 2, 3};
  const TensorView len_view = make_view(len.data(), DType::kInt32, {3});
  SparseDecodeOptions options;
  options.topk_len = &len_view;
  expect_rejected(
      "mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): topk_len: shape must be (R,) with R = q rows = 2, got (3,)",
      Format::kNvfp4DsMlaFp8Rope, options);
}

TEST_F(SparseDecodeValidation, sm_scale_must_be_finite) {
  SparseDecodeOptions options;
  options.sm_scale = std::numeric_limits<float>::infinity();
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): sm_scale: must be finite (0: 1/sqrt(576)), got inf",
                  Format::kNvfp4DsMlaFp8Rope, options);
}

TEST_F(SparseDecodeValidation, the_cache_must_hold_records_of_the_format) {
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla): kv_cache: last dim must be 432 (record bytes), got 368",
                  Format::kNvfp4DsMla);
}

TEST_F(SparseDecodeValidation, no_rows_or_no_heads_is_a_no_op_whatever_the_strides) {
  for (const int empty_dim : {0, 1}) {
    TensorView q0 = q_view, out0 = out_view, lse0 = lse_view, idx0 = indices_view;
    q0.shape[empty_dim] = out0.shape[empty_dim] = lse0.shape[empty_dim] = 0;
    if (empty_dim == 0) idx0.shape[0] = 0;
    for (TensorView* v : {&q0, &out0, &lse0, &idx0}) {
      if (v->shape[empty_dim] != 0) continue;
      for (int d = 0; d < v->ndim; ++d) v->strides[d] = 0;  // numpy 2's empty arrays
    }
    EXPECT_NO_THROW(sparse_mla_decode(Format::kNvfp4DsMlaFp8Rope, q0, cache.view(), idx0, out0, lse0)) << empty_dim;
  }
  for (const auto v : out) ASSERT_EQ(v, 0x1234);
}

TEST_F(SparseDecodeValidation, the_cpu_checks_a_workspace_as_cuda_does) {
  SparseDecodeOptions options;
  std::vector<float> floats(64);
  TensorView float_workspace = make_view(floats.data(), DType::kFloat32, {64});
  options.workspace = &float_workspace;
  expect_rejected("mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): workspace: dtype must be uint8, got float32",
                  Format::kNvfp4DsMlaFp8Rope, options);
  TensorView aliasing = make_view(out.data(), DType::kUInt8, {256});
  options.workspace = &aliasing;
  try {
    sparse_mla_decode(Format::kNvfp4DsMlaFp8Rope, q_view, cache.view(), indices_view, out_view, lse_view, options);
    ADD_FAILURE() << "a workspace aliasing out was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
  for (const auto v : out) ASSERT_EQ(v, 0x1234);
}

TEST_F(SparseDecodeValidation, out_must_not_overlap_q) {
  out_view = make_view(q.data(), DType::kBFloat16, {2, 16, 512});
  out_view.strides[0] = 16 * 576;
  out_view.strides[1] = 576;
  try {
    sparse_mla_decode(Format::kNvfp4DsMlaFp8Rope, q_view, cache.view(), indices_view, out_view, lse_view);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): out: must not share memory with q (inputs and "
              "outputs must not overlap), got overlapping byte ranges");
  }
}

TEST_F(SparseDecodeValidation, lse_must_not_overlap_out) {
  lse_view = make_view(out.data(), DType::kFloat32, {2, 16});
  expect_rejected(
      "mlakv::sparse_mla_decode(nvfp4_ds_mla_fp8_rope): out: must not share memory with lse (inputs and outputs must "
      "not overlap), got overlapping byte ranges");
}

TEST(merge_attention_states_validation, out_may_be_an_input_exactly_but_not_partly) {
  std::vector<float> a(2 * 2 * 4), b(2 * 2 * 4), la(4), lb(4);
  const auto v3 = [](float* p) { return make_view(p, DType::kFloat32, {2, 2, 4}); };
  const auto v2 = [](float* p) { return make_view(p, DType::kFloat32, {2, 2}); };
  EXPECT_NO_THROW(
      merge_attention_states(v3(a.data()), v2(la.data()), v3(b.data()), v2(lb.data()), v3(b.data()), v2(lb.data())));
  try {
    merge_attention_states(v3(a.data()), v2(la.data()), v3(b.data()), v2(lb.data()), v3(a.data() + 4), v2(lb.data()));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "mlakv::merge_attention_states: out: must not share memory with out_a (inputs and outputs must not "
              "overlap), got overlapping byte ranges");
  }
}

TEST(merge_attention_states_validation, outputs_must_share_a_dtype_and_shape) {
  std::vector<float> a(2 * 4), b(2 * 4), la(2), lb(2), lse(2);
  std::vector<std::uint16_t> out(2 * 4);
  try {
    merge_attention_states(
        make_view(a.data(), DType::kFloat32, {1, 2, 4}), make_view(la.data(), DType::kFloat32, {1, 2}),
        make_view(b.data(), DType::kFloat32, {1, 2, 4}), make_view(lb.data(), DType::kFloat32, {1, 2}),
        make_view(out.data(), DType::kBFloat16, {1, 2, 4}), make_view(lse.data(), DType::kFloat32, {1, 2}));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "mlakv::merge_attention_states: out: dtype must be float32, got bf16");
  }
  try {
    merge_attention_states(
        make_view(a.data(), DType::kFloat32, {1, 2, 4}), make_view(la.data(), DType::kFloat32, {1, 2}),
        make_view(b.data(), DType::kFloat32, {2, 1, 4}), make_view(lb.data(), DType::kFloat32, {1, 2}),
        make_view(a.data(), DType::kFloat32, {1, 2, 4}), make_view(lse.data(), DType::kFloat32, {1, 2}));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "mlakv::merge_attention_states: out_b: shape must be (R, H, D) = (1, 2, 4), got (2, 1, 4)");
  }
}

}  // namespace
}  // namespace mlakv::test
