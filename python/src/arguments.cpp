// SPDX-License-Identifier: Apache-2.0
#include "arguments.h"

#include <limits>

#include "views.h"

namespace mlakv::python {
namespace {

using bindings::argument_error;

// type(x).__name__, as mlakv/_checks.py names a wrong argument's type.
std::string python_type_name(nb::handle h) { return nb::cast<std::string>(nb::handle(h.type()).attr("__name__")); }

// The first line of the exception in flight's text, "<Type>: <message>".
std::string exception_line(const nb::python_error& e) {
  std::string text = nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
  nb::str message = nb::str(e.value());
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(message.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    return text;
  }
  const std::string_view message_text(data, static_cast<std::size_t>(size));
  return text + ": " + std::string(message_text.substr(0, message_text.find('\n')));
}

[[noreturn]] void not_an_array(const CallName& call, std::string_view name, nb::handle h) {
  if (nb::hasattr(h, "__dlpack__")) {
    try {
      (void)h.attr("__dlpack__")();
    } catch (const nb::python_error& e) {  // the producer's own reason (numpy: byte order, read-only)
      argument_error(call, ErrorCode::kDtype, name, "must be an array its producer can export through DLPack",
                     python_type_name(h) + " (" + exception_line(e) + ")");
    }
    argument_error(call, ErrorCode::kDtype, name, "must be an array on a device and of a dtype DLPack describes",
                   python_type_name(h));
  }
  argument_error(call, ErrorCode::kDtype, name, "must be an array (numpy, torch, CuPy or another DLPack producer)",
                 python_type_name(h));
}

template <class Array>
TensorView checked_view(const CallName& call, std::string_view name, const Array& array,
                        const std::optional<std::string>& reinterpret_16bit) {
  if (array.ndim() > static_cast<std::size_t>(kMaxDims)) {
    argument_error(call, ErrorCode::kShape, name, "must have at most " + std::to_string(kMaxDims) + " dims",
                   std::to_string(array.ndim()) + " dims");
  }
  return to_view(array, reinterpret_16bit);
}

// An int as mlakv/_checks.py's int_text shows it: its digits, or its size when they would be too many to read.
std::string int_text(nb::handle h) {
  const auto bits = nb::cast<std::int64_t>(h.attr("bit_length")());
  return bits <= 256 ? nb::cast<std::string>(nb::str(h)) : "an int of " + std::to_string(bits) + " bits";
}

}  // namespace

std::optional<std::string_view> text_of(nb::handle h) {
  if (!PyUnicode_Check(h.ptr())) return std::nullopt;
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  const std::string_view text(data, static_cast<std::size_t>(size));
  return bindings::text_fault(text).empty() ? std::optional<std::string_view>(text) : std::nullopt;
}

TensorView array_argument(const CallName& call, std::string_view name, nb::handle h, bool written,
                          const std::optional<std::string>& reinterpret_16bit, ImportedArrays& arrays) {
  if (written) {
    nb::ndarray<> array;
    if (nb::try_cast(h, array)) {
      return checked_view(call, name, arrays.written.emplace_back(std::move(array)), reinterpret_16bit);
    }
    nb::ndarray<nb::ro> read_only;
    if (nb::try_cast(h, read_only)) {
      argument_error(call, ErrorCode::kValue, name, "must be writable (it is written in place)", "a read-only array");
    }
  } else {
    nb::ndarray<nb::ro> array;
    if (nb::try_cast(h, array)) {
      return checked_view(call, name, arrays.read.emplace_back(std::move(array)), reinterpret_16bit);
    }
  }
  not_an_array(call, name, h);
}

TensorView tagged_array_argument(const CallName& call, std::string_view name, nb::handle h, bool written,
                                 ImportedArrays& arrays) {
  if (!nb::isinstance<nb::tuple>(h)) return array_argument(call, name, h, written, std::nullopt, arrays);
  const nb::tuple pair = nb::borrow<nb::tuple>(h);
  const std::optional<std::string_view> tag = pair.size() == 2 ? text_of(pair[1]) : std::nullopt;
  if (!tag || (*tag != "bf16" && *tag != "fp16")) {
    argument_error(call, ErrorCode::kDtype, name, "must be an array or the pair (a uint16 array, 'bf16' or 'fp16')",
                   "a tuple");
  }
  return array_argument(call, name, pair[0], written, std::string(*tag), arrays);
}

std::string text_argument(const CallName& call, std::string_view name, nb::handle h) {
  if (!PyUnicode_Check(h.ptr())) argument_error(call, ErrorCode::kDtype, name, "must be a str", python_type_name(h));
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    argument_error(call, ErrorCode::kValue, name, "must be valid Unicode (a lone surrogate has no UTF-8 encoding)",
                   nb::cast<std::string>(nb::repr(h)));
  }
  return bindings::checked_text(call, name, std::string(data, static_cast<std::size_t>(size)));
}

std::int64_t int_argument(const CallName& call, std::string_view name, nb::handle h) {
  std::int64_t value = 0;
  if (!PyBool_Check(h.ptr()) && nb::try_cast(h, value)) return value;
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    argument_error(call, ErrorCode::kValue, name, "must fit int64 (in [-2^63, 2^63))", int_text(h));
  }
  argument_error(call, ErrorCode::kDtype, name, "must be an int", python_type_name(h));
}

double real_argument(const CallName& call, std::string_view name, nb::handle h) {
  double value = 0;
  if (!PyBool_Check(h.ptr()) && nb::try_cast(h, value)) return value;
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {  // beyond the double range
    const bool negative = PyObject_RichCompareBool(h.ptr(), nb::int_(0).ptr(), Py_LT) == 1;
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  argument_error(call, ErrorCode::kDtype, name, "must be a float", python_type_name(h));
}

bool bool_argument(const CallName& call, std::string_view name, nb::handle h) {
  bool value = false;
  if (nb::try_cast(h, value)) return value;
  argument_error(call, ErrorCode::kDtype, name, "must be a bool", python_type_name(h));
}

std::uintptr_t stream_argument(const CallName& call, std::string_view name, nb::handle h) {
  std::uintptr_t value = 0;
  if (!PyBool_Check(h.ptr()) && nb::try_cast(h, value)) return value;
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    argument_error(call, ErrorCode::kValue, name, "must be a cudaStream_t in [0, 2^64)", int_text(h));
  }
  argument_error(call, ErrorCode::kDtype, name, "must be an int cudaStream_t or a torch/CuPy stream",
                 python_type_name(h));
}

}  // namespace mlakv::python
