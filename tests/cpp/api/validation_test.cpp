// SPDX-License-Identifier: Apache-2.0
// Every validation rule: the exact error text and code, and not one byte written.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::ErrorCode;
using mlakv::TensorView;
using namespace mlakv::test;

constexpr std::int64_t kTokens = 4;
constexpr const char* kCompact = "mlakv::concat_and_cache_nvfp4_mla_fp8_rope(nvfp4_ds_mla_fp8_rope): ";
constexpr const char* kStockFp8DsMla = "mlakv::concat_and_cache_mla(fp8_ds_mla): ";

// Valid arguments for the compact writer; each test breaks exactly one thing.
class validation : public ::testing::Test {
 protected:
  std::vector<std::uint16_t> kv_c_data = random_inputs(kTokens * 512 + 8, DType::kBFloat16, 1, false);
  std::vector<std::uint16_t> k_pe_data = random_inputs(kTokens * 64 + 8, DType::kBFloat16, 2, false);
  std::vector<std::int64_t> slot_data = {0, 1, 2, 3, 4, 5, 6, 7};
  GuardedCache cache{2, 16, 368, 16 * 368};
  GuardedCache cache656{2, 16, 656, 16 * 656};
  TensorView kv_c = mlakv::make_view(kv_c_data.data(), DType::kBFloat16, {kTokens, 512});
  TensorView k_pe = mlakv::make_view(k_pe_data.data(), DType::kBFloat16, {kTokens, 64});
  TensorView kv_cache = cache.view(368);
  TensorView slots = mlakv::make_view(slot_data.data(), DType::kInt64, {kTokens});

  void expect_error(const std::function<void()>& call, ErrorCode code, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "no error; expected: " << text;
    } catch (const mlakv::Error& e) {
      EXPECT_EQ(std::string(e.what()), text);
      EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code));
    }
    EXPECT_TRUE(cache.unchanged()) << "a rejected call wrote to the cache";
    EXPECT_TRUE(cache656.unchanged()) << "a rejected call wrote to the cache";
  }

  void expect_compact_error(ErrorCode code, const std::string& rule) {
    expect_error([&] { mlakv::concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slots); }, code,
                 kCompact + rule);
  }

  void expect_stock_error(const char* dtype, const TensorView* scale, ErrorCode code, const std::string& text) {
    TensorView cache_view = cache656.view(656);
    expect_error([&] { mlakv::concat_and_cache_mla(kv_c, k_pe, cache_view, slots, dtype, scale); }, code, text);
  }
};

TEST_F(validation, accepts_the_fixture_arguments) {
  EXPECT_NO_THROW(mlakv::concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slots));
}

TEST_F(validation, rejects_kv_c_of_wrong_width) {
  kv_c.shape[1] = 511;
  expect_compact_error(ErrorCode::kShape, "kv_c: shape must be (T, 512), got (4, 511)");
}

TEST_F(validation, rejects_kv_c_of_wrong_rank) {
  kv_c = mlakv::make_view(kv_c_data.data(), DType::kBFloat16, {kTokens, 1, 512});
  expect_compact_error(ErrorCode::kShape, "kv_c: shape must be (T, 512), got (4, 1, 512)");
}

TEST_F(validation, rejects_k_pe_of_wrong_width) {
  k_pe.shape[1] = 32;
  expect_compact_error(ErrorCode::kShape, "k_pe: shape must be (T, 64), got (4, 32)");
}

TEST_F(validation, compact_writer_squeezes_only_a_unit_middle_dim_of_k_pe) {
  k_pe = mlakv::make_view(k_pe_data.data(), DType::kBFloat16, {kTokens / 2, 2, 64});
  expect_compact_error(ErrorCode::kShape, "k_pe: shape must be (T, 64), got (2, 2, 64)");
}

TEST_F(validation, rejects_kv_c_dtype_other_than_bf16_or_fp16) {
  kv_c.dtype = DType::kFloat32;
  expect_compact_error(ErrorCode::kDtype, "kv_c: dtype must be bf16 or fp16, got float32");
}

TEST_F(validation, rejects_k_pe_dtype_differing_from_kv_c) {
  k_pe.dtype = DType::kFloat16;
  expect_compact_error(ErrorCode::kDtype, "k_pe: dtype must match kv_c (bf16), got fp16");
}

