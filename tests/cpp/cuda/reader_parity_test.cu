// SPDX-License-Identifier: Apache-2.0
// The CUDA readers (by slots and through block tables) give exactly the CPU
// reference's output bits in every format and output dtype. Skipped without a
// CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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

// --- readers ---

class cuda_reader : public ::testing::TestWithParam<std::tuple<Format, DType>> {
 protected:
  void SetUp() override { MLAKV_REQUIRE_GPU(); }
};

// Writes 96 hostile tokens on the CPU, then gathers with both backends (by
// slots and through a block table) and compares the output bits.
TEST_P(cuda_reader, gathers_match_cpu_bit_for_bit) {
  const auto [format, out_dtype] = GetParam();
  const mlakv::FormatInfo& info = mlakv::format_info(format);
  const DType in_dtype = dtype_for(format, DType::kBFloat16);
  const std::int64_t tokens = 96, block_size = 16;
  const auto kv_c = random_inputs(tokens * 512, in_dtype, 41, true);
  const auto k_pe = random_inputs(tokens * 64, in_dtype, 42, true);
  auto records = write_tokens(format, in_dtype, kv_c, k_pe, 0.0625f);
  TensorView cache =
      mlakv::make_view(records.data(), DType::kUInt8, {tokens / block_size, block_size, info.record_bytes});
  const std::vector<std::int64_t> slots = {5, -1, 95, 96, 0, 40, (std::int64_t{1} << 40) + 3, 17};
  const auto rows = static_cast<std::int64_t>(slots.size());
  float k_scale = 0.0625f;
  TensorView scale = mlakv::make_view(&k_scale, DType::kFloat32, {1});
  mlakv::GatherOptions options;
  options.scale = &scale;
  options.rope_dtype = in_dtype;
  const std::size_t esize = out_dtype == DType::kFloat32 ? 4 : 2;

  // One [rows, 576] buffer, viewed as [:, :512] and [:, 512:].
  auto run = [&](const TensorView& cache_view, auto&& gather_into, bool device) {
    std::vector<std::uint8_t> out(rows * 576 * esize, 0x5A);
    DeviceBuffer d_out(out);
    TensorView kv = mlakv::make_view(out.data(), out_dtype, {rows, 512});
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(out.data() + 512 * esize, out_dtype, {rows, 64});
    pe.strides[0] = 576;
    if (device) {
      kv = on_device(kv, d_out);
      pe = on_device(pe, d_out, 512 * esize);
    }
    gather_into(cache_view, kv, pe);
    if (device) {
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      out = d_out.download<std::uint8_t>();
    }
    return out;
  };
  DeviceBuffer d_cache(records), d_slots(slots), d_scale(std::vector<float>{k_scale});
  const TensorView d_scale_view = on_device(scale, d_scale);
  std::vector<std::int64_t> slot_copy = slots;
  const TensorView slot_view = mlakv::make_view(slot_copy.data(), DType::kInt64, {rows});
  const auto cpu = run(
      cache, [&](auto c, auto kv, auto pe) { mlakv::gather_records(format, c, slot_view, kv, pe, options); }, false);
  mlakv::GatherOptions d_options = options;
  d_options.scale = &d_scale_view;
  const auto gpu = run(
      on_device(cache, d_cache),
      [&](auto c, auto kv, auto pe) {
        mlakv::gather_records(format, c, on_device(slot_view, d_slots), kv, pe, d_options);
      },
      true);
  EXPECT_EQ(std::memcmp(cpu.data(), gpu.data(), cpu.size()), 0) << "gather by slots";

  // Paged: 3 sequences; row 4 is past sequence 1's length, sequence 2's block id 9 is out of range.
  const std::vector<std::int32_t> block_table = {5, 2, 0, 1, 3, -1, 9, 4, 7};  // [3, 3]
  const std::vector<std::int32_t> short_lens = {3, 1, 3};
  const std::vector<std::int32_t> full_cu = {0, 3, 5, 8};
  const std::int64_t paged_rows = 8;
  TensorView bt = mlakv::make_view(const_cast<std::int32_t*>(block_table.data()), DType::kInt32, {3, 3});
  TensorView lens = mlakv::make_view(const_cast<std::int32_t*>(short_lens.data()), DType::kInt32, {3});
  TensorView cus = mlakv::make_view(const_cast<std::int32_t*>(full_cu.data()), DType::kInt32, {4});
  DeviceBuffer d_bt(block_table), d_lens(short_lens), d_cus(full_cu);
  auto paged = [&](bool device) {
    std::vector<std::uint8_t> out(paged_rows * 576 * esize, 0x5A);
    DeviceBuffer d_out(out);
    TensorView kv = mlakv::make_view(out.data(), out_dtype, {paged_rows, 512});
    kv.strides[0] = 576;
    TensorView pe = mlakv::make_view(out.data() + 512 * esize, out_dtype, {paged_rows, 64});
    pe.strides[0] = 576;
    if (device) {
      mlakv::gather_records_paged(format, on_device(cache, d_cache), on_device(bt, d_bt), on_device(lens, d_lens),
                                  on_device(cus, d_cus), on_device(kv, d_out), on_device(pe, d_out, 512 * esize),
                                  d_options);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return d_out.download<std::uint8_t>();
    }
    mlakv::gather_records_paged(format, cache, bt, lens, cus, kv, pe, options);
    return out;
  };
  const auto cpu_paged = paged(false);
  EXPECT_EQ(std::memcmp(cpu_paged.data(), paged(true).data(), cpu_paged.size()), 0) << "gather through block tables";
}

INSTANTIATE_TEST_SUITE_P(every_format, cuda_reader,
                         ::testing::Combine(::testing::Values(Format::kBf16, Format::kFp16, Format::kFp8E4m3,
                                                              Format::kFp8DsMla, Format::kNvfp4DsMla,
                                                              Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts,
                                                              Format::kNvfp4Fp8DsMla),
                                            ::testing::Values(DType::kFloat32, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::string(mlakv::format_info(std::get<0>(info.param)).id) + "_" +
                                  mlakv::dtype_name(std::get<1>(info.param));
                         });

}  // namespace
