// SPDX-License-Identifier: Apache-2.0
// The CPU sparse decode of the DeepSeek V4 family (the reference the CUDA
// kernels are held to): d_qk 512 keys whose 512 values are all the values,
// a main cache plus an extra cache of its own format, per-row lengths of
// each, -1 entries, a per-head attention sink; agreement with an independent
// double-precision attention over gather_records' keys, and the arguments
// the V4 decode refuses (naming them, writing nothing).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "v4_attention_support.h"

namespace mlakv::test {
namespace {

constexpr double kV4DefaultScale = 0.044194173824159216;  // 1/sqrt(512)

struct Shape {
  std::int64_t heads;
  std::int64_t topk;
  std::int64_t extra_topk;  // 0: no extra cache
  bool sink;
  bool lengths;
  int invalid_every;
};

struct Output {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

// One decode: main cache `m` (entries `me`), optionally extra cache `x` (entries `xe`) and a sink.
Output run_decode(V4Cache& m, V4Entries& me, V4Cache* x, V4Entries* xe, std::vector<float>& sink,
                  std::vector<std::uint16_t>& q, std::int64_t rows, std::int64_t heads, float sm_scale = 0.0f) {
  Output o{std::vector<std::uint16_t>(static_cast<std::size_t>(rows * heads * kV4Dim), 0xFFFF),
           std::vector<float>(static_cast<std::size_t>(rows * heads), 12345.0f)};
  SparseDecodeOptions options;
  options.sm_scale = sm_scale;
  TensorView len = make_view(me.topk_len.data(), DType::kInt32, {rows});
  if (!me.topk_len.empty()) options.topk_len = &len;
  TensorView sink_view = make_view(sink.data(), DType::kFloat32, {heads});
  if (!sink.empty()) options.attn_sink = &sink_view;
  TensorView x_cache;
  TensorView x_indices;
  TensorView x_len;
  SparseDecodeExtraCache extra;
  if (x != nullptr) {
    x_cache = x->view();
    x_indices = make_view(xe->indices.data(), DType::kInt32, {rows, xe->topk});
    x_len = make_view(xe->topk_len.data(), DType::kInt32, {rows});
    extra = {x->format, &x_cache, &x_indices, xe->topk_len.empty() ? nullptr : &x_len};
    options.extra = &extra;
  }
  sparse_mla_decode(m.format, make_view(q.data(), DType::kBFloat16, {rows, heads, kV4Dim}), m.view(),
                    make_view(me.indices.data(), DType::kInt32, {rows, me.topk}),
                    make_view(o.out.data(), DType::kBFloat16, {rows, heads, kV4Dim}),
                    make_view(o.lse.data(), DType::kFloat32, {rows, heads}), options);
  return o;
}

// |got - ref| <= 2^-8 |ref| + 1e-4 max|v|: bf16 output rounding plus float32 accumulation.
void expect_close(const Output& got, const V4Reference& ref, const std::string& what) {
  expect_close_to_reference(got.out, got.lse, ref.out, ref.lse, 1e-3, what);  // values are |v| <~ 4
}

std::vector<float> random_sink(std::int64_t heads, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> sink(static_cast<std::size_t>(heads));
  for (auto& s : sink) s = normal(rng);
  return sink;
}

void check_shape(Format main_format, Format extra_format, const Shape& s, std::uint64_t seed) {
  const std::int64_t rows = 3;
  V4Cache main(main_format, 1500, 256, seed);
  V4Cache extra(extra_format, 1200, 64, seed + 1);
  V4Entries me = V4Entries::random(rows, s.topk, main.capacity(), s.lengths, s.invalid_every, seed + 2);
  V4Entries xe = V4Entries::random(rows, s.extra_topk, extra.capacity(), s.lengths, s.invalid_every, seed + 3);
  std::vector<float> sink = s.sink ? random_sink(s.heads, seed + 4) : std::vector<float>{};
  auto q = random_v4_queries(rows, s.heads, seed + 5);
  const bool with_extra = s.extra_topk > 0;
  const Output got =
      run_decode(main, me, with_extra ? &extra : nullptr, with_extra ? &xe : nullptr, sink, q, rows, s.heads);
  const std::vector<float> main_keys = main.keys();
  const std::vector<float> extra_keys = with_extra ? extra.keys() : std::vector<float>{};
  const V4Reference ref =
      v4_reference_attention(q, rows, s.heads, main_keys, main.capacity(), me, with_extra ? &extra_keys : nullptr,
                             extra.capacity(), with_extra ? &xe : nullptr, sink, kV4DefaultScale);
  expect_close(got, ref,
               std::string(format_info(main_format).id) + "+" + std::string(format_info(extra_format).id) + " H=" +
                   std::to_string(s.heads) + " topk=" + std::to_string(s.topk) + "+" + std::to_string(s.extra_topk));
}

TEST(v4_decode, equals_attention_over_gathered_keys_for_every_v4_format) {
  const Shape shapes[] = {{1, 1, 0, false, false, 0},      {8, 64, 1024, true, true, 7},
                          {16, 128, 512, true, false, 0},  {64, 512, 64, false, true, 5},
                          {128, 1024, 128, true, true, 3}, {16, 1, 1, true, false, 0}};
  std::uint64_t seed = 100;
  for (const Format f : v4_formats()) {
    for (const Shape& s : shapes) check_shape(f, f, s, seed += 10);
  }
}

TEST(v4_decode, an_extra_cache_of_another_format_pairs_with_the_main_one) {
  // A V4.1 engine's pairing (MXFP8 main cache, FP4 extra cache), and the planar pages' pairing.
  check_shape(Format::kFp8DsMlaV41, Format::kNvfp4DsMlaV41, {16, 128, 512, true, true, 9}, 7);
  check_shape(Format::kFp8DsMlaV41Planar, Format::kNvfp4DsMlaV41Planar, {64, 64, 128, false, false, 0}, 8);
  check_shape(Format::kFp8DsMlaV4, Format::kNvfp4DsMlaV41, {8, 128, 64, true, false, 4}, 9);
}

TEST(v4_decode, the_sink_scales_out_by_its_share_and_leaves_lse) {
  const std::int64_t rows = 2, heads = 8;
  V4Cache main(Format::kFp8DsMlaV4, 500, 64, 1);
  V4Entries me = V4Entries::random(rows, 100, main.capacity(), false, 0, 2);
  auto q = random_v4_queries(rows, heads, 3);
  std::vector<float> none;
  std::vector<float> sink = random_sink(heads, 4);
  sink[0] = -std::numeric_limits<float>::infinity();  // no sink on head 0
  const Output plain = run_decode(main, me, nullptr, nullptr, none, q, rows, heads);
  const Output sunk = run_decode(main, me, nullptr, nullptr, sink, q, rows, heads);
  EXPECT_EQ(plain.lse, sunk.lse);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const double lse = plain.lse[r * heads + h];
      const double share = 1.0 / (1.0 + std::exp(static_cast<double>(sink[h]) - lse));
      for (int d = 0; d < kV4Dim; ++d) {
        const std::size_t i = static_cast<std::size_t>((r * heads + h) * kV4Dim + d);
        const double want = codec::load_input<codec::InputDtype::kBf16>(plain.out[i]) * share;
        EXPECT_NEAR(codec::load_input<codec::InputDtype::kBf16>(sunk.out[i]), want, std::ldexp(std::fabs(want), -7))
            << "row " << r << " head " << h << " dim " << d;
      }
    }
  }
}

TEST(v4_decode, rows_without_a_valid_entry_in_either_cache_give_zeros_and_minus_infinity) {
  const std::int64_t rows = 2, heads = 4;
  V4Cache main(Format::kNvfp4DsMlaV41, 200, 64, 1);
  V4Cache extra(Format::kFp8DsMlaV41, 200, 64, 2);
  V4Entries me = V4Entries::random(rows, 8, main.capacity(), false, 0, 3);
  V4Entries xe = V4Entries::random(rows, 8, extra.capacity(), false, 0, 4);
  for (int i = 0; i < 8; ++i) {
    me.indices[8 + i] = i % 2 ? -1 : static_cast<std::int32_t>(main.capacity() + i);  // row 1: -1 or past capacity
  }
  xe.topk_len = {8, 0};  // row 1 uses no extra entry
  auto q = random_v4_queries(rows, heads, 5);
  std::vector<float> sink = random_sink(heads, 6);
  const Output o = run_decode(main, me, &extra, &xe, sink, q, rows, heads);
  for (std::int64_t h = 0; h < heads; ++h) {
    EXPECT_TRUE(std::isfinite(o.lse[h]));
    EXPECT_EQ(o.lse[heads + h], -std::numeric_limits<float>::infinity());
    for (int d = 0; d < kV4Dim; ++d) EXPECT_EQ(o.out[static_cast<std::size_t>((heads + h) * kV4Dim + d)], 0);
  }
}

TEST(v4_decode, sm_scale_defaults_to_one_over_the_root_of_512) {
  const std::int64_t rows = 1, heads = 2;
  V4Cache main(Format::kFp8DsMlaV4, 100, 64, 1);
  V4Entries me = V4Entries::random(rows, 40, main.capacity(), false, 0, 2);
  auto q = random_v4_queries(rows, heads, 3);
  std::vector<float> none;
  const Output by_default = run_decode(main, me, nullptr, nullptr, none, q, rows, heads);
  const Output explicit_scale =
      run_decode(main, me, nullptr, nullptr, none, q, rows, heads, static_cast<float>(kV4DefaultScale));
  EXPECT_EQ(by_default.out, explicit_scale.out);
  EXPECT_EQ(by_default.lse, explicit_scale.lse);
}

// Bad arguments: an error naming the argument, and out / lse untouched.
class V4DecodeValidation : public ::testing::Test {
 protected:
  static constexpr std::int64_t kRows = 2, kHeads = 4;
  V4Cache main{Format::kFp8DsMlaV4, 128, 64, 1};
  V4Cache extra{Format::kNvfp4DsMlaV41, 128, 64, 2};
  V4Entries me = V4Entries::random(kRows, 8, 128, false, 0, 3);
  V4Entries xe = V4Entries::random(kRows, 8, 128, false, 0, 4);
  std::vector<std::uint16_t> q = random_v4_queries(kRows, kHeads, 5);
  std::vector<float> sink = std::vector<float>(kHeads, 0.5f);
  std::vector<std::uint16_t> out = std::vector<std::uint16_t>(kRows * kHeads * kV4Dim, 0x1234);
  std::vector<float> lse = std::vector<float>(kRows * kHeads, 7.0f);

