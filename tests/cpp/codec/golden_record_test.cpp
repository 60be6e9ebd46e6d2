// SPDX-License-Identifier: Apache-2.0
// Golden records built by hand from exactly representable inputs, compared byte
// for byte, pads included. Offsets here are written from docs/ABI.md on
// purpose, independently of src/format/specs.h, so a wrong spec fails here.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using namespace mlakv::test;

constexpr double kE2m1Magnitudes[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

struct Token {
  std::vector<float> kv_c = std::vector<float>(512, 0.0f);
  std::vector<float> k_pe = std::vector<float>(64, 0.0f);
};

std::vector<std::uint16_t> to_bits(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint16_t> bits;
  for (float v : values) bits.push_back(dtype == DType::kBFloat16 ? bf16_bits(v) : fp16_bits(v));
  return bits;
}

void put_u16(std::vector<std::uint8_t>& r, int offset, std::uint16_t v) {
  r[offset] = static_cast<std::uint8_t>(v & 0xFF);
  r[offset + 1] = static_cast<std::uint8_t>(v >> 8);
}

void put_f32(std::vector<std::uint8_t>& r, int offset, float f) {
  const std::uint32_t u = f32_bits(f);
  for (int i = 0; i < 4; ++i) r[offset + i] = static_cast<std::uint8_t>(u >> (8 * i));
}

// E2M1 grid value j of a group, with a sign pattern that includes -0.
double grid_value(int g, int j) {
  const double sign = (j + g) % 3 == 0 ? -1.0 : 1.0;
  return sign * kE2m1Magnitudes[j % 8];
}

// Group g of the latent holds grid values times 2^exponent(g); every group reaches 6 * 2^k.
// The last group is all -0: its scale is 0 and every recipe must handle it.
Token nvfp4_token(int (*exponent)(int)) {
  Token t;
  for (int g = 0; g < 32; ++g) {
    for (int j = 0; j < 16; ++j) {
      t.kv_c[16 * g + j] = g == 31 ? -0.0f : static_cast<float>(std::ldexp(grid_value(g, j), exponent(g)));
    }
  }
  return t;
}

// Writes the expected packed codes at [0, 256) and scale bytes at [256, 288).
void put_nvfp4_latent(std::vector<std::uint8_t>& r, std::uint8_t (*scale_byte)(int), std::uint8_t zero_group_code) {
  for (int g = 0; g < 32; ++g) {
    for (int i = 0; i < 8; ++i) {
      const std::uint8_t lo = g == 31 ? zero_group_code : e2m1_code_of(grid_value(g, 2 * i));
      const std::uint8_t hi = g == 31 ? zero_group_code : e2m1_code_of(grid_value(g, 2 * i + 1));
      r[8 * g + i] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
    r[256 + g] = g == 31 ? 0 : scale_byte(g);
  }
}

// RoPE of E4M3 values times 2^-3, reaching 448 * 2^-3 (code 0x7E), both signs, subnormals.
std::uint8_t rope_code(int i) {
  if (i == 5) return 0x7E;
  const auto c = static_cast<std::uint8_t>((i * 37) % 0x7E);
  return i % 2 ? static_cast<std::uint8_t>(c | 0x80) : c;
}
constexpr int kRopeExponent = -3;

void fill_scaled_rope(Token& t) {
  for (int i = 0; i < 64; ++i) t.k_pe[i] = static_cast<float>(std::ldexp(e4m3_value(rope_code(i)), kRopeExponent));
}

void expect_golden(Format format, DType dtype, const Token& token, const std::vector<std::uint8_t>& want,
                   float k_scale = 1.0f) {
  const auto got = write_tokens(format, dtype, to_bits(token.kv_c, dtype), to_bits(token.k_pe, dtype), k_scale);
  EXPECT_EQ(first_difference(got, want, static_cast<int>(want.size())), "");
}

int static_exponent(int g) { return g % 8 - 4; }
std::uint8_t static_scale_byte(int g) { return e4m3_code_of(std::ldexp(1.0, static_exponent(g))); }

TEST(golden_record, bf16_record_is_the_input_bits) {
  std::vector<std::uint16_t> kv_c(512);
  std::vector<std::uint16_t> k_pe(64);
  for (int i = 0; i < 512; ++i) kv_c[i] = static_cast<std::uint16_t>((i * 2654435761u) >> 16);
  for (int i = 0; i < 64; ++i) k_pe[i] = static_cast<std::uint16_t>((i * 40503u) ^ 0x7FC1);  // NaN payloads too
  for (const Format format : {Format::kBf16, Format::kFp16}) {
    const DType dtype = format == Format::kBf16 ? DType::kBFloat16 : DType::kFloat16;
    std::vector<std::uint8_t> want(1152);
    for (int i = 0; i < 512; ++i) put_u16(want, 2 * i, kv_c[i]);
    for (int i = 0; i < 64; ++i) put_u16(want, 1024 + 2 * i, k_pe[i]);
    EXPECT_EQ(first_difference(write_tokens(format, dtype, kv_c, k_pe), want, 1152), "");
  }
}

TEST(golden_record, fp8_e4m3_divides_by_k_scale) {
  Token t;
  std::vector<std::uint8_t> want(576);
  const float k_scale = 0.5f;
  for (int i = 0; i < 576; ++i) {
    // Codes 0..0x7E of both signs (0x80 is -0, which stays -0).
    const auto code = static_cast<std::uint8_t>((i * 5) % 0x7F | (i % 3 == 0 ? 0x80 : 0));
    const float v = static_cast<float>(e4m3_value(code)) * k_scale;
    (i < 512 ? t.kv_c[i] : t.k_pe[i - 512]) = v;
    want[i] = code;
  }
  expect_golden(Format::kFp8E4m3, DType::kBFloat16, t, want, k_scale);
}

TEST(golden_record, fp8_ds_mla_has_power_of_two_tile_scales_and_raw_rope) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    Token t;
    std::vector<std::uint8_t> want(656);
    for (int tile = 0; tile < 4; ++tile) {
      const int k = tile - 2;
      for (int i = 0; i < 128; ++i) {
        // Tile 3 is all -0: ts = FLT_MIN and every code is E4M3(-0) = 0x80.
        std::uint8_t code = i == 9 ? 0x7E : static_cast<std::uint8_t>((i * 11) % 0x7E | (i % 2 ? 0x80 : 0));
        if (tile == 3) code = 0x80;
        t.kv_c[128 * tile + i] = static_cast<float>(std::ldexp(e4m3_value(code), k));
        want[128 * tile + i] = code;
      }
      put_f32(want, 512 + 4 * tile, tile == 3 ? FLT_MIN : static_cast<float>(std::ldexp(1.0, k)));
    }
    fill_scaled_rope(t);
    const auto rope = to_bits(t.k_pe, dtype);
    for (int i = 0; i < 64; ++i) put_u16(want, 528 + 2 * i, rope[i]);
    expect_golden(Format::kFp8DsMla, dtype, t, want);
  }
}

