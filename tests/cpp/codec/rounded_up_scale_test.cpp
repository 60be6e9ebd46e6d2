// SPDX-License-Identifier: Apache-2.0
// The nvfp4_fp8_ds_mla (352) group scale byte: E4M3 of max(amax / 6, 2^-9)
// rounded to nearest and bumped one code where that lies below. Checked
// against an independent characterisation, the smallest E4M3 value at or
// above the floored scale (448 where none is), for every 16-bit amax, and at
// the edges by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "codec/nvfp4.h"
#include "test_support.h"

namespace {

using mlakv::codec::InputDtype;
using mlakv::codec::rounded_up_scale_byte;
using mlakv::test::e4m3_value;

// The smallest positive E4M3 code whose value is >= sf; 0x7E (448) above that.
std::uint8_t e4m3_ceiling(double sf) {
  for (unsigned code = 0x01; code <= 0x7E; ++code) {
    if (e4m3_value(code) >= sf) return static_cast<std::uint8_t>(code);
  }
  return 0x7E;
}

std::uint8_t scale_byte_of_amax(float amax) { return rounded_up_scale_byte(amax / 6.0f); }

template <InputDtype kDtype>
void expect_ceiling_for_every_amax() {
  int checked = 0;
  int bad = 0;
  for (std::uint32_t bits = 0; bits <= 0x7FFF; ++bits) {  // non-negative patterns
    const float amax = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
    if (std::isnan(amax)) continue;
    const double sf = std::fmax(static_cast<double>(amax / 6.0f), 0x1p-9);
    const std::uint8_t got = scale_byte_of_amax(amax);
    if (got != e4m3_ceiling(sf) && bad++ < 5) {
      ADD_FAILURE() << "amax " << amax << ": got 0x" << std::hex << int(got) << ", want 0x" << int(e4m3_ceiling(sf));
    }
    ++checked;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(checked, kDtype == InputDtype::kBf16 ? 0x7F81 : 0x7C01);  // finite patterns and +inf
}

TEST(rounded_up_scale, is_the_e4m3_ceiling_of_the_floored_scale_for_every_bf16_amax) {
  expect_ceiling_for_every_amax<InputDtype::kBf16>();
}

TEST(rounded_up_scale, is_the_e4m3_ceiling_of_the_floored_scale_for_every_fp16_amax) {
  expect_ceiling_for_every_amax<InputDtype::kFp16>();
}

TEST(rounded_up_scale, edges_of_the_recipe) {
  EXPECT_EQ(scale_byte_of_amax(0.0f), 0x01);             // amax 0: the 2^-9 floor
  EXPECT_EQ(scale_byte_of_amax(6.0f * 0x1p-12f), 0x01);  // under the floor
  EXPECT_EQ(scale_byte_of_amax(6.0f * 0x1p-9f), 0x01);   // at the floor, exact: no bump
  EXPECT_EQ(scale_byte_of_amax(7.5f * 0x1p-9f), 0x02);   // 1.25 * 2^-9 rounds to 2^-9, below: bumped
  EXPECT_EQ(scale_byte_of_amax(6.0f), 0x38);             // 1.0, exact
  EXPECT_EQ(scale_byte_of_amax(6.375f), 0x39);           // 1.0625 ties down to 1.0: bumped to 1.125
  EXPECT_EQ(scale_byte_of_amax(6.6f), 0x39);             // 1.1 rounds up to 1.125: no bump
  EXPECT_EQ(scale_byte_of_amax(2560.0f), 0x7E);          // 426.7 rounds to 416 (0x7D): bumped to 448
  EXPECT_EQ(scale_byte_of_amax(2688.0f), 0x7E);          // 448, exact
  EXPECT_EQ(scale_byte_of_amax(2880.0f), 0x7E);          // 480 > 448: saturates, never bumped past 0x7E
  EXPECT_EQ(scale_byte_of_amax(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(rounded_up_scale_byte(std::numeric_limits<float>::quiet_NaN()), 0x01);  // fmaxf drops a NaN
}

}  // namespace