  std::string error_of(Format format, std::int64_t q_dim, const SparseDecodeOptions& options) {
    std::vector<std::uint16_t> wide_q(static_cast<std::size_t>(kRows * kHeads * q_dim), 0);
    try {
      sparse_mla_decode(format, make_view(wide_q.data(), DType::kBFloat16, {kRows, kHeads, q_dim}), main.view(),
                        make_view(me.indices.data(), DType::kInt32, {kRows, me.topk}),
                        make_view(out.data(), DType::kBFloat16, {kRows, kHeads, kV4Dim}),
                        make_view(lse.data(), DType::kFloat32, {kRows, kHeads}), options);
    } catch (const Error& e) {
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](std::uint16_t v) { return v == 0x1234; })) << "out written";
      EXPECT_TRUE(std::all_of(lse.begin(), lse.end(), [](float v) { return v == 7.0f; })) << "lse written";
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
};

TEST_F(V4DecodeValidation, q_must_be_512_wide_for_a_v4_format) {
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, 576, {}).find("q: shape must be (R, H, 512)"), std::string::npos);
}

TEST_F(V4DecodeValidation, a_v32_format_keeps_576_wide_queries) {
  // The main cache is a V4 page; the 576-wide check on q comes first.
  EXPECT_NE(error_of(Format::kFp8DsMla, 512, {}).find("q: shape must be (R, H, 576)"), std::string::npos);
}

