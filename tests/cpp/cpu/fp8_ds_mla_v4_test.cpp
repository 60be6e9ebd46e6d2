// SPDX-License-Identifier: Apache-2.0
// DeepSeek V4's block-planar FP8 page ("fp8_ds_mla_v4", 584 B per token): a
// page built by hand from the engines' facts, guard bytes around pages and
// their padding, random slots across pages, the readers, the round-trip
// properties of the UE8M0 scales, and the arguments the format refuses.
#include "codec/fp8_ds_mla_v4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;
using Codec = mlakv::codec::CodecFp8DsMlaV4;

constexpr int kNope = 448;
constexpr int kRope = 64;
constexpr int kDataRow = 576;
constexpr int kScaleRow = 8;
constexpr int kRecord = 584;

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const mlakv::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// The page view the engines pass: [num_blocks, block_size, 584], slot stride
// 584 (nominal), block stride the padded page.
TensorView page_view(std::uint8_t* data, std::int64_t blocks, std::int64_t block_size, std::int64_t block_stride) {
  TensorView v = mlakv::make_view(data, DType::kUInt8, {blocks, block_size, kRecord});
  v.strides[0] = block_stride;
  return v;
}

// One token built by hand: per tile, values whose amax, UE8M0 byte and codes are known.
struct HandToken {
  std::vector<std::uint16_t> nope = std::vector<std::uint16_t>(kNope, 0);
  std::vector<std::uint16_t> rope = std::vector<std::uint16_t>(kRope, 0);
  std::vector<std::uint8_t> data_row = std::vector<std::uint8_t>(kDataRow, 0);
  std::vector<std::uint8_t> scale_row = std::vector<std::uint8_t>(kScaleRow, 0);

  // NoPE value v = x, stored as E4M3 code of x / 2^e (exact here).
  void set(int v, float x, float quotient) {
    nope[v] = bf16_bits(x);
    data_row[v] = e4m3_code_of(quotient);
  }

  explicit HandToken(float sign) {
    // Tile 0: amax 448 -> 448 / 448 = 1 = 2^0: byte 127, codes of x itself.
    set(0, sign * 448.0f, sign * 448.0f);
    set(1, sign * -1.5f, sign * -1.5f);
    scale_row[0] = 127;
    // Tile 1: amax 3 -> 3 / 448 in (2^-8, 2^-7]: byte 120, x / 2^-7.
    set(64, sign * 3.0f, sign * 384.0f);
    set(65, sign * 1.0f, sign * 128.0f);
    scale_row[1] = 120;
    // Tile 2: all zero -> the 1e-4 amax floor: 1e-4 / 448 in (2^-23, 2^-22]: byte 105.
    scale_row[2] = 105;
    // Tile 3: amax 2^-20 < 1e-4 -> floored: byte 105, 2^-20 / 2^-22 = 4.
    set(192, sign * std::ldexp(1.0f, -20), sign * 4.0f);
    scale_row[3] = 105;
    // Tile 4: amax 56 -> 56 / 448 = 2^-3 exactly: byte 124, 56 -> 448.
    set(256, sign * 56.0f, sign * 448.0f);
    scale_row[4] = 124;
    // Tile 5: amax 57 -> just over 2^-3: byte 125, 57 / 2^-2 = 228 rounds to 224.
    set(320, sign * 57.0f, sign * 224.0f);
    scale_row[5] = 125;
    // Tile 6: a NaN never raises the amax (2 -> byte 120); NaN -> 0x7F.
    set(384, sign * 2.0f, sign * 256.0f);
    nope[385] = 0x7FC0;
    data_row[385] = 0x7F;
    scale_row[6] = 120;
    // scale_row[7]: the zero pad.
    // RoPE: 64 bf16 values stored bit for bit, a NaN payload included.
    for (int i = 0; i < kRope; ++i) {
      rope[i] = static_cast<std::uint16_t>((sign < 0 ? 0xBF80 : 0x3F80) + 3 * i);
      std::memcpy(&data_row[kNope + 2 * i], &rope[i], 2);
    }
    rope[9] = 0x7FC3;
    std::memcpy(&data_row[kNope + 2 * 9], &rope[9], 2);
  }
};

