// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the C++ tests: OCP value tables written from the OCP
// definitions, exact 16-bit inputs, one-call record writes, guarded caches.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mlakv/mlakv.h"

namespace mlakv::test {

// OCP E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; S.1111.111 is NaN; no inf.
inline double e4m3_value(unsigned code) {
  const unsigned e = (code >> 3) & 0xF;
  const unsigned m = code & 0x7;
  if (e == 0xF && m == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, static_cast<int>(e) - 7);
  return (code & 0x80) ? -mag : mag;
}

// OCP E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit.
inline double e2m1_value(unsigned code) {
  static constexpr double kMagnitudes[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  const double mag = kMagnitudes[code & 0x7];
  return (code & 0x8) ? -mag : mag;
}

// The code whose value is exactly v (v must be representable; +0 -> 0).
inline std::uint8_t e4m3_code_of(double v) {
  for (unsigned c = 0; c < 256; ++c) {
    if (e4m3_value(c) == v && std::signbit(e4m3_value(c)) == std::signbit(v)) return static_cast<std::uint8_t>(c);
  }
  ADD_FAILURE() << v << " is not an E4M3 value";
  return 0;
}

inline std::uint8_t e2m1_code_of(double v) {
  for (unsigned c = 0; c < 16; ++c) {
    if (e2m1_value(c) == v && std::signbit(e2m1_value(c)) == std::signbit(v)) return static_cast<std::uint8_t>(c);
  }
  ADD_FAILURE() << v << " is not an E2M1 value";
  return 0;
}

// bf16 is the upper half of an f32; the value must be exact in bf16.
inline std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  EXPECT_EQ(u & 0xFFFFu, 0u) << x << " is not exact in bf16";
  return static_cast<std::uint16_t>(u >> 16);
}

// fp16 bits of a value exact in fp16 (normal or subnormal), by construction.
inline std::uint16_t fp16_bits(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double m = std::fabs(static_cast<double>(x));
  if (m == 0.0) return sign;
  int e = 0;
  const double frac = std::frexp(m, &e);  // m = frac * 2^e, frac in [0.5, 1)
  int biased = e - 1 + 15;
  double mant = 0.0;
  if (biased <= 0) {  // subnormal: m = mant * 2^-24
    biased = 0;
    mant = std::ldexp(m, 24);
  } else {
    mant = (frac * 2.0 - 1.0) * 1024.0;
  }
  EXPECT_EQ(mant, std::floor(mant)) << x << " is not exact in fp16";
  return static_cast<std::uint16_t>(sign | (biased << 10) | static_cast<unsigned>(mant));
}

inline std::uint32_t f32_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

/// Writes tokens with write_records into a dense [1, T, record] cache and returns it.
inline std::vector<std::uint8_t> write_tokens(Format format, DType dtype, const std::vector<std::uint16_t>& kv_c,
                                              const std::vector<std::uint16_t>& k_pe, float k_scale = 1.0f) {
  const std::int64_t tokens = static_cast<std::int64_t>(k_pe.size() / 64);
  const int bytes = format_info(format).record_bytes;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(tokens * bytes), 0xAB);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) slots[t] = t;
  const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
  write_records(format, make_view(const_cast<std::uint16_t*>(kv_c.data()), dtype, {tokens, 512}),
                make_view(const_cast<std::uint16_t*>(k_pe.data()), dtype, {tokens, 64}),
                make_view(cache.data(), DType::kUInt8, {1, tokens, bytes}),
                make_view(slots.data(), DType::kInt64, {tokens}), &scale);
  return cache;
}

/// "" when equal, else the first differing byte of the first differing record.
inline std::string first_difference(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                                    int record_bytes) {
  if (got.size() != want.size()) return "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return "record " + std::to_string(i / record_bytes) + " byte " + std::to_string(i % record_bytes) + ": got " +
             std::to_string(got[i]) + ", want " + std::to_string(want[i]);
    }
  }
  return "";
}

