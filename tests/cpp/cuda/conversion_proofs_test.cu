// SPDX-License-Identifier: Apache-2.0
// The GPU fast paths of the conversions equal their recipes, exhaustively: the
// Hopper E2M1 encoder for all 2^32 floats, the division-free codes, the shared
// divisors, the paired amax and the bf16 decode. Each proof counts the cases it
// compared and asserts the total. Skipped without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <sstream>

#include "codec/element.h"
#include "codec/fp8_ds_mla.h"
#include "codec/fp8_e4m3.h"
#include "codec/nvfp4.h"
#include "codec/nvfp4_compare.h"
#include "cuda_support.h"
#include "e2m1_quads.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;

// --- the conversion ---

__global__ void count_e2m1_mismatches(std::uint32_t high, unsigned long long* mismatches, std::uint32_t* first,
                                      unsigned long long* checked) {
  const std::uint32_t bits = (high << 16) | (blockIdx.x * blockDim.x + threadIdx.x);
  float x;
  memcpy(&x, &bits, 4);
  if (mlakv::codec::encode_e2m1(x) != mlakv::codec::encode_e2m1_cuda(x)) {
    if (atomicAdd(mismatches, 1ull) == 0) *first = bits;
  }
  count_checked(checked, 1);
}

TEST(cuda_e2m1, device_encoder_equals_cuda_for_all_2_pow_32_floats) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long));
  DeviceBuffer first(sizeof(std::uint32_t));
  DeviceBuffer checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  for (std::uint32_t high = 0; high < (1u << 16); ++high) {
    count_e2m1_mismatches<<<256, 256>>>(high, mismatches.get<unsigned long long>(), first.get<std::uint32_t>(),
                                        checked.get<unsigned long long>());
  }
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto count = mismatches.download<unsigned long long>()[0];
  EXPECT_EQ(count, 0u) << "first mismatching float bits 0x" << std::hex << first.download<std::uint32_t>()[0];
  EXPECT_EQ(checked.download<unsigned long long>()[0], 1ull << 32);  // every f32 bit pattern
}

// The division-free static-recipe codes, with the device's bf16x2 / half2
// instructions, for every 16-bit input pair and every nonzero E4M3 scale.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_compare_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const float s = decode_e4m3(static_cast<std::uint8_t>(blockIdx.y + 1));
  const E2m1Thresholds<kDtype> thr(s);
  const std::uint32_t bits = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  const std::uint32_t pair = bits | ((bits + 1) << 16);
  const auto ref = [s](std::uint32_t b) {
    return encode_e2m1_cuda(div_rn(load_input<kDtype>(static_cast<std::uint16_t>(b)), s));
  };
  if (e2m1_pair_by_compare<kDtype>(pair, thr) != static_cast<std::uint8_t>(ref(bits) | (ref(bits + 1) << 4))) {
    atomicAdd(mismatches, 1ull);
  }
  count_checked(checked, 2);
}

TEST(cuda_e2m1, division_free_codes_equal_the_recipe_for_every_input_and_scale) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  const dim3 grid(32768 / 256, 0x7E);
  auto* m = mismatches.get<unsigned long long>();
  auto* c = checked.get<unsigned long long>();
  count_compare_mismatches<mlakv::codec::InputDtype::kBf16><<<grid, 256>>>(m, c);
  count_compare_mismatches<mlakv::codec::InputDtype::kFp16><<<grid, 256>>>(m, c);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 2ull * 0x7E * 0x10000);  // 2 dtypes x 126 scales x 2^16 inputs
}