TEST(fp8_ds_mla_v4_writer, golden_page_holds_every_field_pad_and_untouched_page_padding) {
  // block_size 4: 4 x 584 = 2336 B of rows, padded to 5 x 576 = 2880.
  constexpr std::int64_t kBlockSize = 4, kPage = 2880;
  ASSERT_EQ(mlakv::page_bytes(mlakv::format_info(Format::kFp8DsMlaV4), kBlockSize), kPage);
  GuardedCache cache(2, kBlockSize, kRecord, kPage);
  const HandToken a(1.0f), b(-1.0f);
  std::vector<std::uint16_t> nope(a.nope), rope(a.rope);
  nope.insert(nope.end(), b.nope.begin(), b.nope.end());
  rope.insert(rope.end(), b.rope.begin(), b.rope.end());
  std::vector<std::int64_t> slots = {1, 6};  // page 0 token 1, page 1 token 2
  TensorView view = cache.view(kRecord);
  mlakv::write_records(Format::kFp8DsMlaV4, mlakv::make_view(nope.data(), DType::kBFloat16, {2, kNope}),
                       mlakv::make_view(rope.data(), DType::kBFloat16, {2, kRope}), view,
                       mlakv::make_view(slots.data(), DType::kInt64, {2}));
  const std::size_t base = cache.record_offset(0);
  const struct {
    const HandToken& token;
    std::size_t data, scale;
  } expected[] = {{a, base + 1 * kDataRow, base + 4 * kDataRow + 1 * kScaleRow},
                  {b, base + kPage + 2 * kDataRow, base + kPage + 4 * kDataRow + 2 * kScaleRow}};
  const std::vector<std::uint8_t>& bytes = cache.storage();
  for (const auto& e : expected) {
    for (int i = 0; i < kDataRow; ++i) ASSERT_EQ(bytes[e.data + i], e.token.data_row[i]) << "data row byte " << i;
    for (int i = 0; i < kScaleRow; ++i) ASSERT_EQ(bytes[e.scale + i], e.token.scale_row[i]) << "scale row byte " << i;
  }
  // Nothing else changed: not the other tokens' rows, not the page padding, not the guards.
  for (const std::size_t i : cache.changed_bytes()) {
    bool inside = false;
    for (const auto& e : expected) {
      inside |= (i >= e.data && i < e.data + kDataRow) || (i >= e.scale && i < e.scale + kScaleRow);
    }
    ASSERT_TRUE(inside) << "byte " << i << " outside the two tokens' rows changed";
  }
}

TEST(fp8_ds_mla_v4_writer, random_slots_across_pages_write_only_their_rows) {
  constexpr std::int64_t kBlocks = 4, kBlockSize = 64, kPage = 37440 + 32;  // a larger-than-padded block stride
  GuardedCache cache(kBlocks, kBlockSize, kRecord, kPage);
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
    mlakv::write_records(Format::kFp8DsMlaV4,
                         mlakv::make_view(const_cast<std::uint16_t*>(nope.data()), dtype, {tokens, kNope}),
                         mlakv::make_view(const_cast<std::uint16_t*>(rope.data()), dtype, {tokens, kRope}),
                         cache.view(kRecord), mlakv::make_view(slots.data(), DType::kInt64, {tokens}));
    const std::size_t base = cache.record_offset(0);
    std::vector<bool> written(cache.storage().size(), false);
    for (std::int64_t t = 0; t + 2 < tokens; ++t) {
      const std::int64_t page = slots[t] / kBlockSize, token = slots[t] % kBlockSize;
      const std::size_t data = base + page * kPage + token * kDataRow;
      const std::size_t scale = base + page * kPage + kBlockSize * kDataRow + token * kScaleRow;
      std::uint8_t want_data[kDataRow], want_scale[kScaleRow];
      if (dtype == DType::kBFloat16) {
        Codec::encode_token<mlakv::codec::InputDtype::kBf16>(&nope[t * kNope], &rope[t * kRope], want_data, want_scale);
      } else {
        Codec::encode_token<mlakv::codec::InputDtype::kFp16>(&nope[t * kNope], &rope[t * kRope], want_data, want_scale);
      }
      ASSERT_EQ(std::memcmp(&cache.storage()[data], want_data, kDataRow), 0) << "slot " << slots[t];
      ASSERT_EQ(std::memcmp(&cache.storage()[scale], want_scale, kScaleRow), 0) << "slot " << slots[t];
      for (int i = 0; i < kDataRow; ++i) written[data + i] = true;
      for (int i = 0; i < kScaleRow; ++i) written[scale + i] = true;
    }
    for (const std::size_t i : cache.changed_bytes()) ASSERT_TRUE(written[i]) << "byte " << i << " changed";
  }
}

