// SPDX-License-Identifier: Apache-2.0
// NVFP4 E2M1 codes without a division per value, for the GPU: the static
// recipe below, and per-group thresholds for the reciprocal (352) and two-level
// (pts) recipes (E2m1Thresholds).
//
// For a 16-bit input x and a scale s > 0 that is an E4M3 value, fl(x / s)
// passes a rounding decision point T of the E2M1 grid exactly when |x| passes
// s * T: s * T has at most 7 significant bits and lies inside x's exponent
// range, so it is itself a value of x's type, and rounding x / s to f32 moves
// it by far less than one step of that type. The code is therefore the number
// of decision points |x| passes, counted two values at a time with bf16x2 /
// half2 comparisons. An exhaustive test over every 16-bit x and every nonzero
// E4M3 s proves it equals E2M1(x / s) as the CPU reference computes it.
#pragma once

#include <cstdint>

#include "codec/pairs.h"
#include "codec/reciprocal_threshold_table.h"

namespace mlakv::codec {

/// x / st for the pts record's token scale st (> 0, finite) and the values
/// of its token: x <= 2688 st. The CPU divides; the GPU multiplies by
/// r = reciprocal_of(st) and corrects with one FMA residual step (Markstein), one
/// reciprocal for all of a lane's divisions. Below st = 2^-64 a residual that
/// matters could underflow, so there x and st are both first scaled by 2^126:
/// the same real quotient, every operand and residual normal. Exhaustive GPU
/// tests prove the scale bytes and codes computed with it.
class TokenScaleDivider {
 public:
  MLAKV_HD explicit TokenScaleDivider(float st) : st_(st) {
#if defined(__CUDA_ARCH__)
    prescale_ = st < 0x1p-64f ? 0x1p126f : 1.0f;
    divisor_ = st * prescale_;  // exact: a power-of-two scaling into the normal range
    reciprocal_ = reciprocal_of(divisor_);
#endif
  }

  MLAKV_HD float token_scale() const { return st_; }

  MLAKV_HD float operator()(float x) const {
#if defined(__CUDA_ARCH__)
    return quotient_by_reciprocal(x * prescale_, divisor_, reciprocal_);
#else
    return div_rn(x, st_);
#endif
  }

 private:
  float st_;
#if defined(__CUDA_ARCH__)
  float prescale_;
  float divisor_;
  float reciprocal_;
#endif
};

/// The inputs at which the code of |x| steps up, one per decision point T of
/// RNE onto {0, .5, 1, 1.5, 2, 3, 4, 6} (e2m1_decision_point): the code passes
/// T (even k) when |x| > t[k], (odd k) when |x| >= t[k].
template <InputDtype kDtype>
struct E2m1Thresholds {
  typename PairOps<kDtype>::Vec t[7];

  /// The static recipe E2M1(x / s), s > 0: t[k] = s * T, exact in x's type.
  MLAKV_HD explicit E2m1Thresholds(float s) {
    MLAKV_UNROLL
    for (int k = 0; k < 7; ++k) t[k] = PairOps<kDtype>::splat(s * e2m1_decision_point(k));  // exact products
  }

  /// The 352 record's recipe E2M1(RN(x * inv_s)), inv_s = RN(1 / s),
  /// s = E4M3(sbyte), sbyte in [0x01, 0x7E]: its scale byte's row of the table
  /// built at compile time (codec/reciprocal_threshold_table.h), one 16-byte load.
  MLAKV_HD static E2m1Thresholds for_reciprocal_scale_byte(std::uint8_t sbyte) {
    std::uint32_t words[4];
#if defined(__CUDA_ARCH__)
    const ThresholdTable& table =
        kDtype == InputDtype::kBf16 ? kReciprocalThresholdsBf16Device : kReciprocalThresholdsFp16Device;
    const uint4 row = __ldg(reinterpret_cast<const uint4*>(&table[sbyte]));
    words[0] = row.x;
    words[1] = row.y;
    words[2] = row.z;
    words[3] = row.w;
#else
    memcpy(words, kReciprocalThresholds<kDtype>[sbyte].t, sizeof(words));
#endif
    E2m1Thresholds thr;
    MLAKV_UNROLL
    for (int k = 0; k < 7; ++k) {
      thr.t[k] = vec_from_bits<typename PairOps<kDtype>::Vec>(both_halves(words[k / 2], k % 2));
    }
    return thr;
  }