// The fast path for groups without NaN, with the device instructions: four
// pairs per word, every non-NaN 16-bit input (NaN patterns stand in as a
// signed zero) and every nonzero scale byte s of the static recipe E2M1(x / s)
// and of the 352 record's, E2M1(RN(x * RN(1 / s))) (upstream's IEEE 1 / s),
// whose thresholds come from the table in device memory. The 352 writer's
// groups holding a NaN multiply by reciprocal_of(s): it must be that same RN(1 / s).
template <mlakv::codec::InputDtype kDtype, bool kReciprocal>
__global__ void count_quad_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const auto scode = static_cast<std::uint8_t>(blockIdx.y + 1);  // 0x01..0x7E
  const float s = decode_e4m3(scode);
  const float inv_s = __fdiv_rn(1.0f, s);
  const E2m1Thresholds<kDtype> thr =
      kReciprocal ? E2m1Thresholds<kDtype>::for_reciprocal_scale_byte(scode) : E2m1Thresholds<kDtype>(s);
  const std::uint32_t first = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
  // NaN stands in as a signed zero.
  const auto meets = [](float v) { return v == v; };
  const auto recipe = [s, inv_s](float x) { return kReciprocal ? x * inv_s : div_rn(x, s); };
  const mlakv::test::QuadCodes codes = mlakv::test::quad_codes<kDtype>(first, thr, meets, recipe);
  if (codes.got != codes.want) atomicAdd(mismatches, 1ull);
  if (kReciprocal && first == 0 && __float_as_uint(reciprocal_of(s)) != __float_as_uint(inv_s)) {
    atomicAdd(mismatches, 1ull);
  }
  atomicAdd(checked, 8ull);
}

TEST(cuda_e2m1, nan_free_quads_equal_the_static_and_reciprocal_recipes_for_every_input_and_scale) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  const dim3 grid(8192 / 256, 0x7E);
  auto* m = mismatches.get<unsigned long long>();
  auto* c = checked.get<unsigned long long>();
  count_quad_mismatches<InputDtype::kBf16, false><<<grid, 256>>>(m, c);
  count_quad_mismatches<InputDtype::kFp16, false><<<grid, 256>>>(m, c);
  count_quad_mismatches<InputDtype::kBf16, true><<<grid, 256>>>(m, c);
  count_quad_mismatches<InputDtype::kFp16, true><<<grid, 256>>>(m, c);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 4ull * 0x7E * 0x10000);  // 4 recipes x 126 scales x 2^16 inputs
}

// Runs a mismatch-counting kernel(mismatches, example, checked) on `grid` and
// expects no mismatch in exactly `cases` compared cases; `describe` turns the
// first example word into words.
template <class Kernel, class Describe>
void expect_no_mismatches(Kernel kernel, dim3 grid, const char* name, unsigned long long cases, Describe describe) {
  DeviceBuffer mismatches(sizeof(unsigned long long)), example(sizeof(std::uint32_t)),
      checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(example.get(), 0, example.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  kernel<<<grid, 256>>>(mismatches.get<unsigned long long>(), example.get<std::uint32_t>(),
                        checked.get<unsigned long long>());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u)
      << name << ": e.g. " << describe(example.download<std::uint32_t>()[0]);
  EXPECT_EQ(checked.download<unsigned long long>()[0], cases) << name << ": cases compared";
}

// How many of the 16-bit patterns [first, last] pass `keep` (the host's count
// of a proof's domain, from the same functions the kernel calls).
template <class Keep>
unsigned long long count_patterns(std::uint32_t first, std::uint32_t last, Keep keep) {
  unsigned long long n = 0;
  for (std::uint32_t bits = first; bits <= last; ++bits) n += keep(bits) ? 1 : 0;
  return n;
}

// The example word of these proofs: two patterns (the high one 15 bits) and a
// flag that one was kept; the first mismatch to get there keeps its own.
__device__ void keep_example(std::uint32_t* example, std::uint32_t high, std::uint32_t low) {
  atomicCAS(example, 0u, (high << 16) | low | 0x80000000u);
}

// An example word in words: "<high> bits 0x.., <low> 0x..".
auto describe_example(const char* high, const char* low) {
  return [high, low](std::uint32_t e) {
    std::ostringstream text;
    text << high << " bits 0x" << std::hex << ((e >> 16) & 0x7FFF) << ", " << low << " 0x" << (e & 0xFFFF);
    return text.str();
  };
}