/// A 16-byte-aligned cache with guard bytes before and after, all filled with
/// a sentinel, so a test can prove nothing outside the addressed records changed.
class GuardedCache {
 public:
  static constexpr std::size_t kGuard = 4096;
  static constexpr std::uint8_t kSentinel = 0xC5;

  GuardedCache(std::int64_t num_blocks, std::int64_t block_size, std::int64_t stride_slot, std::int64_t stride_block)
      : num_blocks_(num_blocks), block_size_(block_size), stride_slot_(stride_slot), stride_block_(stride_block) {
    const std::size_t span = static_cast<std::size_t>(num_blocks * stride_block);
    storage_.assign(kGuard + span + kGuard + 16, kSentinel);
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data()) + kGuard;
    offset_ = static_cast<std::size_t>(((base + 15) & ~std::uintptr_t{15}) -
                                       reinterpret_cast<std::uintptr_t>(storage_.data()));
    pristine_ = storage_;
  }

  TensorView view(int record_bytes) {
    TensorView v = make_view(storage_.data() + offset_, DType::kUInt8, {num_blocks_, block_size_, record_bytes});
    v.strides[0] = stride_block_;
    v.strides[1] = stride_slot_;
    return v;
  }

  std::size_t record_offset(std::int64_t slot) const {
    return offset_ +
           static_cast<std::size_t>((slot / block_size_) * stride_block_ + (slot % block_size_) * stride_slot_);
  }

  /// Byte offsets (into the storage) that differ from the pristine fill.
  std::vector<std::size_t> changed_bytes() const {
    std::vector<std::size_t> changed;
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      if (storage_[i] != pristine_[i]) changed.push_back(i);
    }
    return changed;
  }

  bool unchanged() const { return storage_ == pristine_; }
  const std::vector<std::uint8_t>& storage() const { return storage_; }

 private:
  std::int64_t num_blocks_, block_size_, stride_slot_, stride_block_;
  std::size_t offset_ = 0;
  std::vector<std::uint8_t> storage_;
  std::vector<std::uint8_t> pristine_;
};

}  // namespace mlakv::test

#include <algorithm>
#include <random>

#include "codec/element.h"

namespace mlakv::test {

inline std::uint16_t round_bf16(float x) { return codec::encode_bf16(x); }
inline std::uint16_t round_fp16(float x) { return __half_as_ushort(__float2half_rn(x)); }

/// Random 16-bit inputs: normal values with per-element magnitudes spread over
/// 2^-12..2^6; with `specials`, also NaN, +-inf, +-0, subnormals and +-448.
inline std::vector<std::uint16_t> random_inputs(std::size_t n, DType dtype, std::uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 6);
  std::uniform_int_distribution<int> pick(0, 63);
  const bool bf16 = dtype == DType::kBFloat16;
  const std::uint16_t special_bits[] = {static_cast<std::uint16_t>(bf16 ? 0x7FC0 : 0x7E00),
                                        static_cast<std::uint16_t>(bf16 ? 0x7F80 : 0x7C00),
                                        static_cast<std::uint16_t>(bf16 ? 0xFF80 : 0xFC00),
                                        0x0000,
                                        0x8000,
                                        0x0001,
                                        0x8003,
                                        static_cast<std::uint16_t>(bf16 ? 0x43E0 : 0x5F00),
                                        static_cast<std::uint16_t>(bf16 ? 0xC3E0 : 0xDF00)};
  std::vector<std::uint16_t> out(n);
  for (auto& bits : out) {
    if (specials && pick(rng) == 0) {
      bits = special_bits[static_cast<std::size_t>(pick(rng)) % std::size(special_bits)];
      continue;
    }
    float x = std::ldexp(normal(rng), exponent(rng));
    if (!bf16) x = std::clamp(x, -60000.0f, 60000.0f);
    bits = bf16 ? round_bf16(x) : round_fp16(x);
  }
  return out;
}

}  // namespace mlakv::test
