// SPDX-License-Identifier: Apache-2.0
// DeepSeek V4.1's rows, in FlashMLA's token-major records, "fp8_ds_mla_v41"
// (528 B: 512 E4M3 | 16 UE8M0) and "nvfp4_ds_mla_v41" (288 B: 256 packed E2M1
// | 32 E4M3), and in vLLM's / SGLang's block-planar pages,
// "fp8_ds_mla_v41_planar" and "nvfp4_ds_mla_v41_planar" (a page's code rows,
// then its scale rows, then padding to 512 B): records and pages built by hand
// from the engines' facts, guard bytes around padded pages, random slots
// across pages, the readers, the peers' round-trip properties, NaN tiles, and
// the arguments the formats refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/fp8_ds_mla_v41.h"
#include "codec/nvfp4_ds_mla_v41.h"
#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;
using Mxfp8 = mlakv::codec::CodecFp8DsMlaV41;
using Fp4 = mlakv::codec::CodecNvfp4DsMlaV41;
using Mxfp8Planar = mlakv::codec::CodecFp8DsMlaV41Planar;
using Fp4Planar = mlakv::codec::CodecNvfp4DsMlaV41Planar;
using mlakv::codec::InputDtype;

constexpr int kNope = 448;
constexpr int kRope = 64;

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const mlakv::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

float value_of(std::uint16_t bits, DType dtype) {
  return dtype == DType::kBFloat16 ? mlakv::codec::load_input<InputDtype::kBf16>(bits)
                                   : mlakv::codec::load_input<InputDtype::kFp16>(bits);
}

template <class Codec>
void encode(DType dtype, const std::uint16_t* nope, const std::uint16_t* rope, std::uint8_t* record) {
  if (dtype == DType::kBFloat16) {
    Codec::template encode_token<InputDtype::kBf16>(nope, rope, record, record + Codec::kScaleRow.offset);
  } else {
    Codec::template encode_token<InputDtype::kFp16>(nope, rope, record, record + Codec::kScaleRow.offset);
  }
}

// A token built by hand: inputs (bf16) and the record FlashMLA's rules give them.
struct HandToken {
  std::vector<std::uint16_t> nope = std::vector<std::uint16_t>(kNope, 0);
  std::vector<std::uint16_t> rope = std::vector<std::uint16_t>(kRope, 0);
  std::vector<std::uint8_t> record;
  void set(int v, float x) { (v < kNope ? nope[v] : rope[v - kNope]) = bf16_bits(x); }
};

// fp8_ds_mla_v41: value v of NoPE ++ RoPE -> codes[v]; tile t's scale -> byte 512 + t.
HandToken mxfp8_token(float sign) {
  HandToken h;
  h.record.assign(528, 0);
  const auto put = [&](int v, float x, float quotient) {
    h.set(v, sign * x);
    h.record[v] = e4m3_code_of(sign * quotient);
  };
  for (int t = 0; t < 16; ++t) h.record[512 + t] = 105;  // zero tiles: 2^e >= 1e-4 / 448 -> e = -22
  put(0, 448.0f, 448.0f);                                // tile 0: amax 448 -> 2^0, byte 127
  put(1, -1.5f, -1.5f);
  h.record[512] = 127;
  put(32, 3.0f, 384.0f);  // tile 1: 3 / 448 in (2^-8, 2^-7] -> byte 120
  put(33, 1.0f, 128.0f);
  h.record[513] = 120;
  put(96, 56.0f, 448.0f);  // tile 3: 56 / 448 = 2^-3 exactly -> byte 124
  h.record[515] = 124;
  put(128, 57.0f, 224.0f);  // tile 4: just over 2^-3 -> byte 125; 57 / 2^-2 = 228 rounds to 224
  h.record[516] = 125;
  put(160, 2.0f, 256.0f);  // tile 5: a NaN never raises the amax -> byte 120; the NaN's code is 0x7F
  h.nope[161] = 0x7FC0;
  h.record[161] = 0x7F;
  h.record[517] = 120;
  put(kNope + 0, 0.75f, 384.0f);  // tile 14, the first RoPE tile: 0.75 / 448 in (2^-10, 2^-9] -> byte 118
  put(kNope + 1, -0.25f, -128.0f);
  h.record[512 + 14] = 118;
  return h;
}

