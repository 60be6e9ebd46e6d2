// SPDX-License-Identifier: Apache-2.0
#include "mlakv/tensor_view.h"

#include <string>

#include "mlakv/error.h"

namespace mlakv {

std::int64_t numel(const TensorView& view) noexcept {
  std::int64_t n = 1;
  for (int d = 0; d < view.ndim; ++d) n *= view.shape[d];
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
  for (std::int64_t extent : shape) view.shape[d++] = extent;
  std::int64_t stride = 1;
  for (d = view.ndim - 1; d >= 0; --d) {
    view.strides[d] = stride;
    stride *= view.shape[d];
  }
  return view;
}

}  // namespace mlakv