  /// The two-level recipe of the pts record, E2M1(RN(RN(x / st) / s)) with
  /// st > 0 finite and s > 0 an E4M3 value, decided with one division per
  /// threshold: s has at most 4 significant bits and T at most 3, so P = s * T
  /// is an f32, and the reals s * (T +- half a step of f32) lie strictly
  /// between P and its f32 neighbours; hence for every f32 y, RN(y / s) passes
  /// T exactly when y passes P (> for even k, >= for odd k), and the code is
  /// that of y = RN(x / st) against P. y does not decrease as x grows, and the
  /// real boundary T * s * st lies about half a step of x's type or more
  /// (>= 2^-12 relative) from every input of the type but c, the input nearest
  /// to it; the divider's quotient is within 2^-23, so only c can fall on
  /// either side, and y at c tells which (next_to).
  MLAKV_HD static E2m1Thresholds for_two_level(const TokenScaleDivider& divide, float s) {
    const float st = divide.token_scale();
    return next_to([s, st](float point) { return s * point * st; }, divide, [s](float point) { return s * point; });
  }

 private:
  E2m1Thresholds() = default;

  /// Thresholds of a recipe whose code passes T where value(x), which never
  /// decreases as x grows, passes bound(T): each is the input c = candidate(T)
  /// of x's type or its neighbour, as value(c) tells: the last input whose
  /// value stays <= bound(T) (even k) or the first whose value reaches it (odd k).
  template <class Candidate, class Value, class Bound>
  MLAKV_HD static E2m1Thresholds next_to(Candidate candidate, Value value, Bound bound) {
    E2m1Thresholds thr;
    MLAKV_UNROLL
    for (int k = 0; k < 7; ++k) {
      const float point = e2m1_decision_point(k);
      std::uint32_t bits = nearest_bits<kDtype>(candidate(point));
      const float at_c = value(load_input<kDtype>(static_cast<std::uint16_t>(bits)));
      if (k % 2 == 0) {
        if (at_c > bound(point)) bits -= 1;  // c already passes: the input below is the last that does not
      } else {
        if (at_c < bound(point)) bits += 1;  // c does not reach T yet: the input above does
      }
      thr.t[k] = vec_from_bits<typename PairOps<kDtype>::Vec>(both_halves(bits));
    }
    return thr;
  }
};

/// The number of thresholds each half of `a` (magnitudes) passes, plus the
/// count base (128 in bf16, 1024 in fp16), whose low bits then hold the count.
template <InputDtype kDtype>
MLAKV_HD std::uint32_t count_decision_points(typename PairOps<kDtype>::Vec a, const E2m1Thresholds<kDtype>& thr) {
  auto count = vec_from_bits<typename PairOps<kDtype>::Vec>(PairOps<kDtype>::kCountBase);
  // Ties go to the even code: strict where the code below is even, not where it is odd.
  count = __hadd2(count, __hgt2(a, thr.t[0]));
  count = __hadd2(count, __hge2(a, thr.t[1]));
  count = __hadd2(count, __hgt2(a, thr.t[2]));
  count = __hadd2(count, __hge2(a, thr.t[3]));
  count = __hadd2(count, __hgt2(a, thr.t[4]));
  count = __hadd2(count, __hge2(a, thr.t[5]));
  count = __hadd2(count, __hgt2(a, thr.t[6]));
  return bits_of(count);
}

/// Codes of the two values in `pair` (element 2i low, 2i+1 high), packed as one byte.
template <InputDtype kDtype>
MLAKV_HD std::uint8_t e2m1_pair_by_compare(std::uint32_t pair, const E2m1Thresholds<kDtype>& thr) {
  using Ops = PairOps<kDtype>;
  using Vec = typename Ops::Vec;
  const Vec x = vec_from_bits<Vec>(pair);
  // NaN counts as +inf (code 7) and loses its sign below; fmin-style min drops NaN.
  const Vec a = __hmin2(__habs2(x), vec_from_bits<Vec>(Ops::kInf));
  const std::uint32_t count = count_decision_points<kDtype>(a, thr);
  const std::uint32_t nan = (bits_of(__hisnan2(x)) >> Ops::kNanShift) & 0x00080008u;
  const std::uint32_t sign = (pair >> 12) & 0x00080008u & ~nan;
  const std::uint32_t codes = (count & 0x00070007u) | sign;
  return static_cast<std::uint8_t>((codes & 0xFu) | ((codes >> 12) & 0xF0u));
}

/// The codes of four pairs (8 values, none of them NaN) as one word, value 0
/// in the low nibble. Each pair's count starts at 128 (bf16; 1024 for fp16),
/// so the low byte of each half is the code's magnitude; byte permutes gather
/// magnitudes and signs four values at a time and one shift packs them: 40 %
/// fewer integer-pipe instructions than e2m1_pair_by_compare, the writers'
/// bottleneck. A NaN would count as 0, so groups holding one take
/// e2m1_pair_by_compare.
template <InputDtype kDtype>
MLAKV_HD std::uint32_t e2m1_quad_by_compare(const std::uint32_t* pairs, const E2m1Thresholds<kDtype>& thr) {
  using Vec = typename PairOps<kDtype>::Vec;
  std::uint32_t counts[4];
  MLAKV_UNROLL
  for (int i = 0; i < 4; ++i) counts[i] = count_decision_points<kDtype>(__habs2(vec_from_bits<Vec>(pairs[i])), thr);
  // Codes 0..3 (4..7), a byte each: magnitude, and bit 3 from the sign.
  const std::uint32_t x01 = even_bytes(counts[0], counts[1]) | (sign_bytes(pairs[0], pairs[1]) & 0x08080808u);
  const std::uint32_t x23 = even_bytes(counts[2], counts[3]) | (sign_bytes(pairs[2], pairs[3]) & 0x08080808u);
  return even_bytes(x01 | (x01 >> 4), x23 | (x23 >> 4));
}

/// The 16 codes of a group whose inputs hold no NaN.
template <InputDtype kDtype>
MLAKV_HD void encode_e2m1_group_nan_free(const std::uint16_t* bits, const E2m1Thresholds<kDtype>& thr,
                                         std::uint8_t* packed) {
  std::uint32_t pairs[8];
  MLAKV_UNROLL
  for (int i = 0; i < 8; ++i) pairs[i] = input_pair(bits, i);
  const std::uint32_t words[2] = {e2m1_quad_by_compare<kDtype>(pairs, thr),
                                  e2m1_quad_by_compare<kDtype>(pairs + 4, thr)};
  std::uint8_t bytes[8];
  memcpy(bytes, words, sizeof(bytes));
  store_aligned<8>(packed, bytes);
}

/// The 16 codes of a group with scale s (s == 0: all codes 0).
template <InputDtype kDtype>
MLAKV_HD void encode_e2m1_group_by_compare(const std::uint16_t* bits, float s, std::uint8_t* packed) {
  std::uint8_t bytes[8] = {};
  if (s != 0.0f) {
    const E2m1Thresholds<kDtype> thr(s);
    MLAKV_UNROLL
    for (int i = 0; i < 8; ++i) {
      bytes[i] = e2m1_pair_by_compare<kDtype>(input_pair(bits, i), thr);
    }
  }
  store_aligned<8>(packed, bytes);
}

}  // namespace mlakv::codec
