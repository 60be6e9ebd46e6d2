// SPDX-License-Identifier: Apache-2.0
#include "views.h"

#include "mlakv/error.h"

namespace mlakv::python {
namespace {

DType to_dtype(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes != 1) return DType::kOther;
  const auto code = static_cast<Code>(t.code);
  if (code == Code::Bfloat && t.bits == 16) return DType::kBFloat16;
  if (code == Code::Float && t.bits == 16) return DType::kFloat16;
  if (code == Code::Float && t.bits == 32) return DType::kFloat32;
  if (code == Code::Float && t.bits == 64) return DType::kFloat64;
  if (code == Code::UInt && t.bits == 8) return DType::kUInt8;
  if (code == Code::UInt && t.bits == 16) return DType::kUInt16;
  if (code == Code::Int && t.bits == 8) return DType::kInt8;
  if (code == Code::Int && t.bits == 16) return DType::kInt16;
  if (code == Code::Int && t.bits == 32) return DType::kInt32;
  if (code == Code::Int && t.bits == 64) return DType::kInt64;
  return DType::kOther;
}

bool is_uint16(nb::dlpack::dtype t) {
  return static_cast<nb::dlpack::dtype_code>(t.code) == nb::dlpack::dtype_code::UInt && t.bits == 16 && t.lanes == 1;
}

template <class Array>
TensorView view_of(const Array& array, const std::optional<std::string>& reinterpret_16bit) {
  TensorView view;
  view.data = const_cast<void*>(static_cast<const void*>(array.data()));
  view.dtype = to_dtype(array.dtype());
  if (reinterpret_16bit && is_uint16(array.dtype())) {
    view.dtype = *reinterpret_16bit == "fp16" ? DType::kFloat16 : DType::kBFloat16;
  }
  if (array.ndim() > static_cast<std::size_t>(kMaxDims)) {
    throw Error(ErrorCode::kShape, "mlakv: arrays of more than " + std::to_string(kMaxDims) +
                                       " dims are not accepted, got " + std::to_string(array.ndim()));
  }
  view.ndim = static_cast<int>(array.ndim());
  for (int d = 0; d < view.ndim; ++d) {
    view.shape[d] = static_cast<std::int64_t>(array.shape(d));
    view.strides[d] = array.stride(d);
  }
  switch (array.device_type()) {
    case nb::device::cpu::value:
      view.device = {DeviceType::kCpu, 0};
      break;
    case nb::device::cuda::value:
      view.device = {DeviceType::kCuda, array.device_id()};
      break;
    default:
      view.device = {DeviceType::kOther, array.device_id()};
      break;
  }
  return view;
}

}  // namespace

TensorView to_view(const nb::ndarray<nb::ro>& array, const std::optional<std::string>& reinterpret_16bit) {
  return view_of(array, reinterpret_16bit);
}

TensorView to_view(const nb::ndarray<>& array, const std::optional<std::string>& reinterpret_16bit) {
  return view_of(array, reinterpret_16bit);
}

void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_ValueError;
      if (e.code() == ErrorCode::kDtype) type = PyExc_TypeError;
      if (e.code() == ErrorCode::kUnsupported) type = PyExc_NotImplementedError;
      if (e.code() == ErrorCode::kBackend) type = PyExc_RuntimeError;
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace mlakv::python