TEST_F(validation, rejects_cache_last_dim_other_than_record_bytes) {
  kv_cache.shape[2] = 432;
  expect_compact_error(ErrorCode::kShape, "kv_cache: last dim must be 368 (record bytes), got 432");
}

TEST_F(validation, rejects_cache_dtype_other_than_uint8) {
  kv_cache.dtype = DType::kInt32;
  expect_compact_error(ErrorCode::kDtype, "kv_cache: dtype must be uint8, got int32");
}

TEST_F(validation, rejects_cache_of_wrong_rank) {
  kv_cache.ndim = 2;
  kv_cache.shape[1] = 368;
  expect_compact_error(ErrorCode::kShape,
                       "kv_cache: shape must be (num_blocks, block_size, record_bytes), got (2, 368)");
}

TEST_F(validation, rejects_zero_num_blocks) {
  kv_cache.shape[0] = 0;
  expect_compact_error(ErrorCode::kShape, "kv_cache: num_blocks must be > 0, got (0, 16, 368)");
}

TEST_F(validation, rejects_zero_block_size) {
  kv_cache.shape[1] = 0;
  expect_compact_error(ErrorCode::kShape, "kv_cache: block_size must be > 0, got (2, 0, 368)");
}

TEST_F(validation, rejects_slot_mapping_not_int64) {
  slots.dtype = DType::kInt32;
  expect_compact_error(ErrorCode::kDtype, "slot_mapping: dtype must be int64, got int32");
}

TEST_F(validation, rejects_slot_mapping_not_one_dimensional) {
  slots = mlakv::make_view(slot_data.data(), DType::kInt64, {2, 2});
  expect_compact_error(ErrorCode::kShape, "slot_mapping: shape must be (T,), got (2, 2)");
}

TEST_F(validation, compact_writer_flattens_only_a_column_of_slots) {
  slots = mlakv::make_view(slot_data.data(), DType::kInt64, {kTokens / 2, 2});
  expect_compact_error(ErrorCode::kShape, "slot_mapping: shape must be (T,), got (2, 2)");
}

TEST_F(validation, rejects_non_contiguous_slot_mapping) {
  slots.strides[0] = 2;
  expect_compact_error(ErrorCode::kLayout, "slot_mapping: must be contiguous (stride 1), got stride 2");
}

TEST_F(validation, rejects_kv_c_with_fewer_rows_than_slots) {
  kv_c.shape[0] = 3;
  expect_compact_error(ErrorCode::kShape, "kv_c: must have at least T = len(slot_mapping) = 4 rows, got (3, 512)");
}

TEST_F(validation, rejects_k_pe_with_fewer_rows_than_slots) {
  k_pe.shape[0] = 2;
  expect_compact_error(ErrorCode::kShape, "k_pe: must have at least T = len(slot_mapping) = 4 rows, got (2, 64)");
}

TEST_F(validation, rejects_kv_c_not_innermost_contiguous) {
  kv_c.strides[1] = 2;
  expect_compact_error(ErrorCode::kLayout, "kv_c: rows must be innermost-contiguous (stride 1), got stride 2");
}

TEST_F(validation, rejects_negative_strides) {
  k_pe.strides[0] = -64;
  expect_compact_error(ErrorCode::kLayout, "k_pe: strides must be non-negative, got stride -64 in dim 0");
}

TEST_F(validation, rejects_cache_not_innermost_contiguous) {
  kv_cache.strides[2] = 2;
  expect_compact_error(ErrorCode::kLayout, "kv_cache: records must be innermost-contiguous (stride 1), got stride 2");
}

TEST_F(validation, rejects_overlapping_records) {
  kv_cache.strides[1] = 352;
  expect_compact_error(ErrorCode::kLayout, "kv_cache: slot stride must be >= 368 (records must not overlap), got 352");
}

TEST_F(validation, rejects_overlapping_blocks) {
  kv_cache.strides[0] = 8 * 368;
  expect_compact_error(ErrorCode::kLayout,
                       "kv_cache: block stride must be >= 5888 (blocks must not overlap), got 2944");
}

TEST_F(validation, rejects_kv_c_base_not_4_byte_aligned) {
  kv_c.data = kv_c_data.data() + 1;
  expect_compact_error(ErrorCode::kAlignment, "kv_c: base must be 4-byte aligned, got address % 4 = 2");
}

