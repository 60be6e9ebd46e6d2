// SPDX-License-Identifier: Apache-2.0
// The DeepSeek V4 family (block-planar fp8_ds_mla_v4 pages, token-major V4.1
// records, block-planar V4.1 pages): the CUDA writer and reader give exactly the CPU reference's bytes
// and bits. Skipped without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_support.h"
#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;

// --- the DeepSeek V4 family: block-planar V4 pages (fp8_ds_mla_v4), token-major
// V4.1 records (fp8_ds_mla_v41, nvfp4_ds_mla_v41), block-planar V4.1 pages
// (fp8_ds_mla_v41_planar, nvfp4_ds_mla_v41_planar) ---

constexpr Format kV41Formats[] = {Format::kFp8DsMlaV41, Format::kNvfp4DsMlaV41};
constexpr Format kV41PlanarFormats[] = {Format::kFp8DsMlaV41Planar, Format::kNvfp4DsMlaV41Planar};

// The engines' view of whole pages: [num_blocks, block_size, record_bytes],
// slot stride record_bytes, block stride the (padded) page plus `block_pad`;
// inputs [T, 448] and [T, 64] with `row_pad` extra elements per row. Writes on
// both backends from identical sentinel-filled buffers with guard bytes and
// compares every byte.
// The inputs given as kv_c [T, 448 + row_pad] and k_pe [T, 64 + row_pad] rows.
void expect_page_write_parity_of(Format format, DType dtype, const std::vector<std::int64_t>& slots,
                                 std::vector<std::uint16_t> kv_c, std::vector<std::uint16_t> k_pe,
                                 std::int64_t num_blocks, std::int64_t block_size, std::int64_t block_pad,
                                 std::int64_t row_pad) {
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const auto tokens = static_cast<std::int64_t>(slots.size());
  const std::int64_t nope = info.geometry.nope_dims, rope = info.geometry.rope_dims;
  const std::int64_t kv_stride = nope + row_pad, pe_stride = rope + row_pad;
  TensorView kv_view = mlakv::make_view(kv_c.data(), dtype, {tokens, nope});
  kv_view.strides[0] = kv_stride;
  TensorView pe_view = mlakv::make_view(k_pe.data(), dtype, {tokens, rope});
  pe_view.strides[0] = pe_stride;
  const std::int64_t stride_block = mlakv::page_bytes(info, block_size) + block_pad;
  constexpr std::size_t kGuard = 4096;
  std::vector<std::uint8_t> host(kGuard + static_cast<std::size_t>(num_blocks * stride_block) + kGuard,
                                 GuardedCache::kSentinel);
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(host.data() + kGuard) % 16, 0u);
  TensorView cache_view =
      mlakv::make_view(host.data() + kGuard, DType::kUInt8, {num_blocks, block_size, info.record_bytes});
  cache_view.strides[0] = stride_block;
  std::vector<std::int64_t> slot_copy = slots;
  TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {tokens});
  DeviceBuffer d_cache(host), d_kv(kv_c), d_pe(k_pe), d_slots(slot_copy);
  ASSERT_TRUE(d_cache.ok() && d_kv.ok() && d_pe.ok() && d_slots.ok());
  mlakv::write_records(format, kv_view, pe_view, cache_view, slot_view);
  mlakv::write_records(format, on_device(kv_view, d_kv), on_device(pe_view, d_pe),
                       on_device(cache_view, d_cache, kGuard), on_device(slot_view, d_slots));
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto device = d_cache.download<std::uint8_t>();
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != device[i]) {
      const auto rel = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(kGuard);
      FAIL() << info.id << ", " << mlakv::dtype_name(dtype) << ": first differing byte at cache offset " << rel
             << " (page byte " << (rel % stride_block) << "): CPU " << int(host[i]) << ", CUDA " << int(device[i]);
    }
  }
}

void expect_page_write_parity(Format format, DType dtype, const std::vector<std::int64_t>& slots, bool specials,
                              std::int64_t num_blocks, std::int64_t block_size, std::int64_t block_pad,
                              std::int64_t row_pad, std::uint64_t seed) {
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const std::int64_t rows = std::max<std::int64_t>(static_cast<std::int64_t>(slots.size()), 1);
  auto kv_c =
      random_inputs(static_cast<std::size_t>(rows * (info.geometry.nope_dims + row_pad)), dtype, seed, specials);
  auto k_pe =
      random_inputs(static_cast<std::size_t>(rows * (info.geometry.rope_dims + row_pad)), dtype, seed + 7, specials);
  expect_page_write_parity_of(format, dtype, slots, std::move(kv_c), std::move(k_pe), num_blocks, block_size, block_pad,
                              row_pad);
}

