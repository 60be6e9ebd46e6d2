// SPDX-License-Identifier: Apache-2.0
#include "mlakv/tensor_view.h"

#include <cstdint>
#include <string>

#include "mlakv/error.h"

namespace mlakv {

std::int64_t numel(const TensorView& view) noexcept {
  bool negative = false;
  for (int d = 0; d < view.ndim; ++d) {
    if (view.shape[d] == 0) return 0;
    negative = negative || view.shape[d] < 0;
  }
  if (negative) return -1;
  std::int64_t n = 1;
  for (int d = 0; d < view.ndim; ++d) {
    if (__builtin_mul_overflow(n, view.shape[d], &n)) return INT64_MAX;  // saturate, never wrap
  }
  return n;
}

int dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kBFloat16:
    case DType::kFloat16:
    case DType::kUInt16:
    case DType::kInt16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kOther:
      break;
  }
  return 0;
}

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat16:
      return "fp16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kOther:
      break;
  }
  return "other";
}

TensorView make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape, Device device) {
  if (shape.size() > static_cast<std::size_t>(kMaxDims)) {
    throw Error(ErrorCode::kShape, "mlakv::make_view: shape: at most " + std::to_string(kMaxDims) + " dims, got " +
                                       std::to_string(shape.size()));
  }
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.device = device;
  view.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (std::int64_t extent : shape) {
    if (extent < 0) {
      throw Error(ErrorCode::kShape, "mlakv::make_view: shape: extents must be non-negative, got " +
                                         std::to_string(extent) + " in dim " + std::to_string(d));
    }
    view.shape[d++] = extent;
  }
  // Dense strides, and the element and byte counts they imply, must fit int64.
  std::int64_t stride = 1;
  for (d = view.ndim - 1; d >= 0; --d) {
    view.strides[d] = stride;
    if (__builtin_mul_overflow(stride, view.shape[d], &stride) && numel(view) != 0) {
      throw Error(ErrorCode::kShape, "mlakv::make_view: shape: the element count must fit int64, got a shape of " +
                                         std::to_string(view.ndim) + " dims whose product overflows");
    }
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(numel(view), std::int64_t{dtype_size(dtype)}, &bytes)) {
    throw Error(ErrorCode::kShape, "mlakv::make_view: shape: the byte count must fit int64, got " +
                                       std::to_string(numel(view)) + " elements of " +
                                       std::to_string(dtype_size(dtype)) + " bytes");
  }
  return view;
}

}  // namespace mlakv