TEST(fp8_ds_mla_v4_writer, fp16_rope_is_rounded_to_bf16_and_bf16_rope_kept_bit_for_bit) {
  std::vector<std::uint16_t> nope(kNope, 0);
  const std::uint16_t fp16_rope[2] = {fp16_bits(1.0009765625f), 0x7E01};  // 1 + 2^-10 -> bf16 1.0; NaN -> 0x7FFF
  std::uint8_t data[kDataRow], scale[kScaleRow];
  std::vector<std::uint16_t> rope(kRope, 0);
  rope[0] = fp16_rope[0];
  rope[1] = fp16_rope[1];
  Codec::encode_token<mlakv::codec::InputDtype::kFp16>(nope.data(), rope.data(), data, scale);
  std::uint16_t stored[2];
  std::memcpy(stored, &data[kNope], sizeof(stored));
  EXPECT_EQ(stored[0], 0x3F80);
  EXPECT_EQ(stored[1], 0x7FFF);
}

TEST(fp8_ds_mla_v4_writer, concat_and_cache_mla_fp8_ds_mla_of_a_584_byte_cache_writes_the_v4_page) {
  const HandToken a(1.0f);
  std::vector<std::uint8_t> page(37440, 0xEE);
  std::int64_t slot = 63;
  mlakv::concat_and_cache_mla(mlakv::make_view(const_cast<std::uint16_t*>(a.nope.data()), DType::kBFloat16, {1, kNope}),
                              mlakv::make_view(const_cast<std::uint16_t*>(a.rope.data()), DType::kBFloat16, {1, kRope}),
                              page_view(page.data(), 1, 64, 37440), mlakv::make_view(&slot, DType::kInt64, {1}),
                              "fp8_ds_mla");
  EXPECT_EQ(std::memcmp(&page[63 * kDataRow], a.data_row.data(), kDataRow), 0);
  EXPECT_EQ(std::memcmp(&page[64 * kDataRow + 63 * kScaleRow], a.scale_row.data(), kScaleRow), 0);
  for (std::size_t i = 64 * kRecord; i < page.size(); ++i) ASSERT_EQ(page[i], 0xEE) << "padding byte " << i;
}

