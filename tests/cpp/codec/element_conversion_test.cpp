// SPDX-License-Identifier: Apache-2.0
// Every bf16 and fp16 bit pattern through the codecs' E4M3, E2M1 and bf16
// conversions, against table-driven oracles written here from the OCP
// definitions (not by calling CUDA's headers again).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec/element.h"
#include "codec/fp8_ds_mla.h"
#include "codec/fp8_e4m3.h"
#include "codec/nvfp4.h"
#include "codec/nvfp4_compare.h"
#include "codec/nvfp4_ds_mla.h"
#include "codec/nvfp4_ds_mla_fp8_rope.h"
#include "codec/nvfp4_ds_mla_fp8_rope_pts.h"
#include "codec/nvfp4_fp8_ds_mla.h"
#include "e2m1_quads.h"
#include "test_support.h"

namespace {

using mlakv::codec::InputDtype;
using mlakv::test::e2m1_value;
using mlakv::test::e4m3_value;

// Round |x| to the nearest of the sorted positive codes 0..max_code, ties to
// the even code (mantissa lsb 0), saturating above the largest; the sign is kept.
unsigned round_to_table(double x, unsigned max_code, unsigned sign_bit, double (*value)(unsigned)) {
  const bool negative = std::signbit(x);
  const double m = std::fabs(x);
  unsigned code = max_code;
  if (m < value(max_code)) {
    unsigned hi = 1;
    while (value(hi) < m) ++hi;  // value(hi - 1) < m <= value(hi)
    const double d_lo = m - value(hi - 1);
    const double d_hi = value(hi) - m;
    if (d_hi == 0.0) {
      code = hi;
    } else if (d_lo < d_hi) {
      code = hi - 1;
    } else if (d_hi < d_lo) {
      code = hi;
    } else {
      code = ((hi - 1) & 1) == 0 ? hi - 1 : hi;
    }
    if (m == 0.0) code = 0;
  }
  return negative ? (code | sign_bit) : code;
}

unsigned e4m3_oracle(double x) {
  if (std::isnan(x)) return 0x7F;
  return round_to_table(x, 0x7E, 0x80, e4m3_value);
}

unsigned e2m1_oracle(double x) {
  if (std::isnan(x)) return 0x7;
  return round_to_table(x, 0x7, 0x8, e2m1_value);
}

// The textbook f32 -> bf16 round-to-nearest-even on the bit pattern.
std::uint16_t bf16_oracle(float x) {
  if (std::isnan(x)) return 0x7FFF;
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

template <InputDtype kDtype>
void expect_all_patterns_match_oracles() {
  int e4m3_bad = 0;
  int e2m1_bad = 0;
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float x = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
    const unsigned e4m3 = mlakv::codec::encode_e4m3(x);
    const unsigned e2m1 = mlakv::codec::encode_e2m1(x);
    if (e4m3 != e4m3_oracle(x) && e4m3_bad++ < 5) {
      ADD_FAILURE() << "E4M3 of input bits 0x" << std::hex << bits << " (" << x << "): got 0x" << e4m3 << ", oracle 0x"
                    << e4m3_oracle(x);
    }
    if (e2m1 != e2m1_oracle(x) && e2m1_bad++ < 5) {
      ADD_FAILURE() << "E2M1 of input bits 0x" << std::hex << bits << " (" << x << "): got 0x" << e2m1 << ", oracle 0x"
                    << e2m1_oracle(x);
    }
  }
  EXPECT_EQ(e4m3_bad, 0);
  EXPECT_EQ(e2m1_bad, 0);
}

TEST(element_conversion, every_bf16_pattern_matches_e4m3_and_e2m1_oracles) {
  expect_all_patterns_match_oracles<InputDtype::kBf16>();
}

TEST(element_conversion, every_fp16_pattern_matches_e4m3_and_e2m1_oracles) {
  expect_all_patterns_match_oracles<InputDtype::kFp16>();
}

TEST(element_conversion, threshold_e2m1_encoder_equals_cuda_for_every_16_bit_input_and_specials) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    for (const float x : {mlakv::codec::load_input<InputDtype::kBf16>(static_cast<std::uint16_t>(bits)),
                          mlakv::codec::load_input<InputDtype::kFp16>(static_cast<std::uint16_t>(bits))}) {
      ASSERT_EQ(mlakv::codec::encode_e2m1_by_thresholds(x), mlakv::codec::encode_e2m1_cuda(x)) << x;
    }
  }
  // Every decision point and its two f32 neighbours.
  for (const float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.0f}) {
    for (const float x : {t, std::nextafter(t, 0.0f), std::nextafter(t, 10.0f)}) {
      ASSERT_EQ(mlakv::codec::encode_e2m1_by_thresholds(x), mlakv::codec::encode_e2m1_cuda(x)) << x;
      ASSERT_EQ(mlakv::codec::encode_e2m1_by_thresholds(-x), mlakv::codec::encode_e2m1_cuda(-x)) << -x;
    }
  }
}