void expect_random_and_hostile_values_in_shuffled_slots_match_cpu(Format format) {
  auto slots = iota_slots(4 * 64);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(9));
  slots.resize(150);
  for (const std::int64_t skipped : {std::int64_t{-1}, std::int64_t{4 * 64}, (std::int64_t{1} << 40) + 17}) {
    slots.push_back(skipped);
  }
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (std::uint64_t seed : {1, 2, 3}) expect_page_write_parity(format, dtype, slots, seed != 1, 4, 64, 0, 0, seed);
  }
}

TEST(cuda_page_writer, fp8_ds_mla_v4_random_and_hostile_values_in_shuffled_slots_match_cpu) {
  MLAKV_REQUIRE_GPU();
  expect_random_and_hostile_values_in_shuffled_slots_match_cpu(Format::kFp8DsMlaV4);
}

TEST(cuda_page_writer, v41_records_random_and_hostile_values_in_shuffled_slots_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_random_and_hostile_values_in_shuffled_slots_match_cpu(format);
}

TEST(cuda_page_writer, v41_planar_pages_random_and_hostile_values_in_shuffled_slots_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41PlanarFormats) expect_random_and_hostile_values_in_shuffled_slots_match_cpu(format);
}

void expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(Format format) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    expect_page_write_parity(format, dtype, iota_slots(100, 3), true, 4, 32, 64, 40,
                             4);                                                   // larger block stride, row pads
    expect_page_write_parity(format, dtype, iota_slots(30), true, 7, 5, 0, 2, 5);  // 5 x 584 padded to 3456
    expect_page_write_parity(format, dtype, {}, false, 2, 64, 0, 0, 6);
    expect_page_write_parity(format, dtype, {77}, true, 2, 64, 0, 0, 7);
  }
}

TEST(cuda_page_writer, fp8_ds_mla_v4_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu) {
  MLAKV_REQUIRE_GPU();
  expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(Format::kFp8DsMlaV4);
}

TEST(cuda_page_writer, v41_records_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(format);
}

TEST(cuda_page_writer, v41_planar_pages_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41PlanarFormats) {
    expect_strided_inputs_padded_pages_and_odd_block_sizes_match_cpu(format);
  }
}

void expect_launches_of_many_tokens_match_cpu(Format format) {
  auto slots = iota_slots(20000);
  std::reverse(slots.begin(), slots.end());
  expect_page_write_parity(format, DType::kBFloat16, slots, true, 20000 / 64 + 1, 64, 0, 0, 8);
}

TEST(cuda_page_writer, fp8_ds_mla_v4_launches_of_many_tokens_match_cpu) {
  MLAKV_REQUIRE_GPU();
  expect_launches_of_many_tokens_match_cpu(Format::kFp8DsMlaV4);
}

TEST(cuda_page_writer, v41_records_launches_of_many_tokens_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) expect_launches_of_many_tokens_match_cpu(format);
}

TEST(cuda_page_writer, v41_planar_pages_launches_of_many_tokens_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41PlanarFormats) expect_launches_of_many_tokens_match_cpu(format);
}

// Runs of 16 inputs (one lane of the CUDA writer) that take the writers'
// other paths: zero and subnormal tiles (the UE8M0 amax floor), the largest
// finite inputs (a 2^127 scale, which the GPU divides by instead of
// multiplying), infs (the 0xFF / NaN scales), lone and whole NaNs (the FP4
// tile's NaN scale and zero codes), and E4M3 rounding ties.
std::vector<std::uint16_t> special_run(int kind, DType dtype, int salt) {
  const bool bf16 = dtype == DType::kBFloat16;
  const auto bits_of = [&](float x) { return bf16 ? round_bf16(x) : round_fp16(x); };
  const std::uint16_t nan = bf16 ? 0x7FC0 : 0x7E00, inf = bf16 ? 0x7F80 : 0x7C00;
  const std::uint16_t largest = bf16 ? 0x7F7F : 0x7BFF;
  std::vector<std::uint16_t> run(16);
  for (int i = 0; i < 16; ++i) {
    const float normal = std::ldexp(static_cast<float>((i * 37 + salt * 11) % 29) - 14.0f, (salt % 9) - 4);
    switch (kind) {
      case 0:
        run[i] = (i % 3 == 0) ? 0x8000 : 0x0000;
        break;  // +-0
      case 1:
        run[i] = static_cast<std::uint16_t>((i % 2 ? 0x8000 : 0) | (1 + i));
        break;  // subnormals
      case 2:
        run[i] = static_cast<std::uint16_t>(largest | (i % 2 ? 0x8000 : 0));
        break;  // +-largest
      case 3:
        run[i] = i == salt % 16 ? nan : bits_of(normal);
        break;  // one NaN
      case 4:
        run[i] = nan;
        break;  // all NaN
      case 5:
        run[i] = i == salt % 16 ? inf : bits_of(normal);
        break;  // one inf
      case 6:
        run[i] = i == 0 ? static_cast<std::uint16_t>(inf | 0x8000) : 0x0000;
        break;  // -inf and zeros
      case 7:
        run[i] =
            bits_of((i % 2 ? -1.0f : 1.0f) * (448.0f + 16.0f * static_cast<float>(i)) * std::ldexp(1.0f, salt % 5 - 2));
        break;  // E4M3 ties at the top binade
      default:
        run[i] = bits_of(normal);
        break;
    }
  }
  return run;
}