TEST_F(V4DecodeValidation, the_sink_must_have_one_float32_per_head) {
  SparseDecodeOptions options;
  TensorView short_sink = make_view(sink.data(), DType::kFloat32, {kHeads - 1});
  options.attn_sink = &short_sink;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("attn_sink: shape must be (H,)"), std::string::npos);
  TensorView int_sink = make_view(sink.data(), DType::kInt32, {kHeads});
  options.attn_sink = &int_sink;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("attn_sink"), std::string::npos);
}

TEST_F(V4DecodeValidation, a_sink_or_an_extra_cache_is_refused_for_a_v32_format) {
  SparseDecodeOptions options;
  TensorView sink_view = make_view(sink.data(), DType::kFloat32, {kHeads});
  options.attn_sink = &sink_view;
  EXPECT_NE(error_of(Format::kFp8DsMla, 576, options).find("attn_sink"), std::string::npos);
  TensorView x_cache = extra.view();
  TensorView x_indices = make_view(xe.indices.data(), DType::kInt32, {kRows, xe.topk});
  SparseDecodeExtraCache x{Format::kNvfp4DsMlaV41, &x_cache, &x_indices, nullptr};
  SparseDecodeOptions with_extra;
  with_extra.extra = &x;
  EXPECT_NE(error_of(Format::kFp8DsMla, 576, with_extra).find("extra_kv_cache"), std::string::npos);
}