// nvfp4_ds_mla_v41: value v -> nibble v % 2 of byte v / 2 (even value low);
// tile t's E4M3 scale -> byte 256 + t.
HandToken fp4_token() {
  HandToken h;
  h.record.assign(288, 0);
  for (int t = 0; t < 32; ++t) h.record[256 + t] = 0x01;  // zero tiles: clamp to 2^-9, E4M3 0x01
  // Tile 0: amax 6 -> scale 1 (0x38); 6, -3, 1, 0.5 -> 0x7, 0xD, 0x2, 0x1.
  h.set(0, 6.0f), h.set(1, -3.0f), h.set(2, 1.0f), h.set(3, 0.5f);
  h.record[0] = 0xD7, h.record[1] = 0x12, h.record[256] = 0x38;
  // Tile 2: amax 2^-12 -> clamped to 2^-9; 2^-12 / 2^-9 = 1/8 rounds to 0.
  h.set(32, std::ldexp(1.0f, -12));
  // Tile 3: amax 4000 -> 666.7, clamped to 448 (0x7E); 4000 / 448 saturates to 6.
  h.set(48, 4000.0f);
  h.record[24] = 0x07, h.record[259] = 0x7E;
  // Tile 4: a NaN makes the scale NaN (0x7F) and the codes zero.
  h.nope[64] = 0x7FC0;
  h.set(65, 1.0f);
  h.record[260] = 0x7F;
  // Tile 5: amax 7 -> 7 / 6 = 1.1667 rounds to 1.125 (0x39), no step-up: 7 / 1.125 saturates to 6; -0 -> 0x8.
  h.set(80, 7.0f);
  h.nope[81] = 0x8000;
  h.record[40] = 0x87, h.record[261] = 0x39;
  // Tile 6: ties go to even: 2.5 -> 2 (0x4), 0.25 -> 0, 0.75 -> 1 (0x2).
  h.set(96, 6.0f), h.set(97, 2.5f), h.set(98, 0.25f), h.set(99, 0.75f);
  h.record[48] = 0x47, h.record[49] = 0x20, h.record[262] = 0x38;
  // Tile 7: an inf counts as FLT_MAX (FlashMLA's nan_to_num), so the scale clamps to 448 (0x7E);
  // inf / 448 saturates to 6 (0x7), 1000 / 448 = 2.23 rounds to 2 (0x4).
  h.nope[112] = 0x7F80;
  h.set(113, 1000.0f);
  h.record[56] = 0x47, h.record[263] = 0x7E;
  // Tile 28, the first RoPE tile: amax 12 -> scale 2 (0x40); 12 -> 6 (0x7), -1 -> -0.5 (0x9).
  h.set(kNope + 0, 12.0f), h.set(kNope + 1, -1.0f);
  h.record[224] = 0x97, h.record[256 + 28] = 0x40;
  return h;
}

template <class Codec>
void expect_golden_records(Format format, const HandToken& a, const HandToken& b) {
  const int record = Codec::Spec::kRecordBytes;
  // Padded strides: 16 B between records, 32 B after each page of 4.
  const std::int64_t slot_stride = record + 16, block_stride = 4 * slot_stride + 32;
  GuardedCache cache(2, 4, slot_stride, block_stride);
  std::vector<std::uint16_t> nope(a.nope), rope(a.rope);
  nope.insert(nope.end(), b.nope.begin(), b.nope.end());
  rope.insert(rope.end(), b.rope.begin(), b.rope.end());
  std::vector<std::int64_t> slots = {1, 6};  // page 0 token 1, page 1 token 2
  mlakv::write_records(format, mlakv::make_view(nope.data(), DType::kBFloat16, {2, kNope}),
                       mlakv::make_view(rope.data(), DType::kBFloat16, {2, kRope}), cache.view(record),
                       mlakv::make_view(slots.data(), DType::kInt64, {2}));
  const std::size_t at[2] = {cache.record_offset(1), cache.record_offset(6)};
  const HandToken* want[2] = {&a, &b};
  for (int k = 0; k < 2; ++k) {
    const std::vector<std::uint8_t> got(cache.storage().begin() + at[k], cache.storage().begin() + at[k] + record);
    ASSERT_EQ(got, want[k]->record) << first_difference(got, want[k]->record, record);
  }
  for (const std::size_t i : cache.changed_bytes()) {
    ASSERT_TRUE((i >= at[0] && i < at[0] + record) || (i >= at[1] && i < at[1] + record))
        << "byte " << i << " outside the two records changed";
  }
}

TEST(v41_writer, mxfp8_golden_records_hold_every_code_and_scale_and_nothing_else) {
  expect_golden_records<Mxfp8>(Format::kFp8DsMlaV41, mxfp8_token(1.0f), mxfp8_token(-1.0f));
}

TEST(v41_writer, fp4_golden_records_hold_every_code_and_scale_and_nothing_else) {
  expect_golden_records<Fp4>(Format::kNvfp4DsMlaV41, fp4_token(), fp4_token());
}

template <class Codec>
void expect_random_slots_write_only_their_records(Format format) {
  const int record = Codec::Spec::kRecordBytes;
  constexpr std::int64_t kBlocks = 4, kBlockSize = 64;
  const std::int64_t block_stride = kBlockSize * record + 48;
  GuardedCache cache(kBlocks, kBlockSize, record, block_stride);
  std::vector<std::int64_t> slots(kBlocks * kBlockSize);
  for (std::int64_t s = 0; s < kBlocks * kBlockSize; ++s) slots[s] = s;
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(3));
  slots.resize(40);
  slots.push_back(-1);
  slots.push_back(kBlocks * kBlockSize);  // past capacity: skipped
  const auto tokens = static_cast<std::int64_t>(slots.size());
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(dtype));
    const std::vector<std::uint16_t> nope = random_inputs(tokens * kNope, dtype, 5, /*specials=*/true);
    const std::vector<std::uint16_t> rope = random_inputs(tokens * kRope, dtype, 6, /*specials=*/true);
    mlakv::write_records(format, mlakv::make_view(const_cast<std::uint16_t*>(nope.data()), dtype, {tokens, kNope}),
                         mlakv::make_view(const_cast<std::uint16_t*>(rope.data()), dtype, {tokens, kRope}),
                         cache.view(record), mlakv::make_view(slots.data(), DType::kInt64, {tokens}));
    std::vector<bool> written(cache.storage().size(), false);
    std::vector<std::uint8_t> want(record);
    for (std::int64_t t = 0; t + 2 < tokens; ++t) {
      const std::size_t at = cache.record_offset(slots[t]);
      encode<Codec>(dtype, &nope[t * kNope], &rope[t * kRope], want.data());
      ASSERT_EQ(std::memcmp(&cache.storage()[at], want.data(), want.size()), 0) << "slot " << slots[t];
      for (int i = 0; i < record; ++i) written[at + i] = true;
    }
    for (const std::size_t i : cache.changed_bytes()) ASSERT_TRUE(written[i]) << "byte " << i << " changed";

    // Both readers return the codec's decode of each written slot.
    std::vector<float> kv(tokens * kNope, 7.0f), pe(tokens * kRope, 7.0f);
    mlakv::gather_records(format, cache.view(record), mlakv::make_view(slots.data(), DType::kInt64, {tokens}),
                          mlakv::make_view(kv.data(), DType::kFloat32, {tokens, kNope}),
                          mlakv::make_view(pe.data(), DType::kFloat32, {tokens, kRope}));
    for (std::int64_t t = 0; t < tokens; ++t) {
      float dn[kNope] = {}, dr[kRope] = {};
      if (t + 2 < tokens) {
        const std::uint8_t* rec = &cache.storage()[cache.record_offset(slots[t])];
        Codec::decode_token(rec, rec + Codec::kScaleRow.offset, dn, dr);
      }
      for (int i = 0; i < kNope; ++i) {
        ASSERT_EQ(f32_bits(kv[t * kNope + i]), f32_bits(mlakv::codec::canonical_nan(dn[i]))) << t << " " << i;
      }
      for (int i = 0; i < kRope; ++i) {
        ASSERT_EQ(f32_bits(pe[t * kRope + i]), f32_bits(mlakv::codec::canonical_nan(dr[i]))) << t << " " << i;
      }
    }
  }
}