void expect_special_tiles_match_cpu(Format format) {
  SCOPED_TRACE(mlakv::format_info(format).id);
  constexpr int kKinds = 9;
  const std::int64_t tokens = 2 * 64;
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<std::uint16_t> kv_c, k_pe;
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (int lane = 0; lane < 32; ++lane) {
        // Whole tiles of one kind in the first tokens, then kinds mixed within tiles.
        const int kind = t < kKinds ? static_cast<int>(t) : static_cast<int>((t * 7 + lane) % kKinds);
        const auto run = special_run(kind, dtype, static_cast<int>(t) + lane);
        (lane < 28 ? kv_c : k_pe).insert((lane < 28 ? kv_c : k_pe).end(), run.begin(), run.end());
      }
    }
    auto slots = iota_slots(tokens);
    std::shuffle(slots.begin(), slots.end(), std::mt19937_64(12));
    expect_page_write_parity_of(format, dtype, slots, kv_c, k_pe, 2, 64, 0, 0);
  }
}

TEST(cuda_page_writer, v4_family_zero_subnormal_largest_infinite_nan_and_tie_tiles_match_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : {Format::kFp8DsMlaV4, Format::kFp8DsMlaV41, Format::kNvfp4DsMlaV41,
                              Format::kFp8DsMlaV41Planar, Format::kNvfp4DsMlaV41Planar}) {
    expect_special_tiles_match_cpu(format);
  }
}

// Where a gather's two outputs lie in one buffer: an [n, 512] row viewed as
// [:, :448] and [:, 448:] (the reader stages the row), the same rows of 513
// values (not 16-byte aligned), separate [n, 448] and [n, 64] blocks with
// 16-byte aligned rows (16-byte stores from each lane), or separate rows of
// odd strides (element stores).
enum class OutLayout { kRow512, kRow513, kSeparate, kSeparateOdd };

struct OutPlacement {
  std::int64_t kv_stride, pe_stride, pe_offset, elems;
};

OutPlacement place(OutLayout layout, std::int64_t n) {
  switch (layout) {
    case OutLayout::kRow512:
      return {512, 512, 448, n * 512};
    case OutLayout::kRow513:
      return {513, 513, 448, n * 513};
    case OutLayout::kSeparate:
      return {448, 64, n * 448, n * 512};
    case OutLayout::kSeparateOdd:
      return {449, 67, n * 449 + 1, n * 449 + 1 + n * 67};
  }
  return {};
}