TEST(golden_record, nvfp4_ds_mla_static_latent_zero_pad_bf16_rope) {
  Token t = nvfp4_token(static_exponent);
  fill_scaled_rope(t);
  std::vector<std::uint8_t> want(432);
  put_nvfp4_latent(want, static_scale_byte, 0x0);  // s == 0: codes 0, not -0
  for (int i = 0; i < 64; ++i) put_u16(want, 304 + 2 * i, bf16_bits(t.k_pe[i]));
  expect_golden(Format::kNvfp4DsMla, DType::kBFloat16, t, want);
}

TEST(golden_record, nvfp4_ds_mla_rounds_fp16_rope_to_bf16) {
  Token t = nvfp4_token(static_exponent);
  std::vector<std::uint16_t> k_pe(64, fp16_bits(0.75f));
  k_pe[0] = 0x3C01;  // 1 + 2^-10 -> 1.0
  k_pe[1] = 0x3C04;  // 1 + 2^-8, a tie -> even 1.0
  k_pe[2] = 0x3C0C;  // 1 + 3 * 2^-8, a tie -> even 1 + 2^-6
  k_pe[3] = 0x7E00;  // NaN -> 0x7FFF
  k_pe[4] = 0xFE01;  // negative NaN -> 0x7FFF
  k_pe[5] = 0xFC00;  // -inf
  k_pe[6] = 0x0001;  // smallest subnormal, 2^-24, exact in bf16
  const std::uint16_t bf16_want[7] = {0x3F80, 0x3F80, 0x3F82, 0x7FFF, 0x7FFF, 0xFF80, 0x3380};
  std::vector<std::uint8_t> want(432);
  put_nvfp4_latent(want, static_scale_byte, 0x0);
  for (int i = 0; i < 64; ++i) put_u16(want, 304 + 2 * i, i < 7 ? bf16_want[i] : bf16_bits(0.75f));
  const auto got = write_tokens(Format::kNvfp4DsMla, DType::kFloat16, to_bits(t.kv_c, DType::kFloat16), k_pe);
  EXPECT_EQ(first_difference(got, want, 432), "");
}