// The pts proofs' token amax a (input pattern `bits`) and token scale st =
// a / 2688; false for the amaxes the writer never divides by (infinite a, or
// st == 0, whose groups are stored as zeros).
template <mlakv::codec::InputDtype kDtype>
__host__ __device__ bool pts_token_amax(std::uint32_t bits, float& a, float& st) {
  a = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
  st = a * mlakv::codec::kInvE4m3TimesE2m1Max;
  return a < INFINITY && st != 0.0f;
}

// The pts record's two-level recipe E2M1(RN(RN(x / st) / s)) by thresholds,
// with the device instructions: every finite nonzero token amax a (st =
// a / 2688), every nonzero E4M3 scale s, every non-NaN x with |x| <= a.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_two_level_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                           unsigned long long* checked) {
  using namespace mlakv::codec;
  float a, st;
  if (!pts_token_amax<kDtype>(blockIdx.x + 1, a, st)) return;
  const float s = decode_e4m3(static_cast<std::uint8_t>(blockIdx.y + 1));
  const auto thr = E2m1Thresholds<kDtype>::for_two_level(TokenScaleDivider(st), s);
  unsigned long long bad = 0;
  const auto meets = [a](float v) { return v == v && fabsf(v) <= a; };
  const auto recipe = [st, s](float x) { return div_rn(div_rn(x, st), s); };
  unsigned inputs = 0;
  for (std::uint32_t first = 8 * threadIdx.x; first < 0x10000u; first += 8 * blockDim.x) {
    const mlakv::test::QuadCodes codes = mlakv::test::quad_codes<kDtype>(first, thr, meets, recipe);
    if (codes.got != codes.want && bad++ == 0) keep_example(example, blockIdx.x + 1, first);
    inputs += 8;
  }
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, inputs);
}

// The token amax patterns [1, 0x7FFE] a pts proof divides by.
template <mlakv::codec::InputDtype kDtype>
unsigned long long pts_token_amaxes() {
  return count_patterns(1, 0x7FFE, [](std::uint32_t bits) {
    float a, st;
    return pts_token_amax<kDtype>(bits, a, st);
  });
}

TEST(cuda_e2m1, two_level_quads_equal_the_pts_recipe_for_every_token_amax_scale_and_input) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("token amax", "inputs from");
  const dim3 grid(0x7FFE, 0x7E);
  // every token amax x 126 scales x 2^16 inputs
  expect_no_mismatches(count_two_level_mismatches<InputDtype::kBf16>, grid, "bf16",
                       pts_token_amaxes<InputDtype::kBf16>() * 0x7E * 0x10000, describe);
  expect_no_mismatches(count_two_level_mismatches<InputDtype::kFp16>, grid, "fp16",
                       pts_token_amaxes<InputDtype::kFp16>() * 0x7E * 0x10000, describe);
}

// The pts record's group scale byte E4M3(RN(RN(g / st) / 6)), both divisions
// reciprocal products on the device, for every finite nonzero token amax a
// (st = a / 2688) and every non-negative group amax g <= a of the input type.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_two_level_scale_byte_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                                      unsigned long long* checked) {
  using namespace mlakv::codec;
  float a, st;
  if (!pts_token_amax<kDtype>(blockIdx.x + 1, a, st)) return;
  const TokenScaleDivider divide(st);
  unsigned long long bad = 0;
  unsigned groups = 0;
  for (std::uint32_t bits = threadIdx.x; bits <= blockIdx.x + 1; bits += blockDim.x) {
    const float g = load_input<kDtype>(static_cast<std::uint16_t>(bits));  // non-negative patterns rise with bits
    if (two_level_scale_byte(g, divide) != encode_e4m3(__fdiv_rn(__fdiv_rn(g, st), kE2m1Max)) && bad++ == 0) {
      keep_example(example, blockIdx.x + 1, bits);
    }
    ++groups;
  }
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, groups);
}

