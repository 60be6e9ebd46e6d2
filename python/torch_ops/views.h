// SPDX-License-Identifier: Apache-2.0
// at::Tensor -> mlakv::TensorView, torch's current stream, and mlakv::Error ->
// the c10 error torch raises as the Python type mlakv's own bindings raise
// (python/src/views.cpp), so an op's errors read the same under either
// registration (mlakv/torch.py's Python kernels or this extension).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>

#include "mlakv/formats.h"
#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv::torch_ops {

/// The view mlakv.torch's `_view` builds: the tensor's data pointer, dtype
/// (kOther for any dtype mlakv does not name), shape, strides and device.
/// `fp8_cache`: a float8_e4m3fn tensor is the uint8 bytes of an fp8 cache, as
/// engines type the stock writer's cache.
TensorView view(const at::Tensor& t, bool fp8_cache = false);
/// mlakv's DType of a torch dtype (kOther for those mlakv does not name).
DType dtype_of(at::ScalarType dtype);

/// torch's current CUDA stream on t's device; nullptr (the CPU) otherwise.
StreamHandle stream(const at::Tensor& t);

/// kv_c's and k_pe's widths in `format`; an unknown id gets 512 and 64 and is
/// refused by the library call itself (mlakv/__init__.py's _widths).
TokenGeometry widths(std::string_view format);

/// torch's Python spelling of a dtype ("torch.float16"), as mlakv.torch's messages print it.
std::string dtype_name(at::ScalarType dtype);

/// "mlakv::<function>(<format>): <name>: <rule>, got <got>" as TypeError / ValueError (mlakv/_checks.py's Call).
[[noreturn]] void type_error(std::string_view function, std::string_view format, std::string_view name,
                             std::string_view rule, std::string_view got);
[[noreturn]] void value_error(std::string_view function, std::string_view format, std::string_view name,
                              std::string_view rule, std::string_view got);

/// Rethrows the exception in flight: mlakv::Error as c10::TypeError (kDtype),
/// c10::NotImplementedError (kUnsupported), c10::Error (kBackend: RuntimeError)
/// or c10::ValueError, with the library's text; anything else as it is.
[[noreturn]] void rethrow_as_torch_error();

/// Runs f, translating mlakv::Error (see rethrow_as_torch_error).
template <class F>
decltype(auto) translated(F&& f) {
  try {
    return f();
  } catch (...) {
    rethrow_as_torch_error();
  }
}

}  // namespace mlakv::torch_ops