TEST(golden_record, nvfp4_ds_mla_fp8_rope_keeps_stock_latent_and_scales_rope) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    Token t = nvfp4_token(static_exponent);
    fill_scaled_rope(t);
    std::vector<std::uint8_t> want(368);
    put_nvfp4_latent(want, static_scale_byte, 0x0);
    const float rope_amax = static_cast<float>(std::ldexp(448.0, kRopeExponent));
    put_f32(want, 288, rope_amax * (1.0f / 448.0f));
    for (int i = 0; i < 64; ++i) want[304 + i] = rope_code(i);
    expect_golden(Format::kNvfp4DsMlaFp8Rope, dtype, t, want);
  }
}

int pts_exponent(int g) { return g % 12 - 6; }

TEST(golden_record, nvfp4_ds_mla_fp8_rope_pts_stores_token_scale) {
  Token t = nvfp4_token(pts_exponent);
  for (int j = 0; j < 16; ++j) t.kv_c[j] = static_cast<float>(grid_value(0, j) * 448.0);  // token amax 2688
  fill_scaled_rope(t);
  std::vector<std::uint8_t> want(368);
  put_nvfp4_latent(
      want, [](int g) { return g == 0 ? std::uint8_t{0x7E} : e4m3_code_of(std::ldexp(1.0, pts_exponent(g))); }, 0x0);
  const float rope_amax = static_cast<float>(std::ldexp(448.0, kRopeExponent));
  put_f32(want, 288, rope_amax * (1.0f / 448.0f));
  put_f32(want, 292, 2688.0f * (1.0f / 2688.0f));
  for (int i = 0; i < 64; ++i) want[304 + i] = rope_code(i);
  expect_golden(Format::kNvfp4DsMlaFp8RopePts, DType::kBFloat16, t, want);
}

TEST(golden_record, nvfp4_ds_mla_fp8_rope_pts_all_zero_token_is_all_zero) {
  Token t;
  t.kv_c.assign(512, -0.0f);
  t.k_pe.assign(64, -0.0f);
  expect_golden(Format::kNvfp4DsMlaFp8RopePts, DType::kBFloat16, t, std::vector<std::uint8_t>(368, 0));
}

// --- nvfp4_fp8_ds_mla (352 B, upstream vLLM's nvfp4_ds_mla), from ABI.md ---

// Where ABI.md puts the scale byte of group g: a 4 x 8 transpose of [320, 352).
int scale_byte_of_group(int g) { return 320 + 8 * (g & 3) + (g >> 2); }

// Group g < 24 holds grid values times 2^e, e = g % 18 - 9: its amax is 6 * 2^e,
// so sf = 2^e is an E4M3 value (no bump), RN(1 / sf) is exact and each
// value's code is its grid code. Groups 24..31 test one rule each.
int reciprocal_exponent(int g) { return g % 18 - 9; }

struct Expected352 {
  Token token;
  std::vector<std::uint8_t> record = std::vector<std::uint8_t>(352, 0);
};

struct Group {
  std::vector<double> values = std::vector<double>(16);
  std::vector<std::uint8_t> codes = std::vector<std::uint8_t>(16);
};

// Grid values of group g times `scale`, with the grid values' own codes (the
// scale byte must make x * RN(1 / s) the grid value again).
Group grid_group(int g, double scale) {
  Group group;
  for (int j = 0; j < 16; ++j) {
    group.values[j] = grid_value(g, j) * scale;
    group.codes[j] = e2m1_code_of(grid_value(g, j));
  }
  return group;
}

void put_group(Expected352& e, int g, const std::vector<double>& values, const std::vector<std::uint8_t>& codes,
               std::uint8_t scale_byte) {
  for (int j = 0; j < 16; ++j) e.token.kv_c[16 * g + j] = static_cast<float>(values[j]);
  for (int i = 0; i < 8; ++i) e.record[8 * g + i] = static_cast<std::uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
  e.record[scale_byte_of_group(g)] = scale_byte;
}