TEST(v41_writer, mxfp8_random_slots_across_pages_write_only_their_records_and_read_back) {
  expect_random_slots_write_only_their_records<Mxfp8>(Format::kFp8DsMlaV41);
}

TEST(v41_writer, fp4_random_slots_across_pages_write_only_their_records_and_read_back) {
  expect_random_slots_write_only_their_records<Fp4>(Format::kNvfp4DsMlaV41);
}

TEST(v41_reader, decodes_hand_built_records_with_both_readers) {
  // Page 1, token 3 of a [2, 4, 528] cache holds the hand-built MXFP8 token.
  const HandToken m = mxfp8_token(1.0f);
  std::vector<std::uint8_t> cache(2 * 4 * 528, 0);
  std::memcpy(&cache[(4 + 3) * 528], m.record.data(), 528);
  std::vector<std::int64_t> slots = {7, -1};
  std::vector<float> nope(2 * kNope, 1.0f), rope(2 * kRope, 1.0f);
  mlakv::gather_records(Format::kFp8DsMlaV41, mlakv::make_view(cache.data(), DType::kUInt8, {2, 4, 528}),
                        mlakv::make_view(slots.data(), DType::kInt64, {2}),
                        mlakv::make_view(nope.data(), DType::kFloat32, {2, kNope}),
                        mlakv::make_view(rope.data(), DType::kFloat32, {2, kRope}));
  EXPECT_EQ(nope[0], 448.0f);
  EXPECT_EQ(nope[1], -1.5f);
  EXPECT_EQ(nope[32], 3.0f);
  EXPECT_EQ(nope[96], 56.0f);
  EXPECT_EQ(nope[128], 56.0f);  // 57 stored as 224 x 2^-2
  EXPECT_TRUE(std::isnan(nope[161]));
  EXPECT_EQ(rope[0], 0.75f);
  EXPECT_EQ(rope[1], -0.25f);
  for (int i = kNope; i < 2 * kNope; ++i) ASSERT_EQ(nope[i], 0.0f) << i;  // slot -1 reads as zeros

  // The FP4 token through the paged reader: sequence 0 is block 1, its row 2 is slot 6.
  const HandToken f = fp4_token();
  std::vector<std::uint8_t> fp4(2 * 4 * 288, 0);
  std::memcpy(&fp4[(4 + 2) * 288], f.record.data(), 288);
  std::int32_t block_table[1] = {1}, seq_lens[1] = {3}, cu_seq_lens[2] = {0, 3};
  std::vector<float> kv(3 * kNope), pe(3 * kRope);
  mlakv::gather_records_paged(
      Format::kNvfp4DsMlaV41, mlakv::make_view(fp4.data(), DType::kUInt8, {2, 4, 288}),
      mlakv::make_view(block_table, DType::kInt32, {1, 1}), mlakv::make_view(seq_lens, DType::kInt32, {1}),
      mlakv::make_view(cu_seq_lens, DType::kInt32, {2}), mlakv::make_view(kv.data(), DType::kFloat32, {3, kNope}),
      mlakv::make_view(pe.data(), DType::kFloat32, {3, kRope}));
  const float* row = &kv[2 * kNope];
  EXPECT_EQ(row[0], 6.0f);
  EXPECT_EQ(row[1], -3.0f);
  EXPECT_EQ(row[2], 1.0f);
  EXPECT_EQ(row[3], 0.5f);
  EXPECT_EQ(row[32], 0.0f);
  EXPECT_EQ(row[48], 6.0f * 448.0f);
  for (int i = 64; i < 80; ++i) ASSERT_TRUE(std::isnan(row[i])) << i;  // the NaN tile reads as NaN
  EXPECT_EQ(row[80], 6.75f);
  EXPECT_TRUE(row[81] == 0.0f && std::signbit(row[81]));
  EXPECT_EQ(row[112], 6.0f * 448.0f);  // the inf tile reads finite: 6 x 448, 2 x 448
  EXPECT_EQ(row[113], 2.0f * 448.0f);
  EXPECT_EQ(row[97], 2.0f);
  EXPECT_EQ(row[99], 1.0f);
  EXPECT_EQ(pe[2 * kRope + 0], 12.0f);
  EXPECT_EQ(pe[2 * kRope + 1], -1.0f);
  EXPECT_EQ(row[200], 0.0f);  // a zero tile
}