// Sum over the token amaxes a pts proof divides by (patterns b) of the group amaxes [0, b].
template <mlakv::codec::InputDtype kDtype>
unsigned long long pts_group_amaxes() {
  unsigned long long n = 0;
  for (std::uint32_t bits = 1; bits <= 0x7FFE; ++bits) {
    float a, st;
    if (pts_token_amax<kDtype>(bits, a, st)) n += bits + 1;
  }
  return n;
}

// The 352 record's scale byte on the device (amax / 6 as a reciprocal product
// with a residual step, then the floor and the bump) against ABI.md's literal
// recipe with one IEEE division, for every non-negative 16-bit amax, inf included.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_rounded_up_scale_byte_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                                       unsigned long long* checked) {
  using namespace mlakv::codec;
  const std::uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;  // 0..0x7FFF
  const float amax = load_input<kDtype>(static_cast<std::uint16_t>(bits));
  if (amax != amax) return;  // an amax is never NaN
  const float sf = fmaxf(__fdiv_rn(amax, 6.0f), 0x1p-9f);
  auto want = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(sf, __NV_SATFINITE, __NV_E4M3));
  if (decode_e4m3(want) < sf && want < 0x7E) ++want;
  if (rounded_up_scale_byte(divide_amax_by_e2m1_max(amax)) != want) {
    atomicAdd(mismatches, 1ull);
    keep_example(example, 0, bits);
  }
  count_checked(checked, 1);
}

// The non-NaN patterns of [0, 0x7FFF]: every non-negative amax, inf included.
template <mlakv::codec::InputDtype kDtype>
unsigned long long non_negative_amaxes() {
  return count_patterns(0, 0x7FFF, [](std::uint32_t bits) {
    const float a = mlakv::codec::load_input<kDtype>(static_cast<std::uint16_t>(bits));
    return a == a;
  });
}

TEST(cuda_division, rounded_up_scale_bytes_equal_the_352_recipe_for_every_amax) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("unused", "amax");
  expect_no_mismatches(count_rounded_up_scale_byte_mismatches<InputDtype::kBf16>, dim3(0x8000 / 256), "bf16",
                       non_negative_amaxes<InputDtype::kBf16>(), describe);
  expect_no_mismatches(count_rounded_up_scale_byte_mismatches<InputDtype::kFp16>, dim3(0x8000 / 256), "fp16",
                       non_negative_amaxes<InputDtype::kFp16>(), describe);
}

TEST(cuda_division, two_level_scale_bytes_equal_the_recipe_for_every_group_and_token_amax) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("token amax", "group amax bits");
  const dim3 grid(0x7FFE);
  expect_no_mismatches(count_two_level_scale_byte_mismatches<InputDtype::kBf16>, grid, "bf16",
                       pts_group_amaxes<InputDtype::kBf16>(), describe);
  expect_no_mismatches(count_two_level_scale_byte_mismatches<InputDtype::kFp16>, grid, "fp16",
                       pts_group_amaxes<InputDtype::kFp16>(), describe);
}

// The paired amax (half-precision max on the device) against the scalar fold,
// and the NaN flag and the value of its one-max twin, for every pair of 16-bit inputs.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_pair_amax_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const std::uint32_t high = blockIdx.x;
  for (std::uint32_t low = threadIdx.x; low < 0x10000u; low += blockDim.x) {
    const std::uint16_t bits[2] = {static_cast<std::uint16_t>(low), static_cast<std::uint16_t>(high)};
    bool nan_free = false;
    const float got = pair_amax<kDtype, 2>(bits);
    const float got_or_nan = pair_amax_or_nan<kDtype, 2>(bits, &nan_free);
    const float a = load_input<kDtype>(bits[0]);
    const float b = load_input<kDtype>(bits[1]);
    const float want = fold_amax(fold_amax(0.0f, a), b);
    const bool want_nan_free = a == a && b == b;
    if (__float_as_uint(got) != __float_as_uint(want) || nan_free != want_nan_free ||
        (want_nan_free && __float_as_uint(got_or_nan) != __float_as_uint(want))) {
      atomicAdd(mismatches, 1ull);
    }
  }
  count_checked(checked, 0x10000u / blockDim.x);  // the pairs of this thread's lows
}