TEST_F(validation, rejects_k_pe_row_stride_of_odd_elements) {
  k_pe.strides[0] = 65;
  expect_compact_error(ErrorCode::kAlignment,
                       "k_pe: row stride must be a multiple of 4 bytes (an even element count), got 65 elements");
}

TEST_F(validation, rejects_cache_base_not_16_byte_aligned) {
  kv_cache.data = static_cast<std::uint8_t*>(kv_cache.data) + 8;
  expect_compact_error(ErrorCode::kAlignment, "kv_cache: base must be 16-byte aligned, got address % 16 = 8");
}

TEST_F(validation, rejects_cache_record_stride_not_16_byte_aligned) {
  kv_cache.strides[1] = 376;
  kv_cache.strides[0] = 16 * 376;
  expect_compact_error(ErrorCode::kAlignment,
                       "kv_cache: block and slot strides must be multiples of 16 bytes, got (6016, 376)");
}

TEST_F(validation, rejects_tensors_on_different_devices) {
  kv_cache.device = {mlakv::DeviceType::kCuda, 0};
  expect_compact_error(ErrorCode::kDevice, "kv_cache: must be on the same device as kv_c (cpu), got cuda:0");
}

TEST_F(validation, rejects_a_cuda_device_that_does_not_exist) {
  for (TensorView* v : {&kv_c, &k_pe, &kv_cache, &slots}) v->device = {mlakv::DeviceType::kCuda, 1000};
#if MLAKV_WITH_CUDA
  expect_compact_error(ErrorCode::kDevice, "kv_c: must be on a CUDA device this process can use, got cuda:1000");
#else
  expect_compact_error(ErrorCode::kUnsupported,
                       "kv_c: this build has no CUDA backend (built without nvcc); pass CPU arrays, got cuda:1000");
#endif
}

TEST_F(validation, rejects_a_cuda_scale_with_cpu_tensors) {
  float value = 1.0f;
  TensorView scale = mlakv::make_view(&value, DType::kFloat32, {1});
  scale.device = {mlakv::DeviceType::kCuda, 0};
  expect_error([&] { mlakv::concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slots, &scale); },
               ErrorCode::kDevice,
               std::string(kCompact) + "scale: must be on the CPU or on the tensors' device (cpu), got cuda:0");
}

TEST_F(validation, rejects_cache_capacity_overflowing_the_slot_index_type) {
  kv_cache.shape[0] = std::int64_t{1} << 62;
  kv_cache.shape[1] = 4;
  kv_cache.strides[1] = 368;
  kv_cache.strides[0] = 4 * 368;
  expect_compact_error(ErrorCode::kValue,
                       "kv_cache: slot capacity and byte extent must fit int64 (the writer's index type), got "
                       "(4611686018427387904, 4, 368)");
}

TEST_F(validation, rejects_null_data_pointer) {
  kv_c.data = nullptr;
  expect_compact_error(ErrorCode::kValue, "kv_c: data pointer must not be null, got null");
}

TEST_F(validation, rejects_unknown_kv_cache_dtype_listing_accepted_ones) {
  expect_stock_error("nvfp4", nullptr, ErrorCode::kValue,
                     "mlakv::concat_and_cache_mla(nvfp4): kv_cache_dtype: must be an engine name (auto, fp8, "
                     "fp8_e4m3, fp8_ds_mla, nvfp4_ds_mla, v4, v41, v41_fp4) or an mlakv format id (bf16, fp16, "
                     "fp8_e4m3, fp8_ds_mla, nvfp4_ds_mla, nvfp4_ds_mla_fp8_rope, nvfp4_ds_mla_fp8_rope_pts, "
                     "nvfp4_fp8_ds_mla, fp8_ds_mla_v4, fp8_ds_mla_v41, nvfp4_ds_mla_v41, fp8_ds_mla_v41_planar, "
                     "nvfp4_ds_mla_v41_planar), got 'nvfp4'");
}

TEST_F(validation, fp8_requires_a_scale) {
  TensorView cache576 = cache656.view(576);
  cache576.strides[1] = 576;
  expect_error(
      [&] { mlakv::concat_and_cache_mla(kv_c, k_pe, cache576, slots, "fp8", nullptr); }, ErrorCode::kValue,
      "mlakv::concat_and_cache_mla(fp8_e4m3): scale: this format requires k_scale, a 1-element float32, got none");
}