// The peers' properties of the MXFP8 record: each tile's UE8M0 scale 2^e is
// the smallest power of two >= max(amax, 1e-4) / 448 (so >= amax / 448), and
// every value, RoPE included, reads back within half an E4M3 step.
TEST(v41_round_trip, mxfp8_scale_is_the_smallest_power_of_two_at_or_above_amax_over_448) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(dtype));
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      std::vector<std::uint16_t> nope = random_inputs(kNope, dtype, seed, /*specials=*/false);
      std::vector<std::uint16_t> rope = random_inputs(kRope, dtype, seed + 1000, false);
      std::uint8_t rec[528];
      float out[512];
      encode<Mxfp8>(dtype, nope.data(), rope.data(), rec);
      Mxfp8::decode_token(rec, rec + 512, out, out + kNope);
      for (int tile = 0; tile < 16; ++tile) {
        float amax = 0.0f;
        float x[32];
        for (int i = 0; i < 32; ++i) {
          const int v = tile * 32 + i;
          x[i] = value_of(v < kNope ? nope[v] : rope[v - kNope], dtype);
          amax = std::max(amax, std::fabs(x[i]));
        }
        const double s = std::ldexp(1.0, rec[512 + tile] - 127);
        const double bound = static_cast<double>(std::max(amax, 1e-4f) / 448.0f);
        ASSERT_GE(s, static_cast<double>(amax) / 448.0) << "tile " << tile;
        ASSERT_GE(s, bound) << "tile " << tile;
        ASSERT_LT(s / 2, bound) << "tile " << tile;
        for (int i = 0; i < 32; ++i) {
          const double err = std::fabs(static_cast<double>(out[tile * 32 + i]) - x[i]);
          ASSERT_LE(err, std::fabs(x[i]) / 16 + s * std::ldexp(1.0, -10)) << "tile " << tile << " value " << i;
        }
      }
    }
  }
}

// The E4M3 code nearest v >= 0, ties to the even code (an independent round-to-nearest).
std::uint8_t nearest_e4m3(double v) {
  unsigned best = 0;
  for (unsigned c = 1; c < 0x7F; ++c) {
    const double d = std::fabs(e4m3_value(c) - v), db = std::fabs(e4m3_value(best) - v);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return static_cast<std::uint8_t>(best);
}

// The peers' properties of the FP4 record: a tile's scale is E4M3
// round-to-nearest of clamp(amax / 6, 2^-9, 448), never stepped up; a value
// within 6 scales reads back within half an E2M1 step, one beyond reads 6 scales.
TEST(v41_round_trip, fp4_scale_is_the_nearest_e4m3_of_the_clamped_amax_over_6) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(dtype));
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      std::vector<std::uint16_t> nope = random_inputs(kNope, dtype, seed, /*specials=*/false);
      std::vector<std::uint16_t> rope = random_inputs(kRope, dtype, seed + 1000, false);
      std::uint8_t rec[288];
      float out[512];
      encode<Fp4>(dtype, nope.data(), rope.data(), rec);
      Fp4::decode_token(rec, rec + 256, out, out + kNope);
      for (int tile = 0; tile < 32; ++tile) {
        float amax = 0.0f;
        float x[16];
        for (int i = 0; i < 16; ++i) {
          const int v = tile * 16 + i;
          x[i] = value_of(v < kNope ? nope[v] : rope[v - kNope], dtype);
          amax = std::max(amax, std::fabs(x[i]));
        }
        const double clamped = std::clamp(static_cast<double>(amax / 6.0f), std::ldexp(1.0, -9), 448.0);
        ASSERT_EQ(rec[256 + tile], nearest_e4m3(clamped)) << "tile " << tile << " amax " << amax;
        const double s = e4m3_value(rec[256 + tile]);
        for (int i = 0; i < 16; ++i) {
          const double q = std::fabs(x[i]) / s, y = out[tile * 16 + i];
          if (q > 6.0) {
            ASSERT_EQ(std::fabs(y), 6.0 * s) << "tile " << tile << " value " << i;
          } else {
            const double half_step = q < 2.0 ? 0.25 : (q < 4.0 ? 0.5 : 1.0);
            ASSERT_LE(std::fabs(y - x[i]), half_step * s) << "tile " << tile << " value " << i;
          }
        }
      }
    }
  }
}

