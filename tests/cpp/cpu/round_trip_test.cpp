// SPDX-License-Identifier: Apache-2.0
// decode(encode(x)) on random finite inputs stays within each format's
// rounding bound, element by element, and never yields NaN.
//
// Bounds, with s the decoded scale that applies to x (read from the record):
//  - E2M1 element (NVFP4 latents): v = |x| / s; error <= s * h(min(v, 6)) +
//    max(0, |x| - 6 s), where h is half an E2M1 step at v (0.25 below 2, 0.5
//    below 4, 1 up to 6); the second term is the saturation error where the
//    E4M3 scale byte rounded down. A group whose scale byte is 0 decodes to 0.
//  - E4M3 element (fp8 records, FP8 RoPE): v = |x| / s; error <= s * (max(2^-4 v,
//    2^-10) + max(0, v - 448)): half an ulp of a 3-bit mantissa, or half the
//    smallest subnormal, plus saturation.
//  - 16-bit fields: exact (fp16 RoPE rounded to bf16: half a bf16 ulp, 2^-8 relative).
// Every bound also allows 2^-20 relative for the f32 division before rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using namespace mlakv::test;

constexpr double kDivisionSlack = 0x1p-20;

double e2m1_bound(double x, double s) {
  if (s == 0.0) return std::fabs(x);
  const double v = std::fabs(x) / s;
  const double half_step = v <= 2.0 ? 0.25 : v <= 4.0 ? 0.5 : 1.0;
  return s * half_step + std::max(0.0, std::fabs(x) - 6.0 * s) + kDivisionSlack * std::fabs(x);
}

double e4m3_bound(double x, double s) {
  const double v = std::fabs(x) / s;
  return s * (std::max(0x1p-4 * v, 0x1p-10) + std::max(0.0, v - 448.0)) + kDivisionSlack * std::fabs(x);
}

float read_f32(const std::uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof(f));
  return f;
}

// Per-element bound for the latent (i < 512) or RoPE (i >= 512) value x of a record (ABI.md offsets).
double bound(Format f, const std::uint8_t* r, int i, double x, float k_scale, DType dtype) {
  const bool rope = i >= 512;
  const int j = rope ? i - 512 : i;
  switch (f) {
    case Format::kBf16:
    case Format::kFp16:
      return 0.0;
    case Format::kFp8E4m3:
      return e4m3_bound(x, k_scale);
    case Format::kFp8DsMla:
      return rope ? 0.0 : e4m3_bound(x, read_f32(r + 512 + 4 * (j / 128)));
    case Format::kNvfp4DsMla:
      if (rope) return dtype == DType::kFloat16 ? std::fabs(x) * 0x1p-8 : 0.0;
      return e2m1_bound(x, e4m3_value(r[256 + j / 16]));
    case Format::kNvfp4DsMlaFp8Rope:
      return rope ? e4m3_bound(x, read_f32(r + 288)) : e2m1_bound(x, e4m3_value(r[256 + j / 16]));
    case Format::kNvfp4DsMlaFp8RopePts:
      return rope ? e4m3_bound(x, read_f32(r + 288)) : e2m1_bound(x, e4m3_value(r[256 + j / 16]) * read_f32(r + 292));
    case Format::kNvfp4Fp8DsMla:
      return rope ? e4m3_bound(x, 1.0) : e2m1_bound(x, e4m3_value(r[320 + 8 * ((j / 16) & 3) + (j / 16) / 4]));
    case Format::kFp8DsMlaV4:  // the V4 family (448 + 64 values) has its own tests (fp8_ds_mla_v4, v41_records)
    case Format::kFp8DsMlaV41:
    case Format::kNvfp4DsMlaV41:
    case Format::kFp8DsMlaV41Planar:
    case Format::kNvfp4DsMlaV41Planar:
      break;
  }
  ADD_FAILURE() << "no rounding bound for format " << static_cast<int>(f);
  return 0.0;
}

class round_trip : public ::testing::TestWithParam<std::tuple<Format, DType>> {};

