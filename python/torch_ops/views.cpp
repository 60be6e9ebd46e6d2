// SPDX-License-Identifier: Apache-2.0
#include "views.h"

#include <c10/util/Exception.h>

#if MLAKV_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "mlakv/error.h"

namespace mlakv::torch_ops {
namespace {

// mlakv.torch's _DTYPES: the dtypes mlakv names; any other is kOther.
DType to_dtype(at::ScalarType t, bool fp8_cache) {
  switch (t) {
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kHalf:
      return DType::kFloat16;
    case at::kFloat:
      return DType::kFloat32;
    case at::kDouble:
      return DType::kFloat64;
    case at::kByte:
      return DType::kUInt8;
    case at::kChar:
      return DType::kInt8;
    case at::kShort:
      return DType::kInt16;
    case at::kInt:
      return DType::kInt32;
    case at::kLong:
      return DType::kInt64;
    case at::kFloat8_e4m3fn:
      return fp8_cache ? DType::kUInt8 : DType::kOther;
    default:
      return DType::kOther;
  }
}

std::string message(std::string_view function, std::string_view format, std::string_view name, std::string_view rule,
                    std::string_view got) {
  std::string text = "mlakv::";
  text.append(function).append("(").append(format).append("): ");
  text.append(name).append(": ").append(rule).append(", got ").append(got);
  return text;
}

}  // namespace

DType dtype_of(at::ScalarType dtype) { return to_dtype(dtype, false); }

TensorView view(const at::Tensor& t, bool fp8_cache) {
  TensorView v;
  const auto ndim = t.dim();
  if (ndim > kMaxDims) {
    throw Error(ErrorCode::kShape, "mlakv: arrays of more than " + std::to_string(kMaxDims) +
                                       " dims are not accepted, got " + std::to_string(ndim));
  }
  v.data = t.data_ptr();
  v.dtype = to_dtype(t.scalar_type(), fp8_cache);
  v.ndim = static_cast<int>(ndim);
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  // Any device but the CPU and CUDA (meta, say) is one the library refuses, naming the tensor.
  v.device = t.is_cuda()  ? Device{DeviceType::kCuda, t.get_device()}
             : t.is_cpu() ? Device{DeviceType::kCpu, 0}
                          : Device{DeviceType::kOther, 0};
  return v;
}

StreamHandle stream(const at::Tensor& t) {
#if MLAKV_TORCH_CUDA
  if (t.is_cuda()) return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
#else
  (void)t;
#endif
  return nullptr;
}

TokenGeometry widths(std::string_view format) {
  for (const FormatInfo& info : formats()) {
    if (info.id == format) return info.geometry;
  }
  return {kLatentDim, kRopeDim, false};
}

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kHalf:
      return "torch.float16";
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kByte:
      return "torch.uint8";
    case at::kChar:
      return "torch.int8";
    case at::kShort:
      return "torch.int16";
    case at::kInt:
      return "torch.int32";
    case at::kLong:
      return "torch.int64";
    case at::kBool:
      return "torch.bool";
    case at::kComplexFloat:
      return "torch.complex64";
    case at::kComplexDouble:
      return "torch.complex128";
    case at::kFloat8_e4m3fn:
      return "torch.float8_e4m3fn";
    case at::kFloat8_e5m2:
      return "torch.float8_e5m2";
    default:
      return std::string("torch.") + c10::toString(dtype);
  }
}

void type_error(std::string_view function, std::string_view format, std::string_view name, std::string_view rule,
                std::string_view got) {
  throw Error(ErrorCode::kDtype, message(function, format, name, rule, got));
}

void value_error(std::string_view function, std::string_view format, std::string_view name, std::string_view rule,
                 std::string_view got) {
  throw Error(ErrorCode::kValue, message(function, format, name, rule, got));
}

void rethrow_as_torch_error() {
  try {
    throw;
  } catch (const Error& e) {
    const c10::SourceLocation where{__func__, __FILE__, static_cast<std::uint32_t>(__LINE__)};
    switch (e.code()) {
      case ErrorCode::kDtype:
        throw c10::TypeError(where, e.what());
      case ErrorCode::kUnsupported:
        throw c10::NotImplementedError(where, e.what());
      case ErrorCode::kBackend:
        throw c10::Error(where, e.what());
      default:
        throw c10::ValueError(where, e.what());
    }
  }
}

}  // namespace mlakv::torch_ops