// FlashMLA's reference (tests/quant.py, V41_FP4Sparse) folds nan_to_num(|x|, nan=inf) into the
// amax: a NaN, quiet or signalling, of either sign, makes the tile's scale the E4M3 NaN.
TEST(v41_round_trip, a_nan_makes_its_fp4_tile_nan_and_only_that_tile) {
  for (const std::uint16_t special : {std::uint16_t{0x7FC0}, std::uint16_t{0xFFC0}, std::uint16_t{0x7F81}}) {
    std::vector<std::uint16_t> nope(kNope, bf16_bits(1.0f)), rope(kRope, bf16_bits(1.0f));
    nope[35] = special;
    std::uint8_t rec[288];
    float out[512];
    encode<Fp4>(DType::kBFloat16, nope.data(), rope.data(), rec);
    Fp4::decode_token(rec, rec + 256, out, out + kNope);
    EXPECT_EQ(rec[256 + 2], 0x7F);
    for (int b = 16; b < 24; ++b) EXPECT_EQ(rec[b], 0) << b;
    for (int i = 32; i < 48; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
    // The other tiles of ones: scale RN(1 / 6) = 0.171875, 1 / 0.171875 = 5.8 -> 6, read as 1.03125.
    EXPECT_EQ(out[31], 1.03125f);
    EXPECT_EQ(out[48], 1.03125f);
  }
  EXPECT_EQ(Fp4::scale_byte(INFINITY), 0x7F);  // the amax a NaN leaves
  EXPECT_EQ(Fp4::scale_byte(0.0f), 0x01);
  EXPECT_EQ(Fp4::scale_byte(6.0f * 448.0f * 4.0f), 0x7E);
}

// An inf counts as FLT_MAX (nan_to_num's posinf default in FlashMLA's reference; vLLM's
// writer clamps amax / 6 = inf to 448): the tile's scale is 448 (0x7E), the inf is coded
// +-6 (0x7 / 0xF) and reads back as +-2688, the tile's finite values are coded x / 448.
TEST(v41_round_trip, an_inf_tile_has_scale_448_and_codes_the_inf_as_6) {
  struct Case {
    DType dtype;
    std::uint16_t inf, one;
    std::uint8_t code;  // the inf's nibble
  };
  for (const Case c : {Case{DType::kBFloat16, 0x7F80, 0x3F80, 0x7}, Case{DType::kBFloat16, 0xFF80, 0x3F80, 0xF},
                       Case{DType::kFloat16, 0x7C00, 0x3C00, 0x7}, Case{DType::kFloat16, 0xFC00, 0x3C00, 0xF}}) {
    SCOPED_TRACE(mlakv::dtype_name(c.dtype));
    std::vector<std::uint16_t> nope(kNope, c.one), rope(kRope, c.one);
    nope[35] = c.inf;  // tile 2, odd value: the high nibble of byte 17
    std::uint8_t rec[288];
    float out[512];
    encode<Fp4>(c.dtype, nope.data(), rope.data(), rec);
    Fp4::decode_token(rec, rec + 256, out, out + kNope);
    EXPECT_EQ(rec[256 + 2], 0x7E);
    for (int b = 16; b < 24; ++b) EXPECT_EQ(rec[b], b == 17 ? c.code << 4 : 0) << b;  // 1 / 448 rounds to 0
    EXPECT_EQ(out[35], c.code == 0x7 ? 2688.0f : -2688.0f);
    EXPECT_EQ(out[34], 0.0f);
    EXPECT_EQ(rec[256 + 1], e4m3_code_of(0.171875));  // the tiles beside it keep RN(1 / 6)
    EXPECT_EQ(out[48], 1.03125f);
  }
  EXPECT_EQ(Fp4::scale_byte(FLT_MAX), 0x7E);
}

TEST(v41_round_trip, a_nan_beside_an_inf_still_makes_the_fp4_tile_nan) {
  for (const int nan_at : {34, 36}) {  // the NaN before and after the inf
    std::vector<std::uint16_t> nope(kNope, bf16_bits(1.0f)), rope(kRope, bf16_bits(1.0f));
    nope[35] = 0x7F80;
    nope[nan_at] = 0x7FC0;
    std::uint8_t rec[288];
    encode<Fp4>(DType::kBFloat16, nope.data(), rope.data(), rec);
    EXPECT_EQ(rec[256 + 2], 0x7F) << nan_at;
    for (int b = 16; b < 24; ++b) EXPECT_EQ(rec[b], 0) << b;
  }
}

TEST(v41_round_trip, mxfp8_nan_never_raises_a_tile_amax_and_inf_stores_byte_ff) {
  std::vector<std::uint16_t> nope(kNope, bf16_bits(1.0f)), rope(kRope, bf16_bits(1.0f));
  nope[0] = 0x7FC0;
  nope[40] = 0x7F80;
  std::uint8_t rec[528];
  float out[512];
  encode<Mxfp8>(DType::kBFloat16, nope.data(), rope.data(), rec);
  Mxfp8::decode_token(rec, rec + 512, out, out + kNope);
  EXPECT_EQ(rec[512], 119);  // amax 1 (the NaN ignored): 1 / 448 in (2^-9, 2^-8] -> e = -8
  EXPECT_EQ(rec[0], 0x7F);
  EXPECT_EQ(rec[513], 0xFF);
  for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
  EXPECT_EQ(out[1], 1.0f);
}

TEST(v41_validation, kv_c_and_the_decode_query_must_be_448_and_512_wide) {
  std::vector<std::uint16_t> nope(2 * 512), rope(2 * kRope);
  std::vector<std::uint8_t> cache(64 * 528);
  std::int64_t slots[2] = {0, 1};
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kNvfp4DsMlaV41, mlakv::make_view(nope.data(), DType::kBFloat16, {2, 512}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {2, kRope}),
                                   mlakv::make_view(cache.data(), DType::kUInt8, {1, 64, 288}),
                                   mlakv::make_view(slots, DType::kInt64, {2}));
            }),
            "mlakv::write_records(nvfp4_ds_mla_v41): kv_c: shape must be (T, 448), got (2, 512)");
  std::vector<std::uint16_t> q(576), out(512);
  std::int32_t index = 0;
  float lse = 0.0f;
  EXPECT_EQ(error_of([&] {
              mlakv::sparse_mla_decode(Format::kFp8DsMlaV41, mlakv::make_view(q.data(), DType::kBFloat16, {1, 1, 576}),
                                       mlakv::make_view(cache.data(), DType::kUInt8, {1, 64, 528}),
                                       mlakv::make_view(&index, DType::kInt32, {1, 1}),
                                       mlakv::make_view(out.data(), DType::kBFloat16, {1, 1, 512}),
                                       mlakv::make_view(&lse, DType::kFloat32, {1, 1}));
            }),
            "mlakv::sparse_mla_decode(fp8_ds_mla_v41): q: shape must be (R, H, 512) (DeepSeek V4: 448 NoPE + 64 "
            "RoPE), got (1, 1, 576)");
}