TEST(cuda_amax, paired_amax_equals_the_scalar_fold_for_every_pair_of_inputs) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  auto* m = mismatches.get<unsigned long long>();
  auto* c = checked.get<unsigned long long>();
  count_pair_amax_mismatches<mlakv::codec::InputDtype::kBf16><<<0x10000, 256>>>(m, c);
  count_pair_amax_mismatches<mlakv::codec::InputDtype::kFp16><<<0x10000, 256>>>(m, c);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 2ull << 32);  // 2 dtypes x every pair of 16-bit inputs
}

// with_divisor on the GPU (an FMA-corrected reciprocal product) gives the
// E4M3 code of the correctly rounded quotient for every 16-bit input x and
// every divisor mlakv derives from an amax a >= |x| of the same type: the
// fp8_ds_mla tile scale max(a / 448, FLT_MIN) and the RoPE scale a * (1/448).
template <mlakv::codec::InputDtype kDtype, bool kTileScale>
__global__ void count_divisor_mismatches(unsigned long long* mismatches, std::uint32_t* example,
                                         unsigned long long* checked) {
  using namespace mlakv::codec;
  const float a = load_input<kDtype>(static_cast<std::uint16_t>(blockIdx.y));  // non-negative amax patterns
  if (!(a == a)) return;
  const float d = kTileScale ? CodecFp8DsMla::tile_scale(a) : a * kInvE4m3Max;
  if (d == 0.0f) return;  // the RoPE guard stores 0 without dividing
  unsigned long long bad = 0;
  unsigned visited = 0;  // inputs x looked at (those with |x| > a are outside the domain)
  with_divisor(d, [&](auto divide) {
    for (std::uint32_t bits = threadIdx.x + blockIdx.x * blockDim.x; bits < 0x10000u; bits += gridDim.x * blockDim.x) {
      ++visited;
      const float x = load_input<kDtype>(static_cast<std::uint16_t>(bits));
      if (fabsf(x) > a) continue;  // |x| <= amax by construction
      if (encode_e4m3(divide(x)) != encode_e4m3(__fdiv_rn(x, d)) && bad++ == 0) keep_example(example, blockIdx.y, bits);
    }
  });
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, visited);
}

// The amax patterns [0, 0x7FFF] a divisor proof divides by (non-NaN, d != 0), times the 2^16 inputs each visits.
template <mlakv::codec::InputDtype kDtype, bool kTileScale>
unsigned long long divisor_cases() {
  using namespace mlakv::codec;
  return 0x10000ull * count_patterns(0, 0x7FFF, [](std::uint32_t bits) {
           const float a = load_input<kDtype>(static_cast<std::uint16_t>(bits));
           return a == a && (kTileScale ? CodecFp8DsMla::tile_scale(a) : a * kInvE4m3Max) != 0.0f;
         });
}

TEST(cuda_division, shared_divisor_gives_the_correctly_rounded_codes_on_its_domain) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const auto describe = describe_example("amax", "x bits");
  const dim3 grid(16, 0x8000);  // x in the grid-stride loop, every non-negative amax pattern in y
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kBf16, true>, grid, "bf16 tile scale",
                       divisor_cases<InputDtype::kBf16, true>(), describe);
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kBf16, false>, grid, "bf16 rope scale",
                       divisor_cases<InputDtype::kBf16, false>(), describe);
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kFp16, true>, grid, "fp16 tile scale",
                       divisor_cases<InputDtype::kFp16, true>(), describe);
  expect_no_mismatches(count_divisor_mismatches<InputDtype::kFp16, false>, grid, "fp16 rope scale",
                       divisor_cases<InputDtype::kFp16, false>(), describe);
}

