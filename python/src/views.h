// SPDX-License-Identifier: Apache-2.0
// DLPack arrays (nanobind ndarrays) -> mlakv::TensorView, and error translation.
#pragma once

#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv::python {

namespace nb = nanobind;

/// `reinterpret_16bit` ("bf16"/"fp16") relabels a uint16 array: numpy has no
/// bfloat16, so the Python layer passes ml_dtypes arrays as uint16 views.
/// Inputs are taken as read-only arrays (numpy views of bytes included);
/// outputs and caches as writable ones.
TensorView to_view(const nb::ndarray<nb::ro>& array,
                   const std::optional<std::string>& reinterpret_16bit = std::nullopt);
TensorView to_view(const nb::ndarray<>& array, const std::optional<std::string>& reinterpret_16bit = std::nullopt);

/// A view from mlakv.torch's tuple (data_ptr, dtype, shape, strides,
/// device_index): dtype is mlakv::DType's value, device_index -1 the CPU.
TensorView raw_view(nb::handle view);
inline const TensorView* pointer(const std::optional<TensorView>& view) { return view ? &*view : nullptr; }

/// A cudaStream_t passed from Python as an integer (torch's .cuda_stream, CuPy's .ptr).
inline StreamHandle to_stream(std::uintptr_t stream) { return reinterpret_cast<StreamHandle>(stream); }

/// mlakv._mlakv.MlaKvCacheWriter (engine.cpp).
void register_engine_seam(nb::module_& m);

/// mlakv::Error -> TypeError (dtype), NotImplementedError (unsupported), else ValueError.
void register_error_translator();

}  // namespace mlakv::python