// --- the block-planar pages (vLLM b3ae0bb cache_utils.py: a token's code row
// at page byte pos * code_row, its scale row at block_size * code_row + pos *
// scale_row; pages padded to a multiple of 512, vLLM's kv_page_alignment) ---

// Where token `t`'s rows of a block-planar page start, from the page's first byte.
struct PlanarRows {
  int code_row, scale_row;
  std::int64_t data(std::int64_t block_size, std::int64_t t) const { return t * code_row; }
  std::int64_t scale(std::int64_t block_size, std::int64_t t) const { return block_size * code_row + t * scale_row; }
};
constexpr PlanarRows kMxfp8Rows{512, 16};
constexpr PlanarRows kFp4Rows{256, 32};

TEST(v41_planar_layout, pages_are_code_rows_then_scale_rows_padded_to_512) {
  const mlakv::FormatInfo& m = mlakv::format_info(Format::kFp8DsMlaV41Planar);
  const mlakv::FormatInfo& f = mlakv::format_info(Format::kNvfp4DsMlaV41Planar);
  EXPECT_EQ(m.id, "fp8_ds_mla_v41_planar");
  EXPECT_EQ(f.id, "nvfp4_ds_mla_v41_planar");
  EXPECT_EQ(m.record_bytes, 528);
  EXPECT_EQ(f.record_bytes, 288);
  EXPECT_EQ(m.page.kind, mlakv::PageKind::kBlockPlanar);
  EXPECT_EQ(f.page.kind, mlakv::PageKind::kBlockPlanar);
  EXPECT_EQ(m.page.data_row_bytes, 512);
  EXPECT_EQ(m.page.scale_row_bytes, 16);
  EXPECT_EQ(f.page.data_row_bytes, 256);
  EXPECT_EQ(f.page.scale_row_bytes, 32);
  EXPECT_EQ(mlakv::page_bytes(m, 64), 64 * 528);  // 66 x 512: no padding at vLLM's block sizes
  EXPECT_EQ(mlakv::page_bytes(f, 64), 64 * 288);  // 36 x 512
  EXPECT_EQ(mlakv::page_bytes(m, 5), 3072);       // 2640 rounded up to 6 x 512
  EXPECT_EQ(mlakv::page_bytes(f, 5), 1536);       // 1440 rounded up to 3 x 512
  EXPECT_EQ(mlakv::page_bytes(f, 8), 2560);       // 2304: vLLM pads to 5 x 512 (SGLang to 9 x 256)
  // The one address rule: token 3 of a page of 5.
  EXPECT_EQ(mlakv::field_offset(m, m.fields[0], 5, 3), 3 * 512);
  EXPECT_EQ(mlakv::field_offset(m, m.fields[1], 5, 3), 5 * 512 + 3 * 16);
  EXPECT_EQ(mlakv::field_offset(f, f.fields[0], 5, 3), 3 * 256);
  EXPECT_EQ(mlakv::field_offset(f, f.fields[1], 5, 3), 5 * 256 + 3 * 32);
}

template <class Codec>
void expect_golden_pages(Format format, const PlanarRows& rows, const HandToken& a, const HandToken& b) {
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  constexpr std::int64_t kBlockSize = 5;
  const std::int64_t page = mlakv::page_bytes(info, kBlockSize);
  GuardedCache cache(2, kBlockSize, info.record_bytes, page);
  std::vector<std::uint16_t> nope(a.nope), rope(a.rope);
  nope.insert(nope.end(), b.nope.begin(), b.nope.end());
  rope.insert(rope.end(), b.rope.begin(), b.rope.end());
  std::vector<std::int64_t> slots = {1, 7};  // page 0 token 1, page 1 token 2
  mlakv::write_records(format, mlakv::make_view(nope.data(), DType::kBFloat16, {2, kNope}),
                       mlakv::make_view(rope.data(), DType::kBFloat16, {2, kRope}), cache.view(info.record_bytes),
                       mlakv::make_view(slots.data(), DType::kInt64, {2}));
  // The hand-built record is the code row then the scale row: here they lie in two regions.
  const std::size_t base = cache.record_offset(0);
  const struct {
    const HandToken& token;
    std::size_t data, scale;
  } expected[] = {{a, base + rows.data(kBlockSize, 1), base + rows.scale(kBlockSize, 1)},
                  {b, base + page + rows.data(kBlockSize, 2), base + page + rows.scale(kBlockSize, 2)}};
  const std::vector<std::uint8_t>& bytes = cache.storage();
  for (const auto& e : expected) {
    for (int i = 0; i < rows.code_row; ++i) ASSERT_EQ(bytes[e.data + i], e.token.record[i]) << "code row byte " << i;
    for (int i = 0; i < rows.scale_row; ++i) {
      ASSERT_EQ(bytes[e.scale + i], e.token.record[rows.code_row + i]) << "scale row byte " << i;
    }
  }
  // Nothing else changed: not the other tokens' rows, not the page padding, not the guards.
  for (const std::size_t i : cache.changed_bytes()) {
    bool inside = false;
    for (const auto& e : expected) {
      inside |= (i >= e.data && i < e.data + rows.code_row) || (i >= e.scale && i < e.scale + rows.scale_row);
    }
    ASSERT_TRUE(inside) << "byte " << i << " outside the two tokens' rows changed";
  }
}

