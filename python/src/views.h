// SPDX-License-Identifier: Apache-2.0
// DLPack arrays (nanobind ndarrays) -> mlakv::TensorView, and error translation.
#pragma once

#include <nanobind/ndarray.h>

#include <optional>
#include <string>

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

/// mlakv::Error -> TypeError (dtype), NotImplementedError (unsupported), else ValueError.
void register_error_translator();

}  // namespace mlakv::python