TEST_P(round_trip, error_within_the_format_rounding_bound_and_no_nan) {
  const Format format = std::get<0>(GetParam());
  const DType dtype = std::get<1>(GetParam());
  constexpr std::int64_t kTokens = 512;
  const float k_scale = 0.03125f;
  const auto kv_c = random_inputs(kTokens * 512, dtype, 100, false);
  const auto k_pe = random_inputs(kTokens * 64, dtype, 200, false);
  const int bytes = mlakv::format_info(format).record_bytes;
  auto cache = write_tokens(format, dtype, kv_c, k_pe, k_scale);

  std::vector<std::int64_t> slots(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) slots[t] = t;
  std::vector<float> kv_out(kTokens * 512), pe_out(kTokens * 64);
  const mlakv::TensorView scale = mlakv::make_view(const_cast<float*>(&k_scale), DType::kFloat32, {1});
  mlakv::GatherOptions options;
  options.scale = &scale;
  options.rope_dtype = dtype;
  mlakv::gather_records(format, mlakv::make_view(cache.data(), DType::kUInt8, {1, kTokens, bytes}),
                        mlakv::make_view(slots.data(), DType::kInt64, {kTokens}),
                        mlakv::make_view(kv_out.data(), DType::kFloat32, {kTokens, 512}),
                        mlakv::make_view(pe_out.data(), DType::kFloat32, {kTokens, 64}), options);

  const auto widen = [dtype](std::uint16_t b) {
    return dtype == DType::kBFloat16 ? mlakv::codec::load_input<mlakv::codec::InputDtype::kBf16>(b)
                                     : mlakv::codec::load_input<mlakv::codec::InputDtype::kFp16>(b);
  };
  int failures = 0;
  for (std::int64_t t = 0; t < kTokens && failures < 5; ++t) {
    const std::uint8_t* record = cache.data() + t * bytes;
    for (int i = 0; i < 576; ++i) {
      const double x = widen(i < 512 ? kv_c[t * 512 + i] : k_pe[t * 64 + i - 512]);
      const double got = i < 512 ? kv_out[t * 512 + i] : pe_out[t * 64 + i - 512];
      const double limit = bound(format, record, i, x, k_scale, dtype);
      if (std::isnan(got) || std::fabs(got - x) > limit) {
        ADD_FAILURE() << "token " << t << " element " << i << ": x = " << x << ", decoded " << got << ", bound "
                      << limit;
        if (++failures == 5) break;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    every_format, round_trip,
    // Every format with every input dtype it takes (16-bit records take their own).
    ::testing::Values(std::tuple{Format::kBf16, DType::kBFloat16}, std::tuple{Format::kFp16, DType::kFloat16},
                      std::tuple{Format::kFp8E4m3, DType::kBFloat16}, std::tuple{Format::kFp8E4m3, DType::kFloat16},
                      std::tuple{Format::kFp8DsMla, DType::kBFloat16}, std::tuple{Format::kFp8DsMla, DType::kFloat16},
                      std::tuple{Format::kNvfp4DsMla, DType::kBFloat16},
                      std::tuple{Format::kNvfp4DsMla, DType::kFloat16},
                      std::tuple{Format::kNvfp4DsMlaFp8Rope, DType::kBFloat16},
                      std::tuple{Format::kNvfp4DsMlaFp8Rope, DType::kFloat16},
                      std::tuple{Format::kNvfp4DsMlaFp8RopePts, DType::kBFloat16},
                      std::tuple{Format::kNvfp4DsMlaFp8RopePts, DType::kFloat16},
                      std::tuple{Format::kNvfp4Fp8DsMla, DType::kBFloat16},
                      std::tuple{Format::kNvfp4Fp8DsMla, DType::kFloat16}),
    [](const auto& info) {
      return std::string(mlakv::format_info(std::get<0>(info.param)).id) + "_" +
             mlakv::dtype_name(std::get<1>(info.param));
    });

TEST(round_trip_pts, pts_and_static_records_both_decode_within_bounds_from_the_same_input) {
  const auto kv_c = random_inputs(64 * 512, DType::kBFloat16, 300, false);
  const auto k_pe = random_inputs(64 * 64, DType::kBFloat16, 301, false);
  for (const Format f : {Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts}) {
    const auto cache = write_tokens(f, DType::kBFloat16, kv_c, k_pe);
    std::vector<float> kv_out(64 * 512), pe_out(64 * 64);
    std::vector<std::int64_t> slots(64);
    for (int i = 0; i < 64; ++i) slots[i] = i;
    mlakv::gather_records(f, mlakv::make_view(const_cast<std::uint8_t*>(cache.data()), DType::kUInt8, {1, 64, 368}),
                          mlakv::make_view(slots.data(), DType::kInt64, {64}),
                          mlakv::make_view(kv_out.data(), DType::kFloat32, {64, 512}),
                          mlakv::make_view(pe_out.data(), DType::kFloat32, {64, 64}));
    for (int t = 0; t < 64; ++t) {
      for (int i = 0; i < 512; ++i) {
        const double x = mlakv::codec::load_input<mlakv::codec::InputDtype::kBf16>(kv_c[t * 512 + i]);
        ASSERT_LE(std::fabs(kv_out[t * 512 + i] - x), bound(f, cache.data() + t * 368, i, x, 1.0f, DType::kBFloat16))
            << mlakv::format_info(f).id << " token " << t << " element " << i;
      }
    }
  }
}

}  // namespace