TEST(v41_planar_writer, mxfp8_golden_pages_hold_every_code_row_and_scale_row_and_nothing_else) {
  expect_golden_pages<Mxfp8Planar>(Format::kFp8DsMlaV41Planar, kMxfp8Rows, mxfp8_token(1.0f), mxfp8_token(-1.0f));
}

TEST(v41_planar_writer, fp4_golden_pages_hold_every_code_row_and_scale_row_and_nothing_else) {
  expect_golden_pages<Fp4Planar>(Format::kNvfp4DsMlaV41Planar, kFp4Rows, fp4_token(), fp4_token());
}

// Random slots across four pages of 64 (block stride 48 B past the page), both
// input dtypes, hostile values: each written token's rows are the codec's,
// nothing else changes, and both readers return the codec's decode. The rows
// are also exactly the token-major record's two halves (one definition).
template <class Codec, class TokenMajor>
void expect_random_slots_write_only_their_rows(Format format, const PlanarRows& rows) {
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  constexpr std::int64_t kBlocks = 4, kBlockSize = 64;
  const std::int64_t page = mlakv::page_bytes(info, kBlockSize) + 48;
  GuardedCache cache(kBlocks, kBlockSize, info.record_bytes, page);
  std::vector<std::int64_t> slots(kBlocks * kBlockSize);
  for (std::int64_t s = 0; s < kBlocks * kBlockSize; ++s) slots[s] = s;
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(11));
  slots.resize(40);
  slots.push_back(-1);
  slots.push_back(kBlocks * kBlockSize);  // past capacity: skipped
  const auto tokens = static_cast<std::int64_t>(slots.size());
  const std::size_t base = cache.record_offset(0);
  const auto data_at = [&](std::int64_t slot) {
    return base + static_cast<std::size_t>((slot / kBlockSize) * page + rows.data(kBlockSize, slot % kBlockSize));
  };
  const auto scale_at = [&](std::int64_t slot) {
    return base + static_cast<std::size_t>((slot / kBlockSize) * page + rows.scale(kBlockSize, slot % kBlockSize));
  };
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(dtype));
    const std::vector<std::uint16_t> nope = random_inputs(tokens * kNope, dtype, 15, /*specials=*/true);
    const std::vector<std::uint16_t> rope = random_inputs(tokens * kRope, dtype, 16, /*specials=*/true);
    mlakv::write_records(format, mlakv::make_view(const_cast<std::uint16_t*>(nope.data()), dtype, {tokens, kNope}),
                         mlakv::make_view(const_cast<std::uint16_t*>(rope.data()), dtype, {tokens, kRope}),
                         cache.view(info.record_bytes), mlakv::make_view(slots.data(), DType::kInt64, {tokens}));
    std::vector<bool> written(cache.storage().size(), false);
    std::vector<std::uint8_t> record(info.record_bytes);
    for (std::int64_t t = 0; t + 2 < tokens; ++t) {
      encode<TokenMajor>(dtype, &nope[t * kNope], &rope[t * kRope], record.data());
      const std::size_t d = data_at(slots[t]), sc = scale_at(slots[t]);
      ASSERT_EQ(std::memcmp(&cache.storage()[d], record.data(), rows.code_row), 0) << "slot " << slots[t];
      ASSERT_EQ(std::memcmp(&cache.storage()[sc], record.data() + rows.code_row, rows.scale_row), 0)
          << "slot " << slots[t];
      for (int i = 0; i < rows.code_row; ++i) written[d + i] = true;
      for (int i = 0; i < rows.scale_row; ++i) written[sc + i] = true;
    }
    for (const std::size_t i : cache.changed_bytes()) ASSERT_TRUE(written[i]) << "byte " << i << " changed";

    std::vector<float> kv(tokens * kNope, 7.0f), pe(tokens * kRope, 7.0f);
    mlakv::gather_records(format, cache.view(info.record_bytes),
                          mlakv::make_view(slots.data(), DType::kInt64, {tokens}),
                          mlakv::make_view(kv.data(), DType::kFloat32, {tokens, kNope}),
                          mlakv::make_view(pe.data(), DType::kFloat32, {tokens, kRope}));
    for (std::int64_t t = 0; t < tokens; ++t) {
      float dn[kNope] = {}, dr[kRope] = {};
      if (t + 2 < tokens) {
        Codec::decode_token(&cache.storage()[data_at(slots[t])], &cache.storage()[scale_at(slots[t])], dn, dr);
      }
      for (int i = 0; i < kNope; ++i) {
        ASSERT_EQ(f32_bits(kv[t * kNope + i]), f32_bits(mlakv::codec::canonical_nan(dn[i]))) << t << " " << i;
      }
      for (int i = 0; i < kRope; ++i) {
        ASSERT_EQ(f32_bits(pe[t * kRope + i]), f32_bits(mlakv::codec::canonical_nan(dr[i]))) << t << " " << i;
      }
    }
  }
}

TEST(v41_planar_writer, mxfp8_random_slots_across_pages_write_only_their_rows_and_read_back) {
  expect_random_slots_write_only_their_rows<Mxfp8Planar, Mxfp8>(Format::kFp8DsMlaV41Planar, kMxfp8Rows);
}

TEST(v41_planar_writer, fp4_random_slots_across_pages_write_only_their_rows_and_read_back) {
  expect_random_slots_write_only_their_rows<Fp4Planar, Fp4>(Format::kNvfp4DsMlaV41Planar, kFp4Rows);
}