TEST_F(validation, rejects_scale_not_float32) {
  std::int64_t wrong = 1;
  const TensorView scale = mlakv::make_view(&wrong, DType::kInt64, {1});
  expect_stock_error("fp8_ds_mla", &scale, ErrorCode::kDtype,
                     std::string(kStockFp8DsMla) + "scale: dtype must be float32, got int64");
}

TEST_F(validation, rejects_scale_of_more_than_one_element) {
  float two[2] = {1.0f, 2.0f};
  const TensorView scale = mlakv::make_view(two, DType::kFloat32, {2});
  expect_stock_error("fp8_ds_mla", &scale, ErrorCode::kShape,
                     std::string(kStockFp8DsMla) + "scale: shape must be (1,) or () (one k_scale), got (2,)");
}

TEST_F(validation, rejects_scale_of_shape_1_by_1) {
  float one = 1.0f;
  const TensorView scale = mlakv::make_view(&one, DType::kFloat32, {1, 1});
  expect_stock_error("fp8_ds_mla", &scale, ErrorCode::kShape,
                     std::string(kStockFp8DsMla) + "scale: shape must be (1,) or () (one k_scale), got (1, 1)");
}

TEST_F(validation, rejects_scale_values_without_meaning) {
  const std::string rule =
      "scale: must be a positive normal float32 with 448 * scale finite (1.17549435e-38 <= scale <= "
      "7.59558809e+35), got ";
  const std::pair<float, const char*> bad[] = {{0.0f, "0"},
                                               {-0.0f, "-0"},
                                               {-1.0f, "-1"},
                                               {std::numeric_limits<float>::quiet_NaN(), "nan"},
                                               {std::numeric_limits<float>::infinity(), "inf"},
                                               {-std::numeric_limits<float>::infinity(), "-inf"},
                                               {1e38f, "9.99999968e+37"},
                                               {1e-40f, "9.9999461e-41"}};
  for (const auto& [value, text] : bad) {
    float v = value;
    const TensorView scale = mlakv::make_view(&v, DType::kFloat32, {1});
    expect_stock_error("fp8_ds_mla", &scale, ErrorCode::kValue, std::string(kStockFp8DsMla) + rule + text);
  }
}

TEST_F(validation, accepts_scales_at_both_ends_of_the_documented_range) {
  for (float v : {std::numeric_limits<float>::min(), 1.0f, std::numeric_limits<float>::max() / 448.0f}) {
    const TensorView scale = mlakv::make_view(&v, DType::kFloat32, {});
    TensorView cache_view = cache656.view(656);
    EXPECT_NO_THROW(mlakv::concat_and_cache_mla(kv_c, k_pe, cache_view, slots, "fp8_ds_mla", &scale)) << v;
  }
}

TEST_F(validation, stock_entry_point_names_the_resolved_format) {
  kv_c.shape[1] = 500;
  expect_stock_error("fp8_ds_mla", nullptr, ErrorCode::kShape,
                     std::string(kStockFp8DsMla) + "kv_c: shape must be (T, 512), got (4, 500)");
}

TEST_F(validation, sixteen_bit_record_requires_its_own_input_dtype) {
  TensorView cache1152 = cache656.view(1152);  // never reached: dtype is checked first
  kv_c.dtype = k_pe.dtype = DType::kFloat16;
  expect_error([&] { mlakv::write_records(mlakv::Format::kBf16, kv_c, k_pe, cache1152, slots); }, ErrorCode::kDtype,
               "mlakv::write_records(bf16): kv_c: dtype must be bf16 (the record stores inputs verbatim), got fp16");
}

TEST_F(validation, empty_slot_mapping_is_still_validated) {
  slots.shape[0] = 0;
  kv_cache.shape[2] = 432;
  expect_compact_error(ErrorCode::kShape, "kv_cache: last dim must be 368 (record bytes), got 432");
}

TEST_F(validation, rejects_null_kv_c_whose_element_count_overflows_int64) {
  kv_c.data = nullptr;
  kv_c.shape[0] = std::int64_t{1} << 55;  // numel once wrapped to 0 and passed the null check
  expect_compact_error(ErrorCode::kValue,
                       "kv_c: the bytes its shape and strides span must fit int64, got (36028797018963968, 512) with "
                       "strides (512, 1)");
}

TEST_F(validation, rejects_null_data_with_a_huge_but_representable_shape) {
  k_pe.data = nullptr;
  k_pe.shape[0] = std::int64_t{1} << 40;
  expect_compact_error(ErrorCode::kValue, "k_pe: data pointer must not be null, got null");
}