// fp8_e4m3's division by a k_scale on the GPU (with_scale_divisor: a product
// for powers of two, quotient_for_e4m3 for the others) gives the E4M3 code of
// the correctly rounded quotient for every 16-bit input x and every f32 d of
// three binades: [2^-64, 2^-63) and [2^63, 2^64), the ends of the range the
// residual step is taken on, and [1, 2). Within that range a quotient that
// rounds to a code other than 0 or 448 has only normal intermediates, so
// which binade d lies in does not change whether it is right.
template <mlakv::codec::InputDtype kDtype>
__global__ void count_k_scale_mismatches(std::uint32_t binade, unsigned long long* mismatches, std::uint32_t* example,
                                         unsigned long long* checked) {
  using namespace mlakv::codec;
  const std::uint32_t d_bits = binade | (blockIdx.x * blockDim.x + threadIdx.x);
  const float d = __uint_as_float(d_bits);
  unsigned long long bad = 0;
  unsigned inputs = 0;
  with_scale_divisor(d, [&](auto divide) {
    for (std::uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
      ++inputs;
      const float x = load_input<kDtype>(static_cast<std::uint16_t>(bits));
      if (encode_e4m3(divide(x)) != encode_e4m3(__fdiv_rn(x, d)) && bad++ == 0 &&
          atomicCAS(example, 0u, d_bits) == 0u) {
        example[1] = bits;
      }
    }
  });
  if (bad) atomicAdd(mismatches, bad);
  count_checked(checked, inputs);
}

TEST(cuda_division, k_scale_quotients_give_the_codes_of_the_division_for_every_input) {
  MLAKV_REQUIRE_GPU();
  using mlakv::codec::InputDtype;
  const std::uint32_t binades[] = {0x1F800000u, 0x3F800000u, 0x5F000000u};
  for (const bool bf16 : {true, false}) {
    for (const std::uint32_t binade : binades) {
      DeviceBuffer mismatches(sizeof(unsigned long long)), example(2 * sizeof(std::uint32_t)),
          checked(sizeof(unsigned long long));
      cudaMemset(mismatches.get(), 0, mismatches.bytes());
      cudaMemset(example.get(), 0, example.bytes());
      cudaMemset(checked.get(), 0, checked.bytes());
      const unsigned blocks = (1u << 23) / 256;  // one thread per mantissa of d
      auto* m = mismatches.get<unsigned long long>();
      auto* c = checked.get<unsigned long long>();
      if (bf16) {
        count_k_scale_mismatches<InputDtype::kBf16><<<blocks, 256>>>(binade, m, example.get<std::uint32_t>(), c);
      } else {
        count_k_scale_mismatches<InputDtype::kFp16><<<blocks, 256>>>(binade, m, example.get<std::uint32_t>(), c);
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto e = example.download<std::uint32_t>();
      EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u)
          << (bf16 ? "bf16" : "fp16") << ": e.g. k_scale bits 0x" << std::hex << e[0] << ", x bits 0x" << e[1];
      EXPECT_EQ(checked.download<unsigned long long>()[0], 1ull << (23 + 16));  // every mantissa of d x every input
    }
  }
}

// decode_latent_group_bf16 on the GPU (bf16 byte permutes and bf16x2
// products) equals encode_bf16(decode_E2M1 * scale) for every code and scale
// byte, without an outer scale (432, 368, 352) and with pts outer scales.
__global__ void count_bf16_decode_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  alignas(16) std::uint8_t record[16] = {};
  const auto sbyte = static_cast<std::uint8_t>(threadIdx.x);
  const auto code = static_cast<std::uint8_t>(blockIdx.x);
  // y: 0 no outer scale, 1.. per-token outer scales (pts): tiny to huge, inf, NaN, -0.
  const float outers[] = {1.0f, 0.0123f, 3.0e-9f, 7.5e11f, 1.0f / 2688.0f, INFINITY, NAN, -0.0f};
  const float outer = outers[blockIdx.y];
  for (int i = 0; i < 8; ++i) record[i] = static_cast<std::uint8_t>(code | (((code + i) & 0xF) << 4));
  std::uint16_t got[16];
  decode_latent_group_bf16(0, record, sbyte, outer, got);
  const float s = decode_e4m3(sbyte);
  for (int j = 0; j < 16; ++j) {
    const std::uint8_t c = j % 2 == 0 ? code : static_cast<std::uint8_t>((code + j / 2) & 0xF);
    if (got[j] != encode_bf16(decode_e2m1(c) * s * outer)) atomicAdd(mismatches, 1ull);
  }
  count_checked(checked, 16);
}