// Pages written on the CPU from hostile inputs, gathered by both backends (by
// slots and through block tables) into float32 and bf16: identical bits.
void expect_page_gather_parity(Format format, OutLayout layout) {
  SCOPED_TRACE(mlakv::format_info(format).id);
  SCOPED_TRACE(static_cast<int>(layout));
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const std::int64_t tokens = 96, block_size = 16, num_blocks = tokens / block_size;
  const std::int64_t nope = 448, rope = 64;
  const std::int64_t stride_block = mlakv::page_bytes(info, block_size);
  const auto kv_c = random_inputs(tokens * nope, DType::kBFloat16, 41, true);
  const auto k_pe = random_inputs(tokens * rope, DType::kBFloat16, 42, true);
  std::vector<std::uint8_t> pages(static_cast<std::size_t>(num_blocks * stride_block), 0x33);
  TensorView cache = mlakv::make_view(pages.data(), DType::kUInt8, {num_blocks, block_size, info.record_bytes});
  cache.strides[0] = stride_block;
  std::vector<std::int64_t> all = iota_slots(tokens);
  mlakv::write_records(format,
                       mlakv::make_view(const_cast<std::uint16_t*>(kv_c.data()), DType::kBFloat16, {tokens, nope}),
                       mlakv::make_view(const_cast<std::uint16_t*>(k_pe.data()), DType::kBFloat16, {tokens, rope}),
                       cache, mlakv::make_view(all.data(), DType::kInt64, {tokens}));
  DeviceBuffer d_cache(pages);
  const std::vector<std::int64_t> slots = {5, -1, 95, 96, 0, 40, (std::int64_t{1} << 40) + 3, 17};
  const auto rows = static_cast<std::int64_t>(slots.size());
  DeviceBuffer d_slots(slots);
  std::vector<std::int64_t> slot_copy = slots;
  const TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {rows});
  const std::vector<std::int32_t> block_table = {5, 2, 0, 1, 3, -1, 9, 4, 7};  // [3, 3]
  const std::vector<std::int32_t> lens = {20, 1, 40};
  const std::vector<std::int32_t> cu = {0, 20, 22, 62};
  DeviceBuffer d_bt(block_table), d_lens(lens), d_cu(cu);
  TensorView bt = mlakv::make_view(const_cast<std::int32_t*>(block_table.data()), DType::kInt32, {3, 3});
  TensorView lv = mlakv::make_view(const_cast<std::int32_t*>(lens.data()), DType::kInt32, {3});
  TensorView cv = mlakv::make_view(const_cast<std::int32_t*>(cu.data()), DType::kInt32, {4});
  for (const DType out_dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(mlakv::dtype_name(out_dtype));
    const std::size_t esize = out_dtype == DType::kFloat32 ? 4 : 2;
    auto gather = [&](std::int64_t n, bool device, bool paged) {
      const OutPlacement at = place(layout, n);
      std::vector<std::uint8_t> out(static_cast<std::size_t>(at.elems) * esize, 0x5A);
      DeviceBuffer d_out(out);
      TensorView kv = mlakv::make_view(out.data(), out_dtype, {n, nope});
      kv.strides[0] = at.kv_stride;
      TensorView pe = mlakv::make_view(out.data() + at.pe_offset * esize, out_dtype, {n, rope});
      pe.strides[0] = at.pe_stride;
      if (device) {
        kv = on_device(kv, d_out);
        pe = on_device(pe, d_out, static_cast<std::size_t>(at.pe_offset) * esize);
      }
      const TensorView c = device ? on_device(cache, d_cache) : cache;
      if (paged) {
        mlakv::gather_records_paged(format, c, device ? on_device(bt, d_bt) : bt, device ? on_device(lv, d_lens) : lv,
                                    device ? on_device(cv, d_cu) : cv, kv, pe);
      } else {
        mlakv::gather_records(format, c, device ? on_device(slot_view, d_slots) : slot_view, kv, pe);
      }
      if (!device) return out;
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return d_out.download<std::uint8_t>();
    };
    const auto cpu = gather(rows, false, false);
    EXPECT_EQ(std::memcmp(cpu.data(), gather(rows, true, false).data(), cpu.size()), 0) << "gather by slots";
    const auto cpu_paged = gather(62, false, true);
    EXPECT_EQ(std::memcmp(cpu_paged.data(), gather(62, true, true).data(), cpu_paged.size()), 0)
        << "gather through block tables";
  }
}

constexpr OutLayout kOutLayouts[] = {OutLayout::kRow512, OutLayout::kRow513, OutLayout::kSeparate,
                                     OutLayout::kSeparateOdd};

TEST(cuda_page_reader, fp8_ds_mla_v4_gathers_into_every_output_layout_match_cpu_bit_for_bit) {
  MLAKV_REQUIRE_GPU();
  for (const OutLayout layout : kOutLayouts) expect_page_gather_parity(Format::kFp8DsMlaV4, layout);
}

TEST(cuda_page_reader, v41_records_gathers_into_every_output_layout_match_cpu_bit_for_bit) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41Formats) {
    for (const OutLayout layout : kOutLayouts) expect_page_gather_parity(format, layout);
  }
}

TEST(cuda_page_reader, v41_planar_pages_gathers_into_every_output_layout_match_cpu_bit_for_bit) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kV41PlanarFormats) {
    for (const OutLayout layout : kOutLayouts) expect_page_gather_parity(format, layout);
  }
}

}  // namespace