TEST_F(V4DecodeValidation, an_extra_cache_needs_a_v4_format_its_cache_and_its_indices) {
  TensorView x_cache = extra.view();
  TensorView x_indices = make_view(xe.indices.data(), DType::kInt32, {kRows, xe.topk});
  SparseDecodeOptions options;
  SparseDecodeExtraCache no_format{};
  no_format.kv_cache = &x_cache;
  no_format.indices = &x_indices;
  options.extra = &no_format;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("extra_format: must be a DeepSeek V4 family format"),
            std::string::npos);
  SparseDecodeExtraCache no_cache{Format::kNvfp4DsMlaV41, nullptr, &x_indices, nullptr};
  options.extra = &no_cache;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("extra_kv_cache: is required"), std::string::npos);
  SparseDecodeExtraCache no_indices{Format::kNvfp4DsMlaV41, &x_cache, nullptr, nullptr};
  options.extra = &no_indices;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("extra_indices: is required"), std::string::npos);
  SparseDecodeExtraCache wrong_format{Format::kFp8DsMlaV41, &x_cache, &x_indices, nullptr};  // the bytes are 288 B
  options.extra = &wrong_format;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("extra_kv_cache: last dim must be 528"),
            std::string::npos);
}

TEST_F(V4DecodeValidation, extra_indices_and_lengths_need_one_row_per_query_row) {
  TensorView x_cache = extra.view();
  TensorView one_row = make_view(xe.indices.data(), DType::kInt32, {1, xe.topk});
  SparseDecodeOptions options;
  SparseDecodeExtraCache x{Format::kNvfp4DsMlaV41, &x_cache, &one_row, nullptr};
  options.extra = &x;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("extra_indices: shape must be (R, K) with R = q rows"),
            std::string::npos);
  TensorView x_indices = make_view(xe.indices.data(), DType::kInt32, {kRows, xe.topk});
  std::vector<std::int32_t> lengths = {1, 2, 3};
  TensorView three = make_view(lengths.data(), DType::kInt32, {3});
  x = {Format::kNvfp4DsMlaV41, &x_cache, &x_indices, &three};
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("extra_topk_len: shape must be (R,)"),
            std::string::npos);
}

TEST_F(V4DecodeValidation, out_must_not_overlap_the_extra_cache) {
  TensorView x_cache = make_view(out.data(), DType::kUInt8, {1, 16, 288});
  TensorView x_indices = make_view(xe.indices.data(), DType::kInt32, {kRows, xe.topk});
  SparseDecodeOptions options;
  SparseDecodeExtraCache x{Format::kNvfp4DsMlaV41, &x_cache, &x_indices, nullptr};
  options.extra = &x;
  EXPECT_NE(error_of(Format::kFp8DsMlaV4, kV4Dim, options).find("out"), std::string::npos);
}

}  // namespace
}  // namespace mlakv::test
