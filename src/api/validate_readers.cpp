// SPDX-License-Identifier: Apache-2.0
// The readers' argument rules: gather_records (validate_gather) and
// gather_records_paged (validate_gather_paged).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "api/rules.h"
#include "api/validate.h"
#include "format/page.h"
#include "format/specs.h"

namespace mlakv::api {

namespace {

struct Outputs {
  params::OutDtype dtype;
  void* kv_c;
  std::int64_t kv_c_stride_bytes;
  void* k_pe;
  std::int64_t k_pe_stride_bytes;
};

// [rows, 512] and [rows, 64] (the format's NoPE and RoPE widths), both float32 or both bf16, innermost-contiguous, rows
// not overlapping.
Outputs check_outputs(const Check& check, const FormatInfo& info, const TensorView& kv_c_out,
                      const TensorView& k_pe_out, std::int64_t rows, std::string_view rows_name) {
  MLAKV_REQUIRE(check, kv_c_out.dtype == DType::kFloat32 || kv_c_out.dtype == DType::kBFloat16, ErrorCode::kDtype,
                "kv_c_out", "dtype must be float32 or bf16", dtype_name(kv_c_out.dtype));
  MLAKV_REQUIRE(check, k_pe_out.dtype == kv_c_out.dtype, ErrorCode::kDtype, "k_pe_out",
                std::string("dtype must match kv_c_out (") + dtype_name(kv_c_out.dtype) + ")",
                dtype_name(k_pe_out.dtype));
  const Named views[2] = {{"kv_c_out", &kv_c_out}, {"k_pe_out", &k_pe_out}};
  const std::int64_t widths[2] = {info.geometry.nope_dims, info.geometry.rope_dims};
  for (int i = 0; i < 2; ++i) {
    const TensorView& v = *views[i].view;
    const std::string_view name = views[i].name;
    const std::string expected = "(N, " + str(widths[i]) + ") with N = " + std::string(rows_name) + " = " + str(rows);
    check_rank(check, name, v, 2, expected);
    MLAKV_REQUIRE(check, v.shape[0] == rows && v.shape[1] == widths[i], ErrorCode::kShape, name,
                  "shape must be " + expected, shape_string(v));
    check_strides_nonnegative(check, name, v);
    MLAKV_REQUIRE(check, v.strides[1] == 1 || is_empty(v), ErrorCode::kLayout, name,
                  "rows must be innermost-contiguous (stride 1)", "stride " + str(v.strides[1]));
    MLAKV_REQUIRE(check, rows <= 1 || v.strides[0] >= widths[i], ErrorCode::kLayout, name,
                  "row stride must be >= " + str(widths[i]) + " (rows must not overlap)", str(v.strides[0]));
    check_data(check, name, v);
  }
  const auto dtype = kv_c_out.dtype == DType::kFloat32 ? params::OutDtype::kFloat32 : params::OutDtype::kBf16;
  return {dtype, kv_c_out.data, kv_c_out.strides[0], k_pe_out.data, k_pe_out.strides[0]};
}

// The outputs are written while the inputs are read, and must not share a byte
// with them or with each other (out[:, :512] and out[:, 512:] do not).
void check_outputs_disjoint(const Check& check, const TensorView& kv_c_out, const TensorView& k_pe_out,
                            std::initializer_list<Named> inputs) {
  check_disjoint(check, {"kv_c_out", &kv_c_out}, inputs);
  check_disjoint(check, {"k_pe_out", &k_pe_out}, inputs);
  check_disjoint(check, {"k_pe_out", &k_pe_out}, {{"kv_c_out", &kv_c_out}});
}

params::GatherParams gather_params(Format format, const params::CacheLayout& cache, const params::RowSource& source,
                                   std::int64_t rows, const Outputs& out, const codec::DecodeParams& decode,
                                   const float* k_scale_device) {
  return params::GatherParams{
      format, cache,         source, rows, out.dtype, out.kv_c, out.kv_c_stride_bytes, out.k_pe, out.k_pe_stride_bytes,
      decode, k_scale_device};
}

}  // namespace

params::GatherParams validate_gather(const Check& check, Format format, const TensorView& kv_cache,
                                     const TensorView& slots, const TensorView& kv_c_out, const TensorView& k_pe_out,
                                     const GatherOptions& options) {
  const Device device = check_devices(
      check, {{"kv_cache", &kv_cache}, {"slots", &slots}, {"kv_c_out", &kv_c_out}, {"k_pe_out", &k_pe_out}});
  check_supported(check, format, device, Operation::kRead);
  const std::int64_t* slot_data = check_slots(check, "slots", slots);
  const std::int64_t rows = slots.shape[0];
  const Outputs out = check_outputs(check, format_info(format), kv_c_out, k_pe_out, rows, "len(slots)");
  // CUDA reads records with 16-byte loads.
  const params::CacheLayout cache = check_cache(check, format_info(format), kv_cache, device.type == DeviceType::kCuda);
  const ScaleArg k_scale = read_scale(check, options.scale, format_info(format).policy.needs_k_scale, device);
  check_outputs_disjoint(check, kv_c_out, k_pe_out,
                         {{"kv_cache", &kv_cache}, {"slots", &slots}, {"scale", options.scale}});
  params::RowSource source{};
  source.slots = slot_data;
  return gather_params(format, cache, source, rows, out, decode_params(check, options, k_scale.value), k_scale.device);
}

params::GatherParams validate_gather_paged(const Check& check, Format format, const TensorView& kv_cache,
                                           const TensorView& block_table, const TensorView& seq_lens,
                                           const TensorView& cu_seq_lens, const TensorView& kv_c_out,
                                           const TensorView& k_pe_out, const GatherOptions& options) {
  const Device device = check_devices(check, {{"kv_cache", &kv_cache},
                                              {"block_table", &block_table},
                                              {"seq_lens", &seq_lens},
                                              {"cu_seq_lens", &cu_seq_lens},
                                              {"kv_c_out", &kv_c_out},
                                              {"k_pe_out", &k_pe_out}});
  check_supported(check, format, device, Operation::kRead);
  check_dtype(check, "block_table", block_table, DType::kInt32);
  check_rank(check, "block_table", block_table, 2, "(B, max_blocks)");
  const std::int64_t batch = block_table.shape[0];
  check_strides_nonnegative(check, "block_table", block_table);
  MLAKV_REQUIRE(check, block_table.strides[1] == 1 || block_table.shape[1] <= 1, ErrorCode::kLayout, "block_table",
                "rows must be innermost-contiguous (stride 1)", "stride " + str(block_table.strides[1]));
  check_data(check, "block_table", block_table);
  params::RowSource source{};
  source.block_table = static_cast<const std::int32_t*>(block_table.data);
  source.block_table_stride_elems = block_table.strides[0];
  source.max_blocks = block_table.shape[1];
  source.batch = batch;
  source.seq_lens =
      check_int32_vector(check, "seq_lens", seq_lens, batch, "(B,) with B = block_table rows = " + str(batch));
  source.cu_seq_lens = check_int32_vector(check, "cu_seq_lens", cu_seq_lens, batch + 1,
                                          "(B + 1,) with B = block_table rows = " + str(batch));
  const std::int64_t rows = kv_c_out.ndim >= 1 ? kv_c_out.shape[0] : 0;
  const Outputs out = check_outputs(check, format_info(format), kv_c_out, k_pe_out, rows, "total rows");
  const params::CacheLayout cache = check_cache(check, format_info(format), kv_cache, device.type == DeviceType::kCuda);
  const ScaleArg k_scale = read_scale(check, options.scale, format_info(format).policy.needs_k_scale, device);
  check_outputs_disjoint(check, kv_c_out, k_pe_out,
                         {{"kv_cache", &kv_cache},
                          {"block_table", &block_table},
                          {"seq_lens", &seq_lens},
                          {"cu_seq_lens", &cu_seq_lens},
                          {"scale", options.scale}});
  return gather_params(format, cache, source, rows, out, decode_params(check, options, k_scale.value), k_scale.device);
}

}  // namespace mlakv::api