Expected352 nvfp4_fp8_ds_mla_token() {
  Expected352 e;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (int g = 0; g < 24; ++g) {
    const double scale = std::ldexp(1.0, reciprocal_exponent(g));
    const Group group = grid_group(g, scale);
    put_group(e, g, group.values, group.codes, e4m3_code_of(scale));
  }
  // 24: amax / 6 = 1.25 * 2^-9 rounds to 2^-9 (0x01), below it: bumped to 2^-8 (0x02).
  // 7.5 * 2^-9 * 2^8 = 3.75 -> 4 (code 6); the others are 2^-8 times grid values.
  {
    std::vector<double> values(16);
    std::vector<std::uint8_t> codes(16);
    for (int j = 0; j < 16; ++j) {
      const double v = (j % 2 ? -1.0 : 1.0) * kE2m1Magnitudes[j % 6];
      values[j] = j == 0 ? 7.5 * 0x1p-9 : std::ldexp(v, -8);
      codes[j] = j == 0 ? 0x6 : e2m1_code_of(v);
    }
    put_group(e, 24, values, codes, 0x02);
  }
  // 25: amax / 6 = 2^-10, under the 2^-9 floor (0x01): codes of x * 2^9, half the
  // grid values, ties to even: 0.25 -> 0, 0.75 -> 1.0.
  {
    std::vector<double> values(16);
    const std::uint8_t magnitude[8] = {0x0, 0x0, 0x1, 0x2, 0x2, 0x3, 0x4, 0x5};
    std::vector<std::uint8_t> codes(16);
    for (int j = 0; j < 16; ++j) {
      values[j] = std::ldexp(grid_value(25, j), -10);
      codes[j] = static_cast<std::uint8_t>(magnitude[j % 8] | (std::signbit(values[j]) ? 0x8 : 0x0));
    }
    put_group(e, 25, values, codes, 0x01);
  }
  // 26: amax / 6 = 1.0625, an E4M3 tie that rounds down to 1.0 (0x38): bumped to 1.125 (0x39).
  // 6.375 / 1.125 = 5.67 -> 6; 1.125 * v * RN(1 / 1.125) rounds back to v.
  {
    std::vector<double> values(16);
    std::vector<std::uint8_t> codes(16);
    for (int j = 0; j < 16; ++j) {
      const double v = (j % 3 ? 1.0 : -1.0) * kE2m1Magnitudes[j % 7];  // up to 4
      values[j] = j == 0 ? 6.375 : 1.125 * v;
      codes[j] = j == 0 ? 0x7 : e2m1_code_of(v);
    }
    put_group(e, 26, values, codes, 0x39);
  }
  // 27: ties of x * RN(1 / s) with s = 15 * 2^-9 (0x0F, amax 6 s): 1.25 s and
  // 5 s would be ties going down as quotients (codes 2 and 6), but RN(1/s) is
  // above 1/s, and the products land above the ties: codes 3 and 7. 0.75 s
  // and 3.5 s land above ties that go up anyway.
  {
    const double s = 15.0 * 0x1p-9;
    const double v[16] = {6, 1.25, 5, 0.75, 3.5, -1.25, -5, 0, 1, 2, 3, 4, -0.5, -1.5, -2, -3};
    const std::uint8_t c[16] = {0x7, 0x3, 0x7, 0x2, 0x6, 0xB, 0xF, 0x0, 0x2, 0x4, 0x5, 0x6, 0x9, 0xB, 0xC, 0xD};
    std::vector<double> values(16);
    for (int j = 0; j < 16; ++j) values[j] = v[j] * s;
    put_group(e, 27, values, std::vector<std::uint8_t>(c, c + 16), 0x0F);
  }
  // 28: amax / 6 = 480, above 448: saturates to 0x7E and is not bumped; x / 448
  // saturates at 6.
  {
    const double v[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6, 0};
    std::vector<double> values(16);
    std::vector<std::uint8_t> codes(16);
    for (int j = 0; j < 16; ++j) {
      values[j] = v[j] * 448.0;
      codes[j] = e2m1_code_of(v[j]);
    }
    values[15] = 2880.0;  // 6 * 480
    codes[15] = 0x7;
    put_group(e, 28, values, codes, 0x7E);
  }
  // 29: +-inf: amax inf, scale byte 0x7E; +-inf saturate to +-6.
  {
    Group group = grid_group(29, 448.0);
    group.values[3] = inf;
    group.codes[3] = 0x7;
    group.values[4] = -inf;
    group.codes[4] = 0xF;
    put_group(e, 29, group.values, group.codes, 0x7E);
  }
  // 30: NaN (both signs) never raises the amax (6 * 2^-2, scale byte 2^-2) and encodes 0x7.
  {
    Group group = grid_group(30, 0.25);
    group.values[2] = nan;
    group.codes[2] = 0x7;
    group.values[9] = -nan;
    group.codes[9] = 0x7;
    put_group(e, 30, group.values, group.codes, 0x28);
  }
  // 31: all -0: amax 0 takes the floor, 2^-9 (0x01); -0 * 2^9 is -0, code 0x8.
  put_group(e, 31, std::vector<double>(16, -0.0), std::vector<std::uint8_t>(16, 0x8), 0x01);

  // RoPE: unscaled E4M3, round to nearest even, saturating to +-448, NaN 0x7F.
  for (int i = 0; i < 64; ++i) {
    e.token.k_pe[i] = static_cast<float>(e4m3_value(rope_code(i)));
    e.record[256 + i] = rope_code(i);
  }
  const std::pair<double, std::uint8_t> rope_cases[] = {{480.0, 0x7E}, {-480.0, 0xFE}, {inf, 0x7E},   {-inf, 0xFE},
                                                        {nan, 0x7F},   {1.0625, 0x38}, {1.1875, 0x3A}};
  for (int k = 0; k < 7; ++k) {
    e.token.k_pe[40 + k] = static_cast<float>(rope_cases[k].first);
    e.record[256 + 40 + k] = rope_cases[k].second;
  }
  return e;
}