TEST(fp8_ds_mla_v4_reader, decodes_the_hand_built_page_and_zeros_unaddressed_slots) {
  constexpr std::int64_t kBlockSize = 4, kPage = 2880;
  std::vector<std::uint8_t> page(2 * kPage, 0);
  const HandToken a(1.0f);
  std::memcpy(&page[kPage + 3 * kDataRow], a.data_row.data(), kDataRow);  // slot 7
  std::memcpy(&page[kPage + 4 * kDataRow + 3 * kScaleRow], a.scale_row.data(), kScaleRow);
  std::vector<std::int64_t> slots = {7, -1, 8};
  std::vector<float> nope(3 * kNope, 1.0f), rope(3 * kRope, 1.0f);
  mlakv::gather_records(Format::kFp8DsMlaV4, page_view(page.data(), 2, kBlockSize, kPage),
                        mlakv::make_view(slots.data(), DType::kInt64, {3}),
                        mlakv::make_view(nope.data(), DType::kFloat32, {3, kNope}),
                        mlakv::make_view(rope.data(), DType::kFloat32, {3, kRope}));
  EXPECT_EQ(nope[0], 448.0f);
  EXPECT_EQ(nope[1], -1.5f);
  EXPECT_EQ(nope[64], 3.0f);
  EXPECT_EQ(nope[65], 1.0f);
  EXPECT_EQ(nope[128], 0.0f);
  EXPECT_EQ(nope[192], std::ldexp(1.0f, -20));
  EXPECT_EQ(nope[256], 56.0f);
  EXPECT_EQ(nope[320], 56.0f);  // 57 stored as 224 x 2^-2
  EXPECT_EQ(nope[384], 2.0f);
  EXPECT_TRUE(std::isnan(nope[385]));
  EXPECT_EQ(rope[1], std::ldexp(1.0f + 3.0f / 128.0f, 0));                // 0x3F83: 1 + 3 x 2^-7
  for (int i = kNope; i < 3 * kNope; ++i) ASSERT_EQ(nope[i], 0.0f) << i;  // slot -1 and the never-written slot 8
  for (int i = kRope; i < 3 * kRope; ++i) ASSERT_EQ(rope[i], 0.0f) << i;

  // The paged reader: sequence 0 is block 1, positions 0..3; its row 3 is slot 7.
  std::int32_t block_table[1] = {1}, seq_lens[1] = {4}, cu_seq_lens[2] = {0, 4};
  std::vector<std::uint16_t> out(4 * (kNope + kRope), 0xFFFF);
  TensorView kv_out = mlakv::make_view(out.data(), DType::kBFloat16, {4, kNope});
  kv_out.strides[0] = kNope + kRope;
  TensorView pe_out = mlakv::make_view(out.data() + kNope, DType::kBFloat16, {4, kRope});
  pe_out.strides[0] = kNope + kRope;
  mlakv::gather_records_paged(Format::kFp8DsMlaV4, page_view(page.data(), 2, kBlockSize, kPage),
                              mlakv::make_view(block_table, DType::kInt32, {1, 1}),
                              mlakv::make_view(seq_lens, DType::kInt32, {1}),
                              mlakv::make_view(cu_seq_lens, DType::kInt32, {2}), kv_out, pe_out);
  const std::uint16_t* row3 = &out[3 * (kNope + kRope)];
  EXPECT_EQ(row3[0], bf16_bits(448.0f));
  EXPECT_EQ(row3[320], bf16_bits(56.0f));
  EXPECT_EQ(row3[kNope + 1], 0x3F83);
  EXPECT_EQ(row3[kNope + 9], 0x7FFF);  // bf16 outputs store every NaN as 0x7FFF
  EXPECT_EQ(out[0], 0);                // rows 0..2 were never written: zeros
}

