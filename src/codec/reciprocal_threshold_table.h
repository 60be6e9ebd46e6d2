// SPDX-License-Identifier: Apache-2.0
// The nvfp4_fp8_ds_mla (352) recipe's E2M1 thresholds, one row per scale
// byte, built at compile time: the GPU writer looks its group's row up
// instead of placing seven thresholds per group.
//
// The recipe's code is E2M1(RN(x * inv_s)) with s = E4M3(byte) and
// inv_s = RN(1 / s), so a row depends on the byte alone.
// RN(x * inv_s) does not decrease as x grows, so the code is the number of
// thresholds |x| passes; each lies next to c = s * T (at most 7 significant
// bits, so a value of the input type), on the side the rounded product
// RN(c * inv_s) tells: c's neighbours are a whole step of the type (>= 2^-11
// relative) away, far beyond the product's 2^-23. Constant evaluation rounds
// f32 products and quotients to nearest like the device does. The exhaustive
// quad tests (CPU and GPU) check every row against the recipe for every input.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "codec/element.h"

namespace mlakv::codec {

/// Seven 16-bit thresholds (and one pad, so a row is one 16-byte load).
struct alignas(16) ThresholdRow {
  std::uint16_t t[8];
};
// Scale bytes 0..127; the writer looks up only 0x01..0x7E (the 2^-9 floor is
// 0x01, 448 is 0x7E), so rows 0 and 0x7F (NaN) are placeholders.
using ThresholdTable = std::array<ThresholdRow, 128>;

namespace table_detail {

constexpr float times_power_of_two(float v, int e) {
  for (; e > 0; --e) v *= 2.0f;
  for (; e < 0; ++e) v *= 0.5f;
  return v;
}

/// A positive E4M3 code's value (exact).
constexpr float e4m3_value(unsigned code) {
  const unsigned e = (code >> 3) & 0xFu;
  const unsigned m = code & 7u;
  if (e == 0) return times_power_of_two(static_cast<float>(m), -9);
  return times_power_of_two(1.0f + static_cast<float>(m) / 8.0f, static_cast<int>(e) - 7);
}

/// Bits of a positive value exactly representable in the input type.
template <InputDtype kDtype>
constexpr std::uint32_t exact_bits(float v) {
  const auto f = std::bit_cast<std::uint32_t>(v);
  if constexpr (kDtype == InputDtype::kBf16) {
    return f >> 16;
  } else {
    if (v >= 0x1p-14f) return ((((f >> 23) & 0xFFu) - 127u + 15u) << 10) | ((f >> 13) & 0x3FFu);
    return static_cast<std::uint32_t>(times_power_of_two(v, 24));  // a subnormal's integer multiple of 2^-24
  }
}

/// The row of scale byte `code`: the last input whose product stays <= T
/// (even k) or the first whose product reaches T (odd k).
template <InputDtype kDtype>
constexpr ThresholdRow reciprocal_row(unsigned code) {
  ThresholdRow row{};
  if (code == 0 || code == 0x7F) return row;  // never looked up
  const float s = e4m3_value(code);           // exact, 2^-9 <= s <= 448
  const float inv_s = 1.0f / s;               // RN, as the writer's reciprocal_of
  for (int k = 0; k < 7; ++k) {
    const float point = e2m1_decision_point(k);
    const float c = s * point;  // exact
    std::uint32_t bits = exact_bits<kDtype>(c);
    const float at_c = c * inv_s;
    if (k % 2 == 0 && at_c > point) bits -= 1;  // c already passes
    if (k % 2 == 1 && at_c < point) bits += 1;  // c does not reach T yet
    row.t[k] = static_cast<std::uint16_t>(bits);
  }
  return row;
}

template <InputDtype kDtype>
constexpr ThresholdTable reciprocal_table() {
  ThresholdTable table{};
  for (unsigned code = 0; code < table.size(); ++code) table[code] = reciprocal_row<kDtype>(code);
  return table;
}

}  // namespace table_detail

/// The rows as host constants.
template <InputDtype kDtype>
inline constexpr ThresholdTable kReciprocalThresholds = table_detail::reciprocal_table<kDtype>();

#if defined(__CUDACC__)
// The same rows in device memory, one copy per translation unit that uses them.
static __device__ const ThresholdTable kReciprocalThresholdsBf16Device =
    table_detail::reciprocal_table<InputDtype::kBf16>();
static __device__ const ThresholdTable kReciprocalThresholdsFp16Device =
    table_detail::reciprocal_table<InputDtype::kFp16>();
#endif

}  // namespace mlakv::codec