TEST(cuda_e2m1, bf16_decode_equals_the_f32_path_for_every_code_and_scale) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  count_bf16_decode_mismatches<<<dim3(16, 8), 256>>>(mismatches.get<unsigned long long>(),
                                                     checked.get<unsigned long long>());
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0],
            16ull * 8 * 256 * 16);  // codes x outer scales x scale bytes x values
}

// encode_bf16x2 on the GPU (one paired conversion, the NaN rule after it)
// equals encode_bf16 of each half, for every float in the low half and, by a
// bijection of the bits, every float in the high half.
__global__ void count_bf16x2_mismatches(std::uint32_t high, unsigned long long* mismatches, std::uint32_t* first,
                                        unsigned long long* checked) {
  const std::uint32_t bits = (high << 16) | (blockIdx.x * blockDim.x + threadIdx.x);
  const std::uint32_t other = bits * 2654435761u;  // odd multiplier: a bijection of the 2^32 patterns
  float lo, hi;
  memcpy(&lo, &bits, 4);
  memcpy(&hi, &other, 4);
  const std::uint32_t want = static_cast<std::uint32_t>(mlakv::codec::encode_bf16(lo)) |
                             static_cast<std::uint32_t>(mlakv::codec::encode_bf16(hi)) << 16;
  if (mlakv::codec::encode_bf16x2(lo, hi) != want) {
    if (atomicAdd(mismatches, 1ull) == 0) *first = bits;
  }
  count_checked(checked, 1);
}

TEST(cuda_bf16, paired_encoding_equals_the_scalar_one_for_all_2_pow_32_floats_in_each_half) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long));
  DeviceBuffer first(sizeof(std::uint32_t));
  DeviceBuffer checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  for (std::uint32_t high = 0; high < (1u << 16); ++high) {
    count_bf16x2_mismatches<<<256, 256>>>(high, mismatches.get<unsigned long long>(), first.get<std::uint32_t>(),
                                          checked.get<unsigned long long>());
  }
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u)
      << "first mismatching low-half bits 0x" << std::hex << first.download<std::uint32_t>()[0];
  EXPECT_EQ(checked.download<unsigned long long>()[0], 1ull << 32);
}

// fp8_ds_mla's paired decode on the GPU equals encode_bf16 of the scalar
// decode for every pair of codes and a spread of tile scales.
__global__ void count_fp8_ds_mla_pair_decode_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using mlakv::codec::CodecFp8DsMla;
  using Spec = CodecFp8DsMla::Spec;
  const float scales[] = {1.0f, 1.0f / 448.0f, 0.0123f, 3.0e-30f, 7.5e30f, FLT_MIN, INFINITY, NAN};
  alignas(16) std::uint8_t record[Spec::kRecordBytes] = {};
  const float scale = scales[blockIdx.y];
  memcpy(record + Spec::kTileScales.offset, &scale, sizeof(scale));
  for (int i = 0; i < mlakv::codec::kLatentPerLane; i += 2) {
    record[Spec::kLatent.offset + i] = static_cast<std::uint8_t>(blockIdx.x);
    record[Spec::kLatent.offset + i + 1] = static_cast<std::uint8_t>(threadIdx.x);
  }
  const mlakv::codec::DecodeParams params{};
  float kv[mlakv::codec::kLatentPerLane];
  float pe[mlakv::codec::kRopePerLane];
  CodecFp8DsMla::decode_lane(0, record, params, kv, pe);
  std::uint16_t got[mlakv::codec::kLatentPerLane];
  std::uint16_t got_pe[mlakv::codec::kRopePerLane];
  CodecFp8DsMla::decode_lane_bf16(0, record, params, got, got_pe);
  for (int i = 0; i < 2; ++i) {
    if (got[i] != mlakv::codec::encode_bf16(kv[i])) atomicAdd(mismatches, 1ull);
  }
  count_checked(checked, 2);
}

