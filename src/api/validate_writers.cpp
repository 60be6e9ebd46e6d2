// SPDX-License-Identifier: Apache-2.0
// The writers' argument rules (validate_write) and the views the public
// writers adapt their arguments with.
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

codec::InputDtype input_dtype(const Check& check, const TensorView& kv_c) {
  MLAKV_REQUIRE(check, kv_c.dtype == DType::kBFloat16 || kv_c.dtype == DType::kFloat16, ErrorCode::kDtype, "kv_c",
                "dtype must be bf16 or fp16", dtype_name(kv_c.dtype));
  return kv_c.dtype == DType::kBFloat16 ? codec::InputDtype::kBf16 : codec::InputDtype::kFp16;
}

}  // namespace

TensorView squeeze_middle_unit_dim(const TensorView& view) {
  if (view.ndim != 3 || view.shape[1] != 1) return view;
  TensorView squeezed = view;
  squeezed.ndim = 2;
  squeezed.shape[1] = view.shape[2];
  squeezed.strides[1] = view.strides[2];
  return squeezed;
}

TensorView flatten_column(const TensorView& view) {
  if (view.ndim != 2 || view.shape[1] != 1) return view;
  TensorView flat = view;
  flat.ndim = 1;
  return flat;
}

TensorView cache_as_bytes(const TensorView& view) {
  const int size = dtype_size(view.dtype);
  const bool typed = view.dtype == DType::kBFloat16 || view.dtype == DType::kFloat16 || view.dtype == DType::kInt8;
  if (!typed || view.ndim != 3 || view.strides[2] != 1) return view;
  TensorView bytes = view;
  bytes.dtype = DType::kUInt8;
  // A product past int64 leaves the typed view, which validation refuses by its dtype.
  for (int d = 0; d < 2; ++d) {
    if (__builtin_mul_overflow(view.strides[d], size, &bytes.strides[d])) return view;
  }
  if (__builtin_mul_overflow(view.shape[2], size, &bytes.shape[2])) return view;
  return bytes;
}

params::WriteParams validate_write(const Check& check, Format format, const TensorView& kv_c, const TensorView& k_pe,
                                   const TensorView& kv_cache, const TensorView& slot_mapping,
                                   const TensorView* scale) {
  const FormatInfo& info = format_info(format);
  const Device device = check_devices(
      check, {{"kv_c", &kv_c}, {"k_pe", &k_pe}, {"kv_cache", &kv_cache}, {"slot_mapping", &slot_mapping}});
  check_supported(check, format, device, Operation::kWrite);
  // dtype
  const codec::InputDtype dtype = input_dtype(check, kv_c);
  MLAKV_REQUIRE(check, k_pe.dtype == kv_c.dtype, ErrorCode::kDtype, "k_pe",
                std::string("dtype must match kv_c (") + dtype_name(kv_c.dtype) + ")", dtype_name(k_pe.dtype));
  if (info.policy.input_dtype != DType::kOther) {
    const DType record_dtype = info.policy.input_dtype;
    MLAKV_REQUIRE(check, kv_c.dtype == record_dtype, ErrorCode::kDtype, "kv_c",
                  std::string("dtype must be ") + dtype_name(record_dtype) + " (the record stores inputs verbatim)",
                  dtype_name(kv_c.dtype));
  }
  // shape, layout, alignment of each tensor
  const std::int64_t* slots = check_slots(check, "slot_mapping", slot_mapping);
  const std::int64_t tokens = slot_mapping.shape[0];
  const std::int64_t nope = info.geometry.nope_dims;  // 512 (the latent), 448 for DeepSeek V4
  const std::int64_t rope = info.geometry.rope_dims;
  check_rank(check, "kv_c", kv_c, 2, "(T, " + str(nope) + ")");
  check_rank(check, "k_pe", k_pe, 2, "(T, " + str(rope) + ")");
  const std::int64_t kv_c_stride_bytes = check_input_rows(check, "kv_c", kv_c, nope, tokens);
  const std::int64_t k_pe_stride_bytes = check_input_rows(check, "k_pe", k_pe, rope, tokens);
  check_data(check, "kv_c", kv_c);
  check_data(check, "k_pe", k_pe);
  const params::CacheLayout cache = check_cache(check, info, kv_cache, /*require_alignment=*/true);
  const ScaleArg k_scale = read_scale(check, scale, info.policy.needs_k_scale, device);
  // The cache is written while the others are read: no byte may be both.
  const Named written = {"kv_cache", &kv_cache};
  check_disjoint(check, {"kv_c", &kv_c}, {written});
  check_disjoint(check, {"k_pe", &k_pe}, {written});
  check_disjoint(check, {"slot_mapping", &slot_mapping}, {written});
  check_disjoint(check, {"scale", scale}, {written});
  return params::WriteParams{format,
                             dtype,
                             static_cast<const std::uint8_t*>(kv_c.data),
                             kv_c_stride_bytes,
                             static_cast<const std::uint8_t*>(k_pe.data),
                             k_pe_stride_bytes,
                             slots,
                             tokens,
                             cache,
                             codec::EncodeParams{k_scale.value},
                             k_scale.device};
}

}  // namespace mlakv::api