TEST(golden_record, nvfp4_fp8_ds_mla_is_upstream_vllms_record) {
  const Expected352 e = nvfp4_fp8_ds_mla_token();
  expect_golden(Format::kNvfp4Fp8DsMla, DType::kBFloat16, e.token, e.record);
}

TEST(golden_record, nvfp4_fp8_ds_mla_stores_group_scales_transposed) {
  // Group g's only nonzero value is 6 * E4M3(0x20 + g): its scale byte is 0x20 + g.
  Token t;
  for (int g = 0; g < 32; ++g) t.kv_c[16 * g + (g % 16)] = static_cast<float>(6.0 * e4m3_value(0x20 + g));
  const auto got = write_tokens(Format::kNvfp4Fp8DsMla, DType::kBFloat16, to_bits(t.kv_c, DType::kBFloat16),
                                to_bits(t.k_pe, DType::kBFloat16));
  for (int g = 0; g < 32; ++g) {
    EXPECT_EQ(got[scale_byte_of_group(g)], 0x20 + g) << "group " << g;
    EXPECT_EQ(got[8 * g + (g % 16) / 2], (g % 2) ? 0x70 : 0x07) << "group " << g;
  }
}

TEST(golden_record, nvfp4_fp8_ds_mla_ones_and_halves_read_back_as_upstream_decodes_them) {
  // kv_c = 1: sf = 1/6 rounds to 0.171875 (0x23, above sf); 1 * RN(1 / 0.171875) = 5.8 -> 6.
  Token t;
  t.kv_c.assign(512, 1.0f);
  t.k_pe.assign(64, 0.5f);
  std::vector<std::uint8_t> want(352, 0x77);
  for (int i = 256; i < 320; ++i) want[i] = 0x30;
  for (int i = 320; i < 352; ++i) want[i] = 0x23;
  expect_golden(Format::kNvfp4Fp8DsMla, DType::kBFloat16, t, want);

  std::vector<float> kv(512), pe(64);
  std::vector<std::int64_t> slot = {0};
  mlakv::gather_records(Format::kNvfp4Fp8DsMla, mlakv::make_view(want.data(), DType::kUInt8, {1, 1, 352}),
                        mlakv::make_view(slot.data(), DType::kInt64, {1}),
                        mlakv::make_view(kv.data(), DType::kFloat32, {1, 512}),
                        mlakv::make_view(pe.data(), DType::kFloat32, {1, 64}));
  for (float v : kv) EXPECT_EQ(v, 6.0f * 0.171875f);
  for (float v : pe) EXPECT_EQ(v, 0.5f);
}

}  // namespace