TEST(v41_planar_reader, decodes_hand_built_pages_with_both_readers) {
  // Page 1, token 3 of two pages of 4 (2112 B of rows, padded to 2560) holds the hand-built MXFP8 token.
  const HandToken m = mxfp8_token(1.0f);
  constexpr std::int64_t kPage = 2560;
  ASSERT_EQ(mlakv::page_bytes(mlakv::format_info(Format::kFp8DsMlaV41Planar), 4), kPage);
  std::vector<std::uint8_t> cache(2 * kPage, 0);
  std::memcpy(&cache[kPage + kMxfp8Rows.data(4, 3)], m.record.data(), 512);
  std::memcpy(&cache[kPage + kMxfp8Rows.scale(4, 3)], m.record.data() + 512, 16);
  TensorView view = mlakv::make_view(cache.data(), DType::kUInt8, {2, 4, 528});
  view.strides[0] = kPage;
  std::vector<std::int64_t> slots = {7, -1};
  std::vector<float> nope(2 * kNope, 1.0f), rope(2 * kRope, 1.0f);
  mlakv::gather_records(Format::kFp8DsMlaV41Planar, view, mlakv::make_view(slots.data(), DType::kInt64, {2}),
                        mlakv::make_view(nope.data(), DType::kFloat32, {2, kNope}),
                        mlakv::make_view(rope.data(), DType::kFloat32, {2, kRope}));
  EXPECT_EQ(nope[0], 448.0f);
  EXPECT_EQ(nope[1], -1.5f);
  EXPECT_EQ(nope[32], 3.0f);
  EXPECT_EQ(nope[96], 56.0f);
  EXPECT_EQ(nope[128], 56.0f);  // 57 stored as 224 x 2^-2
  EXPECT_TRUE(std::isnan(nope[161]));
  EXPECT_EQ(rope[0], 0.75f);
  EXPECT_EQ(rope[1], -0.25f);
  for (int i = kNope; i < 2 * kNope; ++i) ASSERT_EQ(nope[i], 0.0f) << i;  // slot -1 reads as zeros

  // The FP4 token through the paged reader: sequence 0 is block 1, its row 2 is slot 6.
  const HandToken f = fp4_token();
  constexpr std::int64_t kFp4Page = 1536;  // 4 x 288 = 1152, padded to 3 x 512
  ASSERT_EQ(mlakv::page_bytes(mlakv::format_info(Format::kNvfp4DsMlaV41Planar), 4), kFp4Page);
  std::vector<std::uint8_t> fp4(2 * kFp4Page, 0);
  std::memcpy(&fp4[kFp4Page + kFp4Rows.data(4, 2)], f.record.data(), 256);
  std::memcpy(&fp4[kFp4Page + kFp4Rows.scale(4, 2)], f.record.data() + 256, 32);
  TensorView fp4_view = mlakv::make_view(fp4.data(), DType::kUInt8, {2, 4, 288});
  fp4_view.strides[0] = kFp4Page;
  std::int32_t block_table[1] = {1}, seq_lens[1] = {3}, cu_seq_lens[2] = {0, 3};
  std::vector<float> kv(3 * kNope), pe(3 * kRope);
  mlakv::gather_records_paged(
      Format::kNvfp4DsMlaV41Planar, fp4_view, mlakv::make_view(block_table, DType::kInt32, {1, 1}),
      mlakv::make_view(seq_lens, DType::kInt32, {1}), mlakv::make_view(cu_seq_lens, DType::kInt32, {2}),
      mlakv::make_view(kv.data(), DType::kFloat32, {3, kNope}),
      mlakv::make_view(pe.data(), DType::kFloat32, {3, kRope}));
  const float* row = &kv[2 * kNope];
  EXPECT_EQ(row[0], 6.0f);
  EXPECT_EQ(row[1], -3.0f);
  EXPECT_EQ(row[48], 6.0f * 448.0f);
  for (int i = 64; i < 80; ++i) ASSERT_TRUE(std::isnan(row[i])) << i;  // the NaN tile reads as NaN
  EXPECT_EQ(row[80], 6.75f);
  EXPECT_EQ(row[112], 6.0f * 448.0f);  // the inf tile reads finite
  EXPECT_EQ(pe[2 * kRope + 0], 12.0f);
  EXPECT_EQ(pe[2 * kRope + 1], -1.0f);
  for (int i = 0; i < 2 * kNope; ++i) ASSERT_EQ(kv[i], 0.0f) << i;  // rows 0 and 1: the page's empty tokens
}

TEST(v41_planar_validation, the_engines_page_view_is_required) {
  std::vector<std::uint16_t> nope(kNope), rope(kRope);
  std::vector<std::uint8_t> cache(2 * 33792 + 64);
  std::int64_t slot = 0;
  TensorView view = mlakv::make_view(cache.data(), DType::kUInt8, {2, 64, 528});
  view.strides[1] = 544;
  view.strides[0] = 64 * 544;
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kFp8DsMlaV41Planar,
                                   mlakv::make_view(nope.data(), DType::kBFloat16, {1, kNope}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {1, kRope}), view,
                                   mlakv::make_view(&slot, DType::kInt64, {1}));
            }),
            "mlakv::write_records(fp8_ds_mla_v41_planar): kv_cache: slot stride must be 528 (a block-planar page: "
            "its rows are packed, region after region), got 544");
  view = mlakv::make_view(cache.data(), DType::kUInt8, {2, 64, 288});
  view.strides[0] = 64 * 288 - 16;
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kNvfp4DsMlaV41Planar,
                                   mlakv::make_view(nope.data(), DType::kBFloat16, {1, kNope}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {1, kRope}), view,
                                   mlakv::make_view(&slot, DType::kInt64, {1}));
            }),
            "mlakv::write_records(nvfp4_ds_mla_v41_planar): kv_cache: block stride must be >= 18432 (blocks must "
            "not overlap), got 18416");
}

}  // namespace
