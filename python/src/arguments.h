// SPDX-License-Identifier: Apache-2.0
// Python arguments -> the values an op call takes: arrays (any DLPack
// producer) as views, str, int, float, bool, a stream. Each that cannot be
// converted is refused with the library's error naming it
// (python/ops/argument_errors.h): never nanobind's signature dump or a
// std::bad_cast.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>  // every nb::cast<std::string> of the module sees the one caster

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "argument_errors.h"
#include "mlakv/tensor_view.h"

namespace mlakv::python {

namespace nb = nanobind;
using bindings::CallName;

/// The arrays of one call, alive until it returns: an array imported from a DLPack capsule owns the
/// tensor it describes (the capsule may be the only reference left), and frees it when destroyed.
struct ImportedArrays {
  std::deque<nb::ndarray<>> written;
  std::deque<nb::ndarray<nb::ro>> read;
};

/// The text of a str that is text (UTF-8 encodable, no NUL), else nullopt: a call's format, as its errors show it.
std::optional<std::string_view> text_of(nb::handle h);

/// An array as a view (`reinterpret_16bit` "bf16"/"fp16" relabels a uint16 array: numpy has no bfloat16).
/// Refused, naming it: not an array, one its producer cannot export (the producer's reason, e.g. a numpy
/// array in the other byte order), a read-only array where it is `written`, more dims than kMaxDims.
TensorView array_argument(const CallName& call, std::string_view name, nb::handle h, bool written,
                          const std::optional<std::string>& reinterpret_16bit, ImportedArrays& arrays);
/// An array, or the pair (a uint16 array, "bf16" or "fp16") the Python package passes numpy bfloat16 as.
TensorView tagged_array_argument(const CallName& call, std::string_view name, nb::handle h, bool written,
                                 ImportedArrays& arrays);

std::string text_argument(const CallName& call, std::string_view name, nb::handle h);
std::int64_t int_argument(const CallName& call, std::string_view name, nb::handle h);
/// An int beyond the double range is +-inf (as mlakv/_checks.py's real makes it): the library's rule refuses it.
double real_argument(const CallName& call, std::string_view name, nb::handle h);
bool bool_argument(const CallName& call, std::string_view name, nb::handle h);
/// A cudaStream_t passed as an int (torch's .cuda_stream, CuPy's .ptr).
std::uintptr_t stream_argument(const CallName& call, std::string_view name, nb::handle h);

}  // namespace mlakv::python