// The documented properties: each tile's UE8M0 scale 2^e is the smallest
// power of two >= max(amax, 1e-4) / 448 (so always >= amax / 448), and a
// value reads back within half an E4M3 step of the value times the scale.
TEST(fp8_ds_mla_v4_round_trip, ue8m0_scale_is_the_smallest_power_of_two_at_or_above_amax_over_448) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(dtype));
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      const std::vector<std::uint16_t> nope = random_inputs(kNope, dtype, seed, /*specials=*/false);
      const std::vector<std::uint16_t> rope = random_inputs(kRope, dtype, seed + 1000, false);
      std::uint8_t data[kDataRow], scale[kScaleRow];
      float out_nope[kNope], out_rope[kRope];
      if (dtype == DType::kBFloat16) {
        Codec::encode_token<mlakv::codec::InputDtype::kBf16>(nope.data(), rope.data(), data, scale);
      } else {
        Codec::encode_token<mlakv::codec::InputDtype::kFp16>(nope.data(), rope.data(), data, scale);
      }
      Codec::decode_token(data, scale, out_nope, out_rope);
      ASSERT_EQ(scale[7], 0);
      for (int tile = 0; tile < 7; ++tile) {
        float amax = 0.0f;
        std::vector<float> x(64);
        for (int i = 0; i < 64; ++i) {
          const std::uint16_t bits = nope[tile * 64 + i];
          x[i] = dtype == DType::kBFloat16 ? mlakv::codec::load_input<mlakv::codec::InputDtype::kBf16>(bits)
                                           : mlakv::codec::load_input<mlakv::codec::InputDtype::kFp16>(bits);
          amax = std::max(amax, std::fabs(x[i]));
        }
        const double s = std::ldexp(1.0, scale[tile] - 127);
        const double bound = static_cast<double>(std::max(amax, 1e-4f) / 448.0f);
        ASSERT_GE(s, static_cast<double>(amax / 448.0f)) << "tile " << tile;
        ASSERT_GE(s, bound) << "tile " << tile;
        ASSERT_LT(s / 2, bound) << "tile " << tile;  // the smallest such power of two
        for (int i = 0; i < 64; ++i) {
          const double err = std::fabs(static_cast<double>(out_nope[tile * 64 + i]) - x[i]);
          ASSERT_LE(err, std::fabs(x[i]) / 16 + s * std::ldexp(1.0, -10)) << "tile " << tile << " value " << i;
        }
      }
      for (int i = 0; i < kRope && dtype == DType::kBFloat16; ++i) {
        ASSERT_EQ(out_rope[i], mlakv::codec::load_input<mlakv::codec::InputDtype::kBf16>(rope[i]));
      }
    }
  }
}

// mlakv follows vLLM's writer for the amax (a NaN never raises it; FlashMLA's reference
// lets it make the scale 0xFF) and stores the NaN itself as E4M3's NaN (vLLM clamps it
// to a finite +-448 code): docs/formats/fp8_ds_mla_v4.md.
TEST(fp8_ds_mla_v4_round_trip, a_nan_never_raises_a_tile_amax_and_is_stored_as_0x7f) {
  for (const std::uint16_t nan : {std::uint16_t{0x7FC0}, std::uint16_t{0x7F81}}) {  // quiet, signalling
    std::vector<std::uint16_t> nope(kNope, bf16_bits(1.0f)), rope(kRope, bf16_bits(1.0f));
    nope[64 + 5] = nan;  // tile 1
    std::uint8_t data[kDataRow], scale[kScaleRow];
    float out_nope[kNope], out_rope[kRope];
    Codec::encode_token<mlakv::codec::InputDtype::kBf16>(nope.data(), rope.data(), data, scale);
    Codec::decode_token(data, scale, out_nope, out_rope);
    EXPECT_EQ(scale[1], 119);  // amax 1 (the NaN ignored): 1 / 448 in (2^-9, 2^-8] -> e = -8
    EXPECT_EQ(scale[0], 119);
    EXPECT_EQ(data[64 + 5], 0x7F);
    EXPECT_TRUE(std::isnan(out_nope[64 + 5]));
    EXPECT_EQ(out_nope[64 + 4], 1.0f);  // the tile's other values keep their scale
    EXPECT_EQ(out_nope[64 + 6], 1.0f);
  }
}

TEST(fp8_ds_mla_v4_round_trip, inf_amax_stores_byte_ff_and_reads_back_nan) {
  EXPECT_EQ(Codec::scale_byte(INFINITY), 0xFF);
  EXPECT_EQ(Codec::scale_byte(0.0f), 105);
  EXPECT_EQ(Codec::scale_byte(448.0f), 127);
  EXPECT_EQ(Codec::scale_byte(std::nextafter(448.0f, 1000.0f)), 128);
  EXPECT_TRUE(std::isnan(Codec::scale_value(0xFF, /*for_encoding=*/false)));
  EXPECT_EQ(Codec::scale_value(0, false), std::ldexp(1.0f, -127));
  EXPECT_EQ(Codec::scale_value(254, false), std::ldexp(1.0f, 127));
}