TEST_F(validation, rejects_kv_c_that_is_a_view_of_the_cache_being_written) {
  kv_c = mlakv::make_view(kv_cache.data, DType::kBFloat16, {kTokens, 512});
  expect_compact_error(ErrorCode::kValue,
                       "kv_c: must not share memory with kv_cache (inputs and outputs must not overlap), got "
                       "overlapping byte ranges");
}

TEST_F(validation, rejects_k_pe_that_ends_inside_the_cache) {
  auto* cache_bytes = static_cast<std::uint8_t*>(kv_cache.data);
  k_pe = mlakv::make_view(cache_bytes - 4 * 64 * 2 + 4, DType::kBFloat16, {kTokens, 64});
  expect_compact_error(ErrorCode::kValue,
                       "k_pe: must not share memory with kv_cache (inputs and outputs must not overlap), got "
                       "overlapping byte ranges");
}

TEST_F(validation, rejects_slot_mapping_inside_the_cache) {
  slots = mlakv::make_view(static_cast<std::uint8_t*>(kv_cache.data) + 368, DType::kInt64, {kTokens});
  expect_compact_error(ErrorCode::kValue,
                       "slot_mapping: must not share memory with kv_cache (inputs and outputs must not overlap), got "
                       "overlapping byte ranges");
}

TEST_F(validation, empty_inputs_are_valid_whatever_their_strides) {
  kv_c.shape[0] = k_pe.shape[0] = slots.shape[0] = 0;
  kv_c.strides[0] = kv_c.strides[1] = k_pe.strides[0] = k_pe.strides[1] = 0;  // numpy 2's empty arrays
  kv_c.data = k_pe.data = nullptr;
  EXPECT_NO_THROW(mlakv::concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, kv_cache, slots));
  EXPECT_TRUE(cache.unchanged());
}

TEST(tensor_view, make_view_rejects_an_element_count_past_int64) {
  try {
    mlakv::make_view(nullptr, DType::kBFloat16, {std::int64_t{1} << 55, 512});
    ADD_FAILURE() << "no error";
  } catch (const mlakv::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "mlakv::make_view: shape: the element count must fit int64, got a shape of 2 dims whose product "
              "overflows");
  }
  EXPECT_THROW(mlakv::make_view(nullptr, DType::kInt64, {std::int64_t{1} << 61, 2}), mlakv::Error);  // bytes
  EXPECT_THROW(mlakv::make_view(nullptr, DType::kInt64, {-1, 2}), mlakv::Error);
  EXPECT_NO_THROW(mlakv::make_view(nullptr, DType::kInt64, {0, std::int64_t{1} << 62, 4}));  // empty
}

TEST(tensor_view, numel_saturates_instead_of_wrapping) {
  TensorView v = mlakv::make_view(nullptr, DType::kUInt8, {2, 3});
  EXPECT_EQ(mlakv::numel(v), 6);
  v.shape[0] = std::int64_t{1} << 55;
  v.shape[1] = 512;
  EXPECT_EQ(mlakv::numel(v), std::numeric_limits<std::int64_t>::max());
  v.shape[1] = 0;
  EXPECT_EQ(mlakv::numel(v), 0);
  v.shape[1] = -2;
  EXPECT_EQ(mlakv::numel(v), -1);
}

// --- the reader ---

class gather_validation : public validation {
 protected:
  std::vector<float> kv_out = std::vector<float>(kTokens * 512);
  std::vector<float> pe_out = std::vector<float>(kTokens * 64);
  TensorView kv_out_view = mlakv::make_view(kv_out.data(), DType::kFloat32, {kTokens, 512});
  TensorView pe_out_view = mlakv::make_view(pe_out.data(), DType::kFloat32, {kTokens, 64});
  mlakv::GatherOptions options;

  void expect_gather_error(mlakv::Format format, ErrorCode code, const std::string& text) {
    try {
      mlakv::gather_records(format, kv_cache, slots, kv_out_view, pe_out_view, options);
      ADD_FAILURE() << "no error; expected: " << text;
    } catch (const mlakv::Error& e) {
      EXPECT_EQ(std::string(e.what()), text);
      EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code));
    }
  }
};

