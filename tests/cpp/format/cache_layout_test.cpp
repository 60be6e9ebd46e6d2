// SPDX-License-Identifier: Apache-2.0
// The division by the block size that every kernel uses to locate a record,
// and the page rule that places a token's rows in its page.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "params/params.h"

namespace {

using mlakv::params::BlockDivider;

std::vector<std::uint32_t> interesting_numerators(std::uint32_t d) {
  std::vector<std::uint32_t> n = {0u, 1u, d - 1u, d, d + 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
  for (std::uint64_t k : {2ull, 3ull, 1000ull, 0xFFFFFFFFull / d, 0xFFFFFFFFull / d - 1}) {
    const std::uint64_t m = k * d;
    for (const std::uint64_t v : {m - 1, m, m + 1}) {
      if (v <= 0xFFFFFFFFull) n.push_back(static_cast<std::uint32_t>(v));
    }
  }
  return n;
}

void expect_exact(std::uint32_t d, std::uint32_t n) {
  const BlockDivider divider(d);
  ASSERT_EQ(divider.quotient(n), n / d) << n << " / " << d;
}

TEST(block_divider, quotient_equals_integer_division_for_every_small_divisor_at_the_edges) {
  for (std::uint32_t d = 1; d <= 4096; ++d) {
    for (const std::uint32_t n : interesting_numerators(d)) expect_exact(d, n);
  }
}

TEST(block_divider, quotient_equals_integer_division_for_large_and_power_of_two_divisors) {
  std::vector<std::uint32_t> divisors = {0x7FFFFFFFu, 0x80000000u, 0x80000001u, 0xFFFFFFFEu,
                                         0xFFFFFFFFu, 641u,        6700417u};
  for (int e = 0; e < 32; ++e) {
    divisors.push_back(1u << e);
    divisors.push_back((1u << e) + 1u);
    if (e > 1) divisors.push_back((1u << e) - 1u);
  }
  for (const std::uint32_t d : divisors) {
    for (const std::uint32_t n : interesting_numerators(d)) expect_exact(d, n);
  }
}

TEST(block_divider, quotient_equals_integer_division_for_random_pairs) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const std::uint32_t d = std::max<std::uint32_t>(1u, rng() >> (rng() % 32));
    expect_exact(d, static_cast<std::uint32_t>(rng()));
  }
}

TEST(block_divider, a_sweep_of_numerators_for_typical_block_sizes) {
  for (const std::uint32_t d : {16u, 64u, 256u, 48u}) {
    const BlockDivider divider(d);
    // Every 61st numerator: 70 million per divisor, every residue, both ends of the range.
    for (std::uint64_t n = 0; n <= 0xFFFFFFFFull; n += 61) {
      ASSERT_EQ(divider.quotient(static_cast<std::uint32_t>(n)), static_cast<std::uint32_t>(n) / d) << n << " / " << d;
    }
  }
}

TEST(cache_layout, record_address_uses_block_and_position_of_the_slot) {
  std::vector<std::uint8_t> bytes(1);
  const auto layout = mlakv::params::make_cache_layout(bytes.data(), 48, 48 * 1000, 100000, 400);
  for (const std::int64_t slot : {0ll, 1ll, 47ll, 48ll, 49ll, 47999ll}) {
    const std::int64_t want = (slot / 48) * 100000 + (slot % 48) * 400;
    EXPECT_EQ(mlakv::params::record_address(layout, slot) - bytes.data(), want) << slot;
  }
  // Past 2^32 slots the 64-bit division is used.
  const auto big = mlakv::params::make_cache_layout(bytes.data(), 48, 48ll << 27, 100000, 400);
  const std::int64_t slot = (48ll << 27) - 5;
  EXPECT_EQ(mlakv::params::record_address(big, slot) - bytes.data(), (slot / 48) * 100000 + (slot % 48) * 400);
}

TEST(cache_layout, block_planar_rows_sit_region_after_region_in_their_page) {
  std::vector<std::uint8_t> bytes(10 * 37440);
  // DeepSeek V4's page of 64 tokens: 64 data rows of 576 B, 64 scale rows of 8 B, padded to 65 x 576.
  const auto rows = mlakv::format::page_rows(mlakv::format::PageKind::kBlockPlanar, 64, 584, 576, 8);
  const auto layout = mlakv::params::make_cache_layout(bytes.data(), 64, 640, 37440, 584, &rows);
  for (const std::int64_t slot : {0ll, 5ll, 63ll, 64ll, 3 * 64 + 5ll, 639ll}) {
    const auto at = mlakv::params::page_position(layout, slot);
    EXPECT_EQ(at.page, slot / 64);
    EXPECT_EQ(at.token, slot % 64);
    EXPECT_EQ(mlakv::params::record_address(layout, slot) - bytes.data(), (slot / 64) * 37440 + (slot % 64) * 576);
    EXPECT_EQ(mlakv::params::field_address(layout, at, mlakv::format::kScaleRegion, 7) - bytes.data(),
              (slot / 64) * 37440 + 64 * 576 + (slot % 64) * 8 + 7);
  }
}

TEST(cache_layout, token_major_rows_ignore_the_scale_region) {
  std::vector<std::uint8_t> bytes(1);
  const auto layout = mlakv::params::make_cache_layout(bytes.data(), 48, 48 * 1000, 100000, 400);
  EXPECT_EQ(layout.rows.data_row_stride, 400);
  const auto at = mlakv::params::page_position(layout, 50);
  EXPECT_EQ(mlakv::params::field_address(layout, at, mlakv::format::kDataRegion, 17) - bytes.data(),
            100000 + 2 * 400 + 17);
}

}  // namespace