// fp8_e4m3's paired decode on the GPU equals encode_bf16 of the scalar decode
// for every pair of codes in every latent and RoPE position and a spread of
// k_scale values (NaN and infinity included).
__global__ void count_fp8_e4m3_pair_decode_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using mlakv::codec::CodecFp8E4m3;
  using Spec = CodecFp8E4m3::Spec;
  const float scales[] = {1.0f, 0.5f, 0.0123f, 3.0e-30f, 7.5e30f, FLT_MIN, INFINITY, NAN};
  alignas(16) std::uint8_t record[Spec::kRecordBytes] = {};
  constexpr int kLane = 5;  // any lane: its codes sit at lane-dependent offsets
  for (int i = 0; i < mlakv::codec::kLatentPerLane; i += 2) {
    record[Spec::kLatent.offset + kLane * mlakv::codec::kLatentPerLane + i] = static_cast<std::uint8_t>(blockIdx.x);
    record[Spec::kLatent.offset + kLane * mlakv::codec::kLatentPerLane + i + 1] =
        static_cast<std::uint8_t>(threadIdx.x);
  }
  record[Spec::kRope.offset + kLane * mlakv::codec::kRopePerLane] = static_cast<std::uint8_t>(blockIdx.x);
  record[Spec::kRope.offset + kLane * mlakv::codec::kRopePerLane + 1] = static_cast<std::uint8_t>(threadIdx.x);
  mlakv::codec::DecodeParams params{};
  params.k_scale = scales[blockIdx.y];
  float kv[mlakv::codec::kLatentPerLane];
  float pe[mlakv::codec::kRopePerLane];
  CodecFp8E4m3::decode_lane(kLane, record, params, kv, pe);
  std::uint16_t got[mlakv::codec::kLatentPerLane];
  std::uint16_t got_pe[mlakv::codec::kRopePerLane];
  CodecFp8E4m3::decode_lane_bf16(kLane, record, params, got, got_pe);
  for (int i = 0; i < mlakv::codec::kLatentPerLane; ++i) {
    if (got[i] != mlakv::codec::encode_bf16(kv[i])) atomicAdd(mismatches, 1ull);
  }
  for (int i = 0; i < mlakv::codec::kRopePerLane; ++i) {
    if (got_pe[i] != mlakv::codec::encode_bf16(pe[i])) atomicAdd(mismatches, 1ull);
  }
  count_checked(checked, mlakv::codec::kLatentPerLane + mlakv::codec::kRopePerLane);
}

// Runs a pair-decode proof kernel over every code pair (grid.x, block) and its
// 8 scales (grid.y), and expects `values` comparisons a thread, none failing.
void expect_pair_decode_proof(void (*proof)(unsigned long long*, unsigned long long*), unsigned long long values) {
  DeviceBuffer mismatches(sizeof(unsigned long long)), checked(sizeof(unsigned long long));
  cudaMemset(mismatches.get(), 0, mismatches.bytes());
  cudaMemset(checked.get(), 0, checked.bytes());
  proof<<<dim3(256, 8), 256>>>(mismatches.get<unsigned long long>(), checked.get<unsigned long long>());
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches.download<unsigned long long>()[0], 0u);
  EXPECT_EQ(checked.download<unsigned long long>()[0], 256ull * 256 * 8 * values);  // code pairs x scales x values
}

TEST(cuda_e4m3, paired_fp8_ds_mla_decode_equals_the_scalar_decode_for_every_code_pair) {
  MLAKV_REQUIRE_GPU();
  expect_pair_decode_proof(count_fp8_ds_mla_pair_decode_mismatches, 2);
}

TEST(cuda_e4m3, paired_fp8_e4m3_decode_equals_the_scalar_decode_for_every_code_pair) {
  MLAKV_REQUIRE_GPU();
  expect_pair_decode_proof(count_fp8_e4m3_pair_decode_mismatches, 18);
}

}  // namespace