TEST(element_conversion, e2m1_decode_by_bits_matches_cuda_for_all_16_codes) {
  for (unsigned code = 0; code < 16; ++code) {
    const float want = __half2float(__half(__nv_cvt_fp4_to_halfraw(code, __NV_E2M1)));
    const float got = mlakv::codec::decode_e2m1_by_bits(static_cast<std::uint8_t>(code));
    EXPECT_EQ(mlakv::test::f32_bits(got), mlakv::test::f32_bits(want)) << "code " << code;
  }
}

// The GPU's division-free static-recipe codes equal E2M1(x / s) for every
// 16-bit x and every nonzero E4M3 scale s (the exhaustive proof; the GPU test
// repeats it with the device instructions).
template <InputDtype kDtype>
void expect_compare_codes_equal_division() {
  int bad = 0;
  for (unsigned scode = 1; scode < 0x7F; ++scode) {
    const float s = mlakv::codec::decode_e4m3(static_cast<std::uint8_t>(scode));
    const mlakv::codec::E2m1Thresholds<kDtype> thr(s);
    for (std::uint32_t bits = 0; bits <= 0xFFFF; bits += 2) {
      const std::uint32_t pair = bits | ((bits + 1) << 16);
      const std::uint8_t got = mlakv::codec::e2m1_pair_by_compare<kDtype>(pair, thr);
      const auto ref = [s](std::uint32_t b) {
        return mlakv::codec::encode_e2m1_cuda(
            mlakv::codec::div_rn(mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(b)), s));
      };
      const std::uint8_t want = static_cast<std::uint8_t>(ref(bits) | (ref(bits + 1) << 4));
      if (got != want && bad++ < 5) {
        ADD_FAILURE() << "s = " << s << ", input bits 0x" << std::hex << bits << ": got 0x" << int(got) << ", want 0x"
                      << int(want);
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(element_conversion, division_free_e2m1_codes_equal_the_recipe_for_every_bf16_input_and_scale) {
  expect_compare_codes_equal_division<InputDtype::kBf16>();
}

TEST(element_conversion, division_free_e2m1_codes_equal_the_recipe_for_every_fp16_input_and_scale) {
  expect_compare_codes_equal_division<InputDtype::kFp16>();
}

// The GPU's fast path for groups without NaN: four pairs per word, for every
// non-NaN 16-bit input (NaN patterns stand in as a signed zero) and every
// scale byte of a recipe: the static one, E2M1(x / s) for s != 0, and the
// 352 record's, E2M1(RN(x * RN(1 / s))) with s = E4M3(byte) for the bytes
// its writer stores, 0x01 (the 2^-9 floor) to 0x7E.
// quad_codes over every 16-bit pattern, eight at a time; reports up to five
// mismatches and returns how many there were.
template <InputDtype kDtype, class Meets, class Recipe>
int quad_mismatches(const mlakv::codec::E2m1Thresholds<kDtype>& thr, Meets meets, Recipe recipe,
                    const std::string& context) {
  int bad = 0;
  for (std::uint32_t first = 0; first <= 0xFFFF; first += 8) {
    const mlakv::test::QuadCodes codes = mlakv::test::quad_codes<kDtype>(first, thr, meets, recipe);
    if (codes.got != codes.want && bad++ < 5) {
      ADD_FAILURE() << context << ", inputs from 0x" << std::hex << first << ": got 0x" << codes.got << ", want 0x"
                    << codes.want;
    }
  }
  return bad;
}

enum class Recipe { kStatic, kReciprocal };

template <InputDtype kDtype, Recipe kRecipe>
void expect_nan_free_quads_equal_the_recipe() {
  using mlakv::codec::E2m1Thresholds;
  int bad = 0;
  int rows = 0;
  for (unsigned scode = 1; scode < 0x7F; ++scode, ++rows) {
    const float s = mlakv::codec::decode_e4m3(static_cast<std::uint8_t>(scode));
    const float inv_s = 1.0f / s;
    const E2m1Thresholds<kDtype> thr =
        kRecipe == Recipe::kStatic
            ? E2m1Thresholds<kDtype>(s)
            : E2m1Thresholds<kDtype>::for_reciprocal_scale_byte(static_cast<std::uint8_t>(scode));
    const auto meets = [](float v) { return v == v; };
    const auto recipe = [s, inv_s](float x) {
      return kRecipe == Recipe::kStatic ? mlakv::codec::div_rn(x, s) : x * inv_s;
    };
    bad += quad_mismatches<kDtype>(thr, meets, recipe, "s = " + std::to_string(s));
  }
  EXPECT_EQ(rows, 0x7E);
  EXPECT_EQ(bad, 0);
}

TEST(element_conversion, nan_free_e2m1_quads_equal_the_static_recipe_for_every_bf16_input_and_scale) {
  expect_nan_free_quads_equal_the_recipe<InputDtype::kBf16, Recipe::kStatic>();
}

TEST(element_conversion, nan_free_e2m1_quads_equal_the_static_recipe_for_every_fp16_input_and_scale) {
  expect_nan_free_quads_equal_the_recipe<InputDtype::kFp16, Recipe::kStatic>();
}

TEST(element_conversion, nan_free_e2m1_quads_equal_the_reciprocal_recipe_for_every_bf16_input_and_scale) {
  expect_nan_free_quads_equal_the_recipe<InputDtype::kBf16, Recipe::kReciprocal>();
}

TEST(element_conversion, nan_free_e2m1_quads_equal_the_reciprocal_recipe_for_every_fp16_input_and_scale) {
  expect_nan_free_quads_equal_the_recipe<InputDtype::kFp16, Recipe::kReciprocal>();
}

// The pts record's two-level recipe E2M1(RN(RN(x / st) / s)) by thresholds,
// for every non-NaN 16-bit x with |x| <= the token amax a (st = a / 2688) and
// every nonzero E4M3 scale s, for a spread of token amaxes (the GPU test covers
// every one of them).
template <InputDtype kDtype>
void expect_two_level_quads_equal_the_recipe() {
  using mlakv::codec::E2m1Thresholds;
  int bad = 0;
  const std::uint32_t amaxes[] = {0x0001u, 0x1234u, 0x3F80u, 0x5A5Au, 0x7BFFu};
  for (const std::uint32_t abits : amaxes) {
    const float a = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(abits));
    if (!(a < INFINITY)) continue;
    const float st = a * mlakv::codec::kInvE4m3TimesE2m1Max;
    if (st == 0.0f) continue;
    for (unsigned scode = 1; scode < 0x7F; ++scode) {
      const float s = mlakv::codec::decode_e4m3(static_cast<std::uint8_t>(scode));
      const auto meets = [a](float v) { return v == v && std::fabs(v) <= a; };
      const auto recipe = [st, s](float x) { return mlakv::codec::div_rn(mlakv::codec::div_rn(x, st), s); };
      bad += quad_mismatches<kDtype>(E2m1Thresholds<kDtype>::for_two_level(mlakv::codec::TokenScaleDivider(st), s),
                                     meets, recipe, "a = " + std::to_string(a) + ", s = " + std::to_string(s));
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(element_conversion, two_level_e2m1_quads_equal_the_pts_recipe_for_bf16_inputs) {
  expect_two_level_quads_equal_the_recipe<InputDtype::kBf16>();
}

TEST(element_conversion, two_level_e2m1_quads_equal_the_pts_recipe_for_fp16_inputs) {
  expect_two_level_quads_equal_the_recipe<InputDtype::kFp16>();
}

// The GPU's amax / 6 and the fp8_ds_mla tile scale's amax / 448 (a product
// and one FMA residual step) are the correctly rounded quotients for every
// amax a 16-bit input can produce.
template <InputDtype kDtype>
void expect_amax_quotients_exact(float (*divide)(float), float divisor) {
  for (std::uint32_t bits = 0; bits < 0x8000; ++bits) {
    const float amax = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
    if (amax != amax) continue;  // amaxes ignore NaN
    ASSERT_EQ(mlakv::test::f32_bits(divide(amax)), mlakv::test::f32_bits(amax / divisor))
        << "amax / " << divisor << ", amax bits 0x" << std::hex << bits;
  }
}

TEST(element_conversion, amax_over_six_by_residual_is_the_division_for_every_bf16_amax) {
  expect_amax_quotients_exact<InputDtype::kBf16>(mlakv::codec::divide_amax_by_e2m1_max, 6.0f);
}

TEST(element_conversion, amax_over_six_by_residual_is_the_division_for_every_fp16_amax) {
  expect_amax_quotients_exact<InputDtype::kFp16>(mlakv::codec::divide_amax_by_e2m1_max, 6.0f);
}

TEST(element_conversion, amax_over_448_by_residual_is_the_division_for_every_bf16_amax) {
  expect_amax_quotients_exact<InputDtype::kBf16>(mlakv::codec::divide_amax_by_e4m3_max, 448.0f);
}

TEST(element_conversion, amax_over_448_by_residual_is_the_division_for_every_fp16_amax) {
  expect_amax_quotients_exact<InputDtype::kFp16>(mlakv::codec::divide_amax_by_e4m3_max, 448.0f);
}

// The GPU's quotient for a k_scale that is not a power of two gives the E4M3
// code of the division (the GPU proof covers every d of three binades). A
// random d almost never puts a quotient near a rounding point of E4M3, so
// these divisors are chosen to: for every significand of the input type and
// every 5-bit significand M of a point (E4M3 midpoints, normal and
// subnormal), d = significand / M and its four nearest f32 neighbours, near
// both ends of the range and at 1, against every input with that significand.
template <InputDtype kDtype>
void expect_k_scale_quotients_give_the_division_codes() {
  constexpr int kMantissaBits = kDtype == InputDtype::kBf16 ? 7 : 10;
  constexpr int kExponentBits = 15 - kMantissaBits;
  const float scales[] = {0x1p-63f, 1.0f, 0x1p62f};
  int bad = 0;
  for (std::uint32_t m = 0; m < (1u << kMantissaBits); ++m) {
    const float significand = 1.0f + static_cast<float>(m) / static_cast<float>(1u << kMantissaBits);
    for (int point = 16; point < 32; ++point) {
      for (const float scale : scales) {
        float d = significand / (static_cast<float>(point) / 16.0f) * scale;
        d = std::nextafter(std::nextafter(d, 0.0f), 0.0f);
        for (int neighbour = 0; neighbour < 5; ++neighbour, d = std::nextafter(d, INFINITY)) {
          const float r = 1.0f / d;
          for (std::uint32_t high = 0; high < (2u << kExponentBits); ++high) {  // sign and exponent
            const auto bits = static_cast<std::uint16_t>((high << kMantissaBits) | m);
            const float x = mlakv::codec::load_input<kDtype>(bits);
            const std::uint8_t got = mlakv::codec::encode_e4m3(mlakv::codec::quotient_for_e4m3(x, d, r));
            const std::uint8_t want = mlakv::codec::encode_e4m3(x / d);
            if (got != want && bad++ < 5) {
              ADD_FAILURE() << "k_scale " << d << ", x bits 0x" << std::hex << bits << ": 0x" << int{got} << " != 0x"
                            << int{want};
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(element_conversion, k_scale_quotients_give_the_division_codes_for_every_bf16_input) {
  expect_k_scale_quotients_give_the_division_codes<InputDtype::kBf16>();
}

TEST(element_conversion, k_scale_quotients_give_the_division_codes_for_every_fp16_input) {
  expect_k_scale_quotients_give_the_division_codes<InputDtype::kFp16>();
}

TEST(element_conversion, widening_is_exact_for_every_pattern) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float bf = mlakv::codec::load_input<InputDtype::kBf16>(static_cast<std::uint16_t>(bits));
    std::uint32_t u;
    std::memcpy(&u, &bf, sizeof(u));
    ASSERT_EQ(u, bits << 16) << "bf16 bits 0x" << std::hex << bits;
    // fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
    const float h = mlakv::codec::load_input<InputDtype::kFp16>(static_cast<std::uint16_t>(bits));
    const unsigned e = (bits >> 10) & 0x1F;
    const unsigned m = bits & 0x3FF;
    double expect = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, static_cast<int>(e) - 15);
    if (e == 0x1F) expect = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    if (bits & 0x8000) expect = -expect;
    if (std::isnan(expect)) {
      ASSERT_TRUE(std::isnan(h)) << "fp16 bits 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(h), expect) << "fp16 bits 0x" << std::hex << bits;
      ASSERT_EQ(std::signbit(h), (bits & 0x8000) != 0);
    }
  }
}

TEST(element_conversion, every_fp16_pattern_rounds_to_bf16_like_the_oracle) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float x = mlakv::codec::load_input<InputDtype::kFp16>(static_cast<std::uint16_t>(bits));
    ASSERT_EQ(mlakv::codec::encode_bf16(x), bf16_oracle(x)) << "fp16 bits 0x" << std::hex << bits;
  }
}

TEST(element_conversion, decoders_match_the_ocp_tables) {
  for (unsigned code = 0; code < 256; ++code) {
    const double expect = e4m3_value(code);
    const float got = mlakv::codec::decode_e4m3(static_cast<std::uint8_t>(code));
    if (std::isnan(expect)) {
      EXPECT_TRUE(std::isnan(got)) << "E4M3 code 0x" << std::hex << code;
    } else {
      EXPECT_EQ(static_cast<double>(got), expect) << "E4M3 code 0x" << std::hex << code;
    }
  }
  for (unsigned code = 0; code < 16; ++code) {
    EXPECT_EQ(static_cast<double>(mlakv::codec::decode_e2m1(static_cast<std::uint8_t>(code))), e2m1_value(code))
        << "E2M1 code 0x" << std::hex << code;
  }
}

TEST(element_conversion, special_values_follow_abi_rules) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(mlakv::codec::encode_e4m3(nan), 0x7F);
  EXPECT_EQ(mlakv::codec::encode_e4m3(-nan), 0x7F);
  EXPECT_EQ(mlakv::codec::encode_e4m3(inf), 0x7E);   // saturate to 448
  EXPECT_EQ(mlakv::codec::encode_e4m3(-inf), 0xFE);  // -448
  EXPECT_EQ(mlakv::codec::encode_e2m1(nan), 0x7);
  EXPECT_EQ(mlakv::codec::encode_e2m1(-nan), 0x7);
  EXPECT_EQ(mlakv::codec::encode_e2m1(-0.0f), 0x8);
  EXPECT_EQ(mlakv::codec::encode_e2m1(inf), 0x7);
  EXPECT_EQ(mlakv::codec::encode_e2m1(-inf), 0xF);
  EXPECT_EQ(mlakv::codec::encode_bf16(-nan), 0x7FFF);
}

TEST(element_conversion, amax_fold_ignores_nan_and_sign) {
  float amax = 0.0f;
  for (float x : {1.5f, std::numeric_limits<float>::quiet_NaN(), -3.0f, -0.0f}) amax = mlakv::codec::fold_amax(amax, x);
  EXPECT_EQ(amax, 3.0f);
}

}  // namespace

namespace {

// The pairs of e4m3 codes with each scale of a spread, as one fp8_ds_mla
// lane's 16 codes: the paired decode gives encode_bf16 of the scalar decode.
void expect_paired_fp8_ds_mla_decode_equals_the_scalar_one(float scale) {
  using mlakv::codec::CodecFp8DsMla;
  using Spec = CodecFp8DsMla::Spec;
  std::vector<std::uint8_t> record(Spec::kRecordBytes, 0);
  std::memcpy(record.data() + Spec::kTileScales.offset, &scale, sizeof(scale));
  mlakv::codec::DecodeParams params{};
  int mismatches = 0;
  for (int first = 0; first < 256; ++first) {
    for (int i = 0; i < mlakv::codec::kLatentPerLane; ++i) {
      record[Spec::kLatent.offset + i] = static_cast<std::uint8_t>(i % 2 == 0 ? first : (first * 7 + i) & 0xFF);
    }
    float kv[mlakv::codec::kLatentPerLane];
    float pe[mlakv::codec::kRopePerLane];
    CodecFp8DsMla::decode_lane(0, record.data(), params, kv, pe);
    std::uint16_t got[mlakv::codec::kLatentPerLane];
    std::uint16_t got_pe[mlakv::codec::kRopePerLane];
    CodecFp8DsMla::decode_lane_bf16(0, record.data(), params, got, got_pe);
    for (int i = 0; i < mlakv::codec::kLatentPerLane; ++i) {
      mismatches += got[i] != mlakv::codec::encode_bf16(kv[i]) ? 1 : 0;
    }
  }
  EXPECT_EQ(mismatches, 0) << "scale " << scale;
}

template <class Codec>
void expect_zero_record_decodes_to_zero_bits() {
  static_assert(Codec::kZeroRecordDecodesToZero);
  const std::vector<std::uint8_t> record(Codec::Spec::kRecordBytes, 0);
  for (const InputDtype rope : {InputDtype::kBf16, InputDtype::kFp16}) {
    mlakv::codec::DecodeParams params{};
    params.rope_dtype = rope;
    params.k_scale = -3.0f;  // not read by these codecs: the claim holds whatever the parameters
    for (int lane = 0; lane < mlakv::codec::kLanes; ++lane) {
      std::uint16_t kv[mlakv::codec::kLatentPerLane];
      std::uint16_t pe[mlakv::codec::kRopePerLane];
      mlakv::codec::decode_lane_bf16_bits<Codec>(lane, record.data(), params, kv, pe);
      for (const std::uint16_t bits : kv) EXPECT_EQ(bits, 0u) << "lane " << lane;
      for (const std::uint16_t bits : pe) EXPECT_EQ(bits, 0u) << "lane " << lane;
    }
  }
}

// Every RoPE quad (the attention kernels' 16-byte chunk of 4 pairs) of
// records whose RoPE bytes take every value at every position (and random
// other bytes: scales of any bits, NaN payloads), under both RoPE dtypes and
// a few k_scales, against decode_lane_bf16_bits lane by lane.
template <class Codec>
void expect_rope_quads_equal_the_lanes_pairs() {
  std::mt19937 rng(17);
  std::vector<std::uint8_t> record(Codec::Spec::kRecordBytes);
  int mismatches = 0;
  for (int shift = 0; shift < 256; ++shift) {
    for (auto& byte : record) byte = static_cast<std::uint8_t>(rng());
    for (int b = 0; b < Codec::Spec::kRope.bytes; ++b) {
      record[Codec::Spec::kRope.offset + b] = static_cast<std::uint8_t>(b + shift);
    }
    for (const InputDtype rope : {InputDtype::kBf16, InputDtype::kFp16}) {
      for (const float k_scale : {1.0f, 0.37f, 3.0e-30f}) {
        mlakv::codec::DecodeParams params{};
        params.rope_dtype = rope;
        params.k_scale = k_scale;
        for (int quad = 0; quad < mlakv::codec::kLanes / 4; ++quad) {
          std::uint32_t pairs[4];
          mlakv::codec::decode_rope_quad_bf16_bits<Codec>(quad, record.data(), params, pairs);
          for (int i = 0; i < 4; ++i) {
            std::uint16_t kv[mlakv::codec::kLatentPerLane];
            std::uint16_t pe[mlakv::codec::kRopePerLane];
            mlakv::codec::decode_lane_bf16_bits<Codec>(4 * quad + i, record.data(), params, kv, pe);
            const std::uint32_t want = static_cast<std::uint32_t>(pe[0]) | static_cast<std::uint32_t>(pe[1]) << 16;
            mismatches += pairs[i] != want ? 1 : 0;
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Random records (every scale byte of every value at some position): the
// scale bytes of groups first + 8 i loaded together equal each group's own
// latent_scale_byte, for every first.
template <class Codec>
void expect_strided_scale_bytes_equal_each_groups() {
  std::mt19937 rng(23);
  std::vector<std::uint8_t> record(Codec::Spec::kRecordBytes);
  int mismatches = 0;
  for (int trial = 0; trial < 256; ++trial) {
    for (auto& byte : record) byte = static_cast<std::uint8_t>(rng());
    for (int first = 0; first < mlakv::codec::kGroupStride; ++first) {
      std::uint8_t bytes[mlakv::codec::kStridedGroups];
      Codec::latent_scale_bytes_strided(first, record.data(), bytes);
      for (int i = 0; i < mlakv::codec::kStridedGroups; ++i) {
        mismatches +=
            bytes[i] != Codec::latent_scale_byte(first + mlakv::codec::kGroupStride * i, record.data()) ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace

TEST(element_conversion, strided_scale_bytes_equal_each_groups_scale_byte_for_every_nvfp4_codec) {
  expect_strided_scale_bytes_equal_each_groups<mlakv::codec::CodecNvfp4DsMla>();
  expect_strided_scale_bytes_equal_each_groups<mlakv::codec::CodecNvfp4DsMlaFp8Rope>();
  expect_strided_scale_bytes_equal_each_groups<mlakv::codec::CodecNvfp4DsMlaFp8RopePts>();
  expect_strided_scale_bytes_equal_each_groups<mlakv::codec::CodecNvfp4Fp8DsMla>();
}

TEST(element_conversion, fp8_ds_mla_tile_scales_decode_each_lane_as_its_own_scale_load_does) {
  std::mt19937 rng(29);
  std::vector<std::uint8_t> record(mlakv::codec::CodecFp8DsMla::Spec::kRecordBytes);
  int mismatches = 0;
  for (int trial = 0; trial < 64; ++trial) {
    for (auto& byte : record) byte = static_cast<std::uint8_t>(rng());
    float ts[mlakv::format::kFp8Tiles];
    mlakv::codec::CodecFp8DsMla::tile_scales(record.data(), ts);
    for (int lane = 0; lane < mlakv::codec::kLanes; ++lane) {
      std::uint16_t want[mlakv::codec::kLatentPerLane];
      std::uint16_t pe[mlakv::codec::kRopePerLane];
      mlakv::codec::CodecFp8DsMla::decode_lane_bf16(lane, record.data(), {}, want, pe);
      std::uint16_t got[mlakv::codec::kLatentPerLane];
      mlakv::codec::CodecFp8DsMla::decode_latent_bf16(lane, record.data(),
                                                      ts[lane / mlakv::codec::CodecFp8DsMla::kLatentAmaxLanes], got);
      for (int i = 0; i < mlakv::codec::kLatentPerLane; ++i) mismatches += got[i] != want[i] ? 1 : 0;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(element_conversion, zero_records_decode_to_zero_bits_for_every_codec_that_says_so) {
  expect_zero_record_decodes_to_zero_bits<mlakv::codec::CodecFp8DsMla>();
  expect_zero_record_decodes_to_zero_bits<mlakv::codec::CodecNvfp4DsMla>();
  expect_zero_record_decodes_to_zero_bits<mlakv::codec::CodecNvfp4DsMlaFp8Rope>();
  expect_zero_record_decodes_to_zero_bits<mlakv::codec::CodecNvfp4DsMlaFp8RopePts>();
  expect_zero_record_decodes_to_zero_bits<mlakv::codec::CodecNvfp4Fp8DsMla>();
}

TEST(element_conversion, paired_fp8_ds_mla_decode_equals_the_scalar_decode_for_every_code) {
  for (const float scale : {1.0f, 1.0f / 448.0f, 0.0123f, 3.0e-30f, 7.5e30f, FLT_MIN, INFINITY, NAN}) {
    expect_paired_fp8_ds_mla_decode_equals_the_scalar_one(scale);
  }
}

TEST(element_conversion, rope_quads_equal_each_lanes_rope_pair_for_every_attention_codec) {
  expect_rope_quads_equal_the_lanes_pairs<mlakv::codec::CodecFp8E4m3>();
  expect_rope_quads_equal_the_lanes_pairs<mlakv::codec::CodecFp8DsMla>();
  expect_rope_quads_equal_the_lanes_pairs<mlakv::codec::CodecNvfp4DsMla>();
  expect_rope_quads_equal_the_lanes_pairs<mlakv::codec::CodecNvfp4DsMlaFp8Rope>();
  expect_rope_quads_equal_the_lanes_pairs<mlakv::codec::CodecNvfp4DsMlaFp8RopePts>();
  expect_rope_quads_equal_the_lanes_pairs<mlakv::codec::CodecNvfp4Fp8DsMla>();
}