TEST(fp8_ds_mla_v4_validation, kv_c_must_be_448_wide) {
  std::vector<std::uint16_t> nope(2 * 512), rope(2 * kRope);
  std::vector<std::uint8_t> page(37440);
  std::int64_t slots[2] = {0, 1};
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kFp8DsMlaV4, mlakv::make_view(nope.data(), DType::kBFloat16, {2, 512}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {2, kRope}),
                                   page_view(page.data(), 1, 64, 37440), mlakv::make_view(slots, DType::kInt64, {2}));
            }),
            "mlakv::write_records(fp8_ds_mla_v4): kv_c: shape must be (T, 448), got (2, 512)");
}

TEST(fp8_ds_mla_v4_validation, slot_stride_must_be_the_packed_584) {
  std::vector<std::uint16_t> nope(kNope), rope(kRope);
  std::vector<std::uint8_t> page(2 * 64 * 592);
  std::int64_t slot = 0;
  TensorView view = page_view(page.data(), 1, 64, 64 * 592);
  view.strides[1] = 592;
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kFp8DsMlaV4, mlakv::make_view(nope.data(), DType::kBFloat16, {1, kNope}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {1, kRope}), view,
                                   mlakv::make_view(&slot, DType::kInt64, {1}));
            }),
            "mlakv::write_records(fp8_ds_mla_v4): kv_cache: slot stride must be 584 (a block-planar page: its rows "
            "are packed, region after region), got 592");
}

TEST(fp8_ds_mla_v4_validation, pages_must_not_overlap) {
  std::vector<std::uint16_t> nope(kNope), rope(kRope);
  std::vector<std::uint8_t> page(2 * 37440);
  std::int64_t slot = 0;
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kFp8DsMlaV4, mlakv::make_view(nope.data(), DType::kBFloat16, {1, kNope}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {1, kRope}),
                                   page_view(page.data(), 2, 64, 37360), mlakv::make_view(&slot, DType::kInt64, {1}));
            }),
            "mlakv::write_records(fp8_ds_mla_v4): kv_cache: block stride must be >= 37376 (blocks must not overlap), "
            "got 37360");
}

TEST(fp8_ds_mla_v4_validation, a_block_stride_below_the_padded_page_is_refused_before_writing) {
  std::vector<std::uint16_t> nope(kNope), rope(kRope);
  std::vector<std::uint8_t> page(2 * 37440, 0xEE);
  std::int64_t slot = 64;  // the second page's first token
  EXPECT_EQ(error_of([&] {
              mlakv::write_records(Format::kFp8DsMlaV4, mlakv::make_view(nope.data(), DType::kBFloat16, {1, kNope}),
                                   mlakv::make_view(rope.data(), DType::kBFloat16, {1, kRope}),
                                   page_view(page.data(), 2, 64, 37376), mlakv::make_view(&slot, DType::kInt64, {1}));
            }),
            "mlakv::write_records(fp8_ds_mla_v4): kv_cache: block stride must be >= 37440 (mlakv::page_bytes: the "
            "padded page), got 37376");
  EXPECT_TRUE(std::all_of(page.begin(), page.end(), [](std::uint8_t b) { return b == 0xEE; }));
}

TEST(fp8_ds_mla_v4_validation, sparse_decode_of_the_v4_page_takes_512_wide_queries) {
  std::vector<std::uint16_t> q(576), out(512);
  std::vector<std::uint8_t> page(37440);
  std::int32_t index = 0;
  float lse = 0.0f;
  EXPECT_EQ(error_of([&] {
              mlakv::sparse_mla_decode(Format::kFp8DsMlaV4, mlakv::make_view(q.data(), DType::kBFloat16, {1, 1, 576}),
                                       page_view(page.data(), 1, 64, 37440),
                                       mlakv::make_view(&index, DType::kInt32, {1, 1}),
                                       mlakv::make_view(out.data(), DType::kBFloat16, {1, 1, 512}),
                                       mlakv::make_view(&lse, DType::kFloat32, {1, 1}));
            }),
            "mlakv::sparse_mla_decode(fp8_ds_mla_v4): q: shape must be (R, H, 512) (DeepSeek V4: 448 NoPE + 64 RoPE), "
            "got (1, 1, 576)");
}

}  // namespace