TEST_F(gather_validation, rejects_output_rows_differing_from_slots) {
  kv_out_view.shape[0] = 3;
  expect_gather_error(mlakv::Format::kNvfp4DsMlaFp8Rope, ErrorCode::kShape,
                      "mlakv::gather_records(nvfp4_ds_mla_fp8_rope): kv_c_out: shape must be (N, 512) with N = "
                      "len(slots) = 4, got (3, 512)");
}

TEST_F(gather_validation, rejects_output_dtype_other_than_float32_or_bf16) {
  kv_out_view.dtype = DType::kFloat16;
  expect_gather_error(
      mlakv::Format::kNvfp4DsMlaFp8Rope, ErrorCode::kDtype,
      "mlakv::gather_records(nvfp4_ds_mla_fp8_rope): kv_c_out: dtype must be float32 or bf16, got fp16");
}

TEST_F(gather_validation, rejects_outputs_of_different_dtypes) {
  pe_out_view.dtype = DType::kBFloat16;
  expect_gather_error(
      mlakv::Format::kNvfp4DsMlaFp8Rope, ErrorCode::kDtype,
      "mlakv::gather_records(nvfp4_ds_mla_fp8_rope): k_pe_out: dtype must match kv_c_out (float32), got bf16");
}

TEST_F(gather_validation, fp8_e4m3_requires_the_scale) {
  kv_cache = cache656.view(576);
  kv_cache.strides[1] = 576;
  expect_gather_error(
      mlakv::Format::kFp8E4m3, ErrorCode::kValue,
      "mlakv::gather_records(fp8_e4m3): scale: this format requires k_scale, a 1-element float32, got none");
}

TEST_F(gather_validation, rejects_rope_dtype_other_than_bf16_or_fp16) {
  options.rope_dtype = DType::kFloat32;
  expect_gather_error(mlakv::Format::kNvfp4DsMlaFp8Rope, ErrorCode::kDtype,
                      "mlakv::gather_records(nvfp4_ds_mla_fp8_rope): rope_dtype: must be bf16 or fp16, got float32");
}

TEST_F(gather_validation, rejects_an_output_that_is_a_view_of_the_cache) {
  kv_out_view.data = kv_cache.data;
  expect_gather_error(mlakv::Format::kNvfp4DsMlaFp8Rope, ErrorCode::kValue,
                      "mlakv::gather_records(nvfp4_ds_mla_fp8_rope): kv_c_out: must not share memory with kv_cache "
                      "(inputs and outputs must not overlap), got overlapping byte ranges");
  EXPECT_TRUE(cache.unchanged());
}

TEST_F(gather_validation, rejects_outputs_that_overlap_each_other) {
  pe_out_view.data = kv_out.data() + 100;
  expect_gather_error(mlakv::Format::kNvfp4DsMlaFp8Rope, ErrorCode::kValue,
                      "mlakv::gather_records(nvfp4_ds_mla_fp8_rope): k_pe_out: must not share memory with kv_c_out "
                      "(inputs and outputs must not overlap), got overlapping byte ranges");
}

TEST_F(gather_validation, accepts_the_two_column_ranges_of_one_prefill_buffer) {
  std::vector<float> out(kTokens * 576);
  kv_out_view = mlakv::make_view(out.data(), DType::kFloat32, {kTokens, 512});
  pe_out_view = mlakv::make_view(out.data() + 512, DType::kFloat32, {kTokens, 64});
  kv_out_view.strides[0] = pe_out_view.strides[0] = 576;
  EXPECT_NO_THROW(
      mlakv::gather_records(mlakv::Format::kNvfp4DsMlaFp8Rope, kv_cache, slots, kv_out_view, pe_out_view, options));
}

TEST_F(gather_validation, no_slots_with_zero_stride_outputs_is_a_no_op) {
  slots.shape[0] = 0;
  kv_out_view.shape[0] = pe_out_view.shape[0] = 0;
  kv_out_view.strides[0] = kv_out_view.strides[1] = pe_out_view.strides[0] = pe_out_view.strides[1] = 0;
  EXPECT_NO_THROW(
      mlakv::gather_records(mlakv::Format::kNvfp4DsMlaFp8Rope, kv_cache, slots, kv_out_view, pe_out_view, options));
}

TEST_F(gather_validation, rejects_cache_of_another_format) {
  expect_gather_error(mlakv::Format::kNvfp4DsMla, ErrorCode::kShape,
                      "mlakv::gather_records(nvfp4_ds_mla): kv_cache: last dim must be 432 (record bytes), got 368");
}

}  // namespace
